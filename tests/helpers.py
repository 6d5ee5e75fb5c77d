"""Helpers the end-to-end tests share: predicting through a pushed SavedModel."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np

from pipeline.ingest import DIGITS_CSV


def digits_rows(limit: int | None = None) -> list[dict[str, str]]:
    text = gzip.decompress(DIGITS_CSV.read_bytes()).decode()
    rows = list(csv.DictReader(text.splitlines()))
    return rows[:limit] if limit else rows


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def to_example(row: dict[str, str], drop: str) -> bytes:
    """A raw tf.Example as CsvExampleGen writes it: ints, floats or bytes; empty = absent."""
    import tensorflow as tf

    feature = {}
    for key, value in row.items():
        if key == drop or value == "":
            continue
        try:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
        except ValueError:
            try:
                feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
            except ValueError:
                feature[key] = tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[value.encode()])
                )
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def predict_classes(saved_model_dir: str | Path, rows, label: str) -> np.ndarray:
    """Class names the pushed model's serving_default signature returns for `rows`."""
    import tensorflow as tf

    serve = tf.saved_model.load(str(saved_model_dir)).signatures["serving_default"]
    examples = tf.constant([to_example(r, drop=label) for r in rows])
    return np.array([c.decode() for c in serve(examples=examples)["classes"].numpy()])


def pushed_versions(serving_model_dir: Path) -> list[str]:
    return sorted(p.name for p in serving_model_dir.iterdir() if p.is_dir())

"""Training order does not depend on input order: a label-sorted train split larger than the
in-memory bound (lowered here) trains as well as the same split trained from memory, where
every pass is a fresh permutation (components/training/datasets.py: shuffled_split)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from amp_pipeline.components.training import datasets
from amp_pipeline.components.training.options import TrainSpec
from amp_pipeline.core.names import FEATURES_KEY, LABEL_KEY

ROWS, WIDTH, CLASSES = 24_000, 8, 4  # twice the shuffle buffer's 10,000, and more


def _examples(x: np.ndarray, y: np.ndarray) -> list[bytes]:
    return [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    FEATURES_KEY: tf.train.Feature(float_list=tf.train.FloatList(value=row)),
                    LABEL_KEY: tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                }
            )
        ).SerializeToString()
        for row, label in zip(x.tolist(), y.tolist(), strict=True)
    ]


@pytest.fixture(scope="module")
def sorted_split(tmp_path_factory):
    """A Transform-like output: gzipped TFRecords of (x, label), sorted by label, two files."""
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

    root = tmp_path_factory.mktemp("order")
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(CLASSES, WIDTH)) * 1.2
    y = np.sort(rng.integers(CLASSES, size=ROWS))
    x = (centres[y] + rng.normal(size=(ROWS, WIDTH))).astype(np.float32)
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    records = _examples(x, y)
    for i, part in enumerate((records[: ROWS // 2], records[ROWS // 2 :])):
        with tf.io.TFRecordWriter(str(root / f"train-{i}.gz"), options) as writer:
            for record in part:
                writer.write(record)
    feature_spec = {
        FEATURES_KEY: tf.io.FixedLenFeature([WIDTH], tf.float32),
        LABEL_KEY: tf.io.FixedLenFeature([], tf.int64),
    }
    metadata_io.write_metadata(
        dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(feature_spec)),
        str(root / "transform" / "transformed_metadata"),
    )
    test_y = rng.integers(CLASSES, size=4000)
    test_x = (centres[test_y] + rng.normal(size=(4000, WIDTH))).astype(np.float32)
    spec = TrainSpec(
        train_files=(str(root / "train-*.gz"),),
        eval_files=(),
        transform_output=str(root / "transform"),
        serving_model_dir=str(root / "serving"),
        model_run_dir=str(root / "run"),
        data_spec={"rows": ROWS},
        batch_size=64,
    )
    return spec, (test_x, test_y), y


def _accuracy(ds, test) -> float:
    import keras

    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [keras.Input((WIDTH,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)]
    )
    model.compile(
        keras.optimizers.Adam(3e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    model.fit(ds.take(250), verbose=0)  # 16,000 examples: under one pass over the split
    return float(np.mean(model.predict(test[0], verbose=0).argmax(1) == test[1]))


def _classes_per_batch(ds, batches: int = 50) -> float:
    """The median number of distinct labels in the first `batches` batches."""
    return float(np.median([len(np.unique(y)) for _, y in ds.take(batches).as_numpy_iterator()]))


@pytest.mark.e2e
def test_a_sorted_split_past_the_in_memory_bound_trains_as_well_as_from_memory(
    sorted_split, monkeypatch
):
    spec, test, _ = sorted_split
    from_memory = _accuracy(datasets.train_dataset(spec, 64, spec.seed), test)
    monkeypatch.setattr(datasets, "IN_MEMORY_MAX_BYTES", 0)  # the bound lowered: the split streams
    datasets._shuffled_copy.cache_clear()
    assert datasets.memory_arrays(spec, 64) is None
    streamed = _accuracy(datasets.train_dataset(spec, 64, spec.seed), test)
    assert from_memory > 0.75
    assert abs(streamed - from_memory) <= 0.02, (streamed, from_memory)
    # Each batch of the streamed split holds every class about equally; the files as written,
    # through the 10,000-example shuffle buffer, hand over a class or two per batch.
    assert _classes_per_batch(datasets.train_dataset(spec, 64, spec.seed)) == 4
    as_written = datasets.make_dataset(spec.train_files, spec.transform_output, 64, spec.seed, True)
    assert _classes_per_batch(as_written) <= 2


@pytest.mark.e2e
def test_the_shuffled_copy_holds_every_record_once_in_a_random_order(sorted_split, tmp_path):
    spec, _, labels = sorted_split
    files = sorted(tf.io.gfile.glob(spec.train_files[0]))
    parts = datasets.shuffled_split(files, tmp_path / "copy", 7, 1_000_000, 200_000)
    assert len(parts) == 5 and not (tmp_path / "copy" / "buckets").exists()
    features = {
        FEATURES_KEY: tf.io.FixedLenFeature([WIDTH], tf.float32),
        LABEL_KEY: tf.io.FixedLenFeature([], tf.int64),
    }
    out = [
        tf.io.parse_single_example(r, features)[LABEL_KEY].numpy()
        for r in tf.data.TFRecordDataset(parts)
    ]
    assert sorted(out) == sorted(labels.tolist())
    # The order: no run of one class, and the first 1,000 hold every class about equally.
    first = np.bincount(out[:1000], minlength=CLASSES) / 1000
    assert np.all(np.abs(first - np.bincount(labels) / len(labels)) < 0.06)
    position = np.corrcoef(np.arange(len(out)), out)[0, 1]
    assert abs(position) < 0.05


def test_the_reference_sample_of_a_streamed_sorted_split_is_uniform(sorted_split, monkeypatch):
    """Past the in-memory bound the reference baseline reads a sample of at most that many
    bytes: drawn from the shuffled copy, it holds each class about equally; the first rows of
    the label-sorted files would hold the first classes only."""
    spec, _, labels = sorted_split
    monkeypatch.setattr(datasets, "IN_MEMORY_MAX_BYTES", 400_000)  # 11,111 of 24,000 rows
    datasets._shuffled_copy.cache_clear()
    datasets.first_rows.cache_clear()
    assert datasets.memory_arrays(spec, 1) is None
    _, y = datasets.train_sample(spec)
    assert len(y) == 400_000 // ((WIDTH + 1) * 4)
    shares = np.bincount(y, minlength=CLASSES) / len(y)
    assert np.all(np.abs(shares - np.bincount(labels) / len(labels)) < 0.02), shares
    assert np.bincount(labels[: len(y)], minlength=CLASSES)[-1] == 0  # what the first rows hold


def test_both_twins_read_one_shuffled_copy_which_the_run_removes(sorted_split, tmp_path):
    """A streamed split laid out as Transform writes it (<artifact>/Split-train/): the first
    twin makes the copy beside Split-train, the second (another model_run_dir, another
    process: the cache cleared) reads the same parts without writing them again."""
    import dataclasses
    import shutil

    spec, _, labels = sorted_split
    split = tmp_path / "Transform" / "transformed_examples" / "7" / "Split-train"
    split.mkdir(parents=True)
    for f in tf.io.gfile.glob(spec.train_files[0]):
        shutil.copy(f, split)
    twins = [
        dataclasses.replace(
            spec, train_files=(str(split / "*.gz"),), model_run_dir=str(tmp_path / name)
        )
        for name in ("amp", "fp32")
    ]
    datasets._shuffled_copy.cache_clear()
    first = datasets.shuffled_train_files(twins[0])
    written = {p: Path(p).stat().st_mtime_ns for p in first}
    datasets._shuffled_copy.cache_clear()
    second = datasets.shuffled_train_files(twins[1])
    assert second == first
    assert {p: Path(p).stat().st_mtime_ns for p in second} == written  # not written again
    assert all(Path(p).parent.parent.name == datasets.SHARED_SHUFFLE_DIR for p in first)
    assert not (tmp_path / "amp" / "train_shuffled").exists()
    count = sum(1 for _ in tf.data.TFRecordDataset(list(first)))
    assert count == len(labels)
    removed = datasets.remove_shared_shuffles(str(tmp_path))
    assert removed and not any(Path(p).exists() for p in first)
    datasets._shuffled_copy.cache_clear()


def test_the_eval_split_read_into_memory_gives_the_streamed_batches(sorted_split):
    import dataclasses

    spec, _, _ = sorted_split
    spec = dataclasses.replace(spec, eval_files=spec.train_files, batch_size=500)
    streamed = datasets.make_dataset(spec.eval_files, spec.transform_output, 500, 0, False)
    in_memory = datasets.eval_dataset(spec)
    pairs = list(zip(in_memory.as_numpy_iterator(), streamed.as_numpy_iterator(), strict=True))
    assert len(pairs) == ROWS // 500 + (ROWS % 500 > 0)
    for (mx, my), (sx, sy) in pairs:
        np.testing.assert_array_equal(mx, sx)
        np.testing.assert_array_equal(my, sy)

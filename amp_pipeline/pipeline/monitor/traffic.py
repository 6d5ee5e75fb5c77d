"""Logged requests decoded into the features and answers the model saw.

`serving_default` takes serialized tf.Examples and `predict_raw` takes raw features: both are
decoded as the serving signature reads them, one row per example. `predict_features` takes the
Transform output `x`, which no training statistic describes: such requests are counted and left
out. Each row keeps the version that answered and its request's key (records.request_key), so a
shadow's answers pair with production's.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from amp_pipeline.core import names
from amp_pipeline.core.errors import InputError
from amp_pipeline.serving.requestlog.records import (
    EXAMPLES_INPUT,
    arrays,
    read_logs_after,
    request_key,
)
from amp_pipeline.serving.requestlog.shadow import SHADOW_ORIGIN

ANSWER = "__answer__"  # a row's served answer: the class, or the regression value
VERSION = "__version__"
KEY = "__request__"  # the request's content key and the row's place in it
SHADOW = "__shadow__"  # whether a shadow version answered (serve --shadow), off the answer's path


@dataclasses.dataclass
class Traffic:
    """The logged traffic of one model: `rows` (features, answer, version, request key) and what
    was not used."""

    rows: pd.DataFrame
    records: int = 0
    skipped: Counter = dataclasses.field(default_factory=Counter)
    # {file name: records read, the earlier windows' included}: where the next window starts
    cursor: dict[str, int] = dataclasses.field(default_factory=dict)
    newest: int = 0  # the newest record's timestamp_secs (0: none read)

    def production(self) -> pd.DataFrame:
        """The answers users got: every row a shadow version did not give."""
        return self.rows[~self.rows[SHADOW]]


def _example_features(serialized: bytes) -> dict:
    import tensorflow as tf

    example = tf.train.Example.FromString(serialized)
    row = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        values = list(getattr(feature, kind).value) if kind else []
        if not values:
            continue
        value = values[0] if len(values) == 1 else values
        row[name] = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return row


def _raw_rows(inputs: dict[str, np.ndarray]) -> list[dict]:
    n = len(next(iter(inputs.values()))) if inputs else 0
    rows: list[dict[str, Any]] = [{} for _ in range(n)]
    for name, values in inputs.items():
        for i, value in enumerate(np.asarray(values).reshape(n, -1)):
            v = value[0] if value.size == 1 else value.tolist()
            rows[i][name] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return rows


def _answers(outputs: dict[str, np.ndarray], n: int) -> list:
    if names.CLASSES in outputs:
        return [
            c.decode("utf-8", "replace") if isinstance(c, bytes) else str(c)
            for c in np.asarray(outputs[names.CLASSES]).reshape(-1)
        ]
    if names.PREDICTIONS in outputs:
        return [float(v) for v in np.asarray(outputs[names.PREDICTIONS]).reshape(-1)]
    return [None] * n


def read_traffic(folder: Path, model: str, cursor: dict[str, int] | None = None) -> Traffic:
    """Every logged example of `model` in `folder` past `cursor` (the records an earlier window
    read: {file name: records}). InputError (exit 2) when there is nothing."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"--requests {folder}: no such folder")
    rows: list[dict] = []
    cursor = {name: n for name, n in (cursor or {}).items() if (folder / name).is_file()}
    traffic = Traffic(pd.DataFrame(), cursor=dict(cursor))
    occurrences: Counter = Counter()
    for file_name, record in read_logs_after(folder, cursor):
        traffic.records += 1
        traffic.cursor[file_name] = traffic.cursor.get(file_name, 0) + 1
        traffic.newest = max(traffic.newest, int(record.log_metadata.timestamp_secs))
        spec = record.log_metadata.model_spec
        if spec.name != model:
            traffic.skipped[f"model {spec.name}"] += 1
            continue
        signature = spec.signature_name or names.SERVING_SIGNATURE
        inputs = arrays(record.predict_log.request.inputs)
        if signature == names.SERVING_SIGNATURE and EXAMPLES_INPUT in inputs:
            batch = [_example_features(bytes(s)) for s in inputs[EXAMPLES_INPUT].reshape(-1)]
        elif signature == names.RAW_SIGNATURE:
            batch = _raw_rows(inputs)
        else:
            traffic.skipped[f"signature {signature} (no raw features)"] += 1
            continue
        answers = _answers(arrays(record.predict_log.response.outputs), len(batch))
        key = request_key(record)
        shadow = record.log_metadata.request_origin.endswith(SHADOW_ORIGIN)
        nth = occurrences[(key, shadow)]
        occurrences[(key, shadow)] += 1
        for i, (row, answer) in enumerate(zip(batch, answers, strict=False)):
            row[ANSWER] = answer
            row[VERSION] = spec.version.value
            row[KEY] = f"{key}/{nth}/{i}"
            row[SHADOW] = shadow
            rows.append(row)
    if traffic.records == 0 and cursor:  # an earlier window read what is there
        raise InputError(
            f"--requests {folder}: no request logged since the last check: nothing new to compare"
        )
    if traffic.records == 0:
        raise InputError(f"--requests {folder}: no request logs there (requests-*.tfrecord)")
    if not rows:
        why = ", ".join(f"{k}: {v}" for k, v in traffic.skipped.items())
        raise InputError(
            f"--requests {folder}: no logged request of model {model} to check ({why})"
        )
    traffic.rows = pd.DataFrame(rows)
    return traffic

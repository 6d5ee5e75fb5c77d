"""PredictionLog records: one served request and its answer, as TF Serving logs them, and the
files that hold them read back."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

FILE_GLOB = "requests-*.tfrecord"
EXAMPLES_INPUT = "examples"  # serving_default's one input: serialized tf.Examples


def without_features(
    inputs: dict[str, np.ndarray], signature_inputs: set[str], exclude: frozenset[str]
) -> dict[str, np.ndarray]:
    """`inputs` with the excluded features gone: dropped as named inputs (raw features), and cut
    out of each serialized tf.Example (serving_default's `examples`)."""
    if not exclude:
        return inputs
    out = {k: v for k, v in inputs.items() if k not in exclude}
    if EXAMPLES_INPUT in out and EXAMPLES_INPUT in signature_inputs:
        import tensorflow as tf

        kept = []
        for raw in np.asarray(out[EXAMPLES_INPUT]).reshape(-1):
            example = tf.train.Example.FromString(bytes(raw))
            for name in exclude:
                if name in example.features.feature:
                    del example.features.feature[name]
            kept.append(example.SerializeToString())
        out[EXAMPLES_INPUT] = np.asarray(kept, dtype=object)
    return out


def prediction_log(
    model: str,
    version: int,
    signature: str,
    inputs: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray],
    timestamp: float | None = None,
    origin: str = "",
    sample_rate: float = 1.0,
):
    """The PredictionLog of one Predict call: its request (model spec, signature, inputs) and
    response (outputs, the version that answered); the protocol it came by as
    `request_origin` ("grpc" or "rest") and the sampling rate it was logged at."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    record = prediction_log_pb2.PredictionLog()
    record.log_metadata.model_spec.name = model
    record.log_metadata.model_spec.version.value = version
    record.log_metadata.model_spec.signature_name = signature
    record.log_metadata.timestamp_secs = int(time.time() if timestamp is None else timestamp)
    record.log_metadata.request_origin = origin
    record.log_metadata.sampling_config.sampling_rate = sample_rate
    request = record.predict_log.request
    request.model_spec.CopyFrom(record.log_metadata.model_spec)
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(value)))
    response = record.predict_log.response
    response.model_spec.CopyFrom(record.log_metadata.model_spec)
    for name, value in outputs.items():
        response.outputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(value)))
    return record


def log_files(folder: Path) -> list[Path]:
    """The request log files in `folder`, oldest first (their names sort by time)."""
    return sorted(Path(folder).glob(FILE_GLOB))


def read_logs(folder: Path) -> Iterator:
    """Every PredictionLog in `folder`'s files, oldest first. A file still being written may end
    in a partial record: reading stops there, at the last whole one."""
    for _, record in read_logs_after(folder, {}):
        yield record


def read_logs_after(folder: Path, cursor: dict[str, int]) -> Iterator[tuple[str, Any]]:
    """(file name, PredictionLog) for the records of `folder` past `cursor` ({file name: records
    already read}), oldest first: a file only grows at its end, and a new file's name sorts
    after the older ones (writer.RequestLog)."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    for path in log_files(folder):
        try:
            dataset = tf.data.TFRecordDataset(str(path)).skip(cursor.get(path.name, 0))
            for raw in dataset.as_numpy_iterator():
                yield path.name, prediction_log_pb2.PredictionLog.FromString(raw)
        except tf.errors.DataLossError:
            continue


def arrays(tensor_map) -> dict[str, np.ndarray]:
    """A request's or response's tensors as numpy arrays."""
    import tensorflow as tf

    return {name: tf.make_ndarray(proto) for name, proto in tensor_map.items()}


def request_key(record) -> str:
    """The request's content: the same for a production answer and its shadow's (the shadow
    runs the very same inputs), so the two pair up."""
    digest = hashlib.sha256()
    inputs = record.predict_log.request.inputs
    for name in sorted(inputs):
        digest.update(name.encode())
        digest.update(inputs[name].SerializeToString(deterministic=True))
    return digest.hexdigest()

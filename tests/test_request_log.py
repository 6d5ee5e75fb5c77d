"""The request log writer (serving/requestlog/): PredictionLog records TF Serving's tools parse,
owner-only files, excluded features never written, drops under load instead of waiting, and a
bounded total."""

from __future__ import annotations

import logging
import random
import stat
import threading
import time

import numpy as np
import pytest

from amp_pipeline.serving.requestlog import writer as request_log
from amp_pipeline.serving.requestlog.records import log_files, read_logs
from amp_pipeline.serving.requestlog.writer import RequestLog, RequestLogConfig
from tests.helpers import tf_example

RAW = {"age": np.array([[31], [47]]), "email": np.array([[b"ann@example.com"], [b"bo@x.org"]])}
OUT = {"classes": np.array([b"yes", b"no"]), "probabilities": np.array([[0.2, 0.8], [0.7, 0.3]])}


def test_records_are_prediction_logs_with_model_version_signature_and_owner_only(tmp_path):
    from tensorflow_serving.apis import prediction_log_pb2

    folder = tmp_path / "logs"
    log = RequestLog(RequestLogConfig(folder))
    assert log.draw()
    log.offer("churn", 3, "predict_raw", RAW, OUT, set(RAW), origin="rest")
    stats = log.close()
    assert (stats.offered, stats.written, stats.dropped) == (1, 1, 0)
    (path,) = log_files(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    (record,) = read_logs(folder)
    assert isinstance(record, prediction_log_pb2.PredictionLog)
    spec = record.predict_log.request.model_spec
    assert (spec.name, spec.version.value, spec.signature_name) == ("churn", 3, "predict_raw")
    assert record.predict_log.response.model_spec.version.value == 3
    assert record.log_metadata.request_origin == "rest"
    assert set(record.predict_log.request.inputs) == {"age", "email"}
    assert set(record.predict_log.response.outputs) == {"classes", "probabilities"}


def test_excluded_features_never_reach_the_files(tmp_path):
    folder = tmp_path / "logs"
    log = RequestLog(RequestLogConfig(folder, exclude=("email",)))
    examples = np.array(
        [tf_example(age=31, email=b"ann@example.com"), tf_example(age=47, email=b"bo@x.org")],
        dtype=object,
    )
    for signature, inputs in (("predict_raw", RAW), ("serving_default", {"examples": examples})):
        log.draw()
        log.offer("churn", 1, signature, inputs, OUT, set(inputs))
    log.close()
    written = b"".join(p.read_bytes() for p in log_files(folder))
    assert b"ann@example.com" not in written and b"bo@x.org" not in written
    raw, served = list(read_logs(folder))
    assert set(raw.predict_log.request.inputs) == {"age"}
    import tensorflow as tf

    kept = tf.make_ndarray(served.predict_log.request.inputs["examples"])
    features = tf.train.Example.FromString(kept[0]).features.feature
    assert set(features) == {"age"} and features["age"].int64_list.value == [31]


def test_under_load_requests_are_dropped_and_counted_not_waited_for(tmp_path, monkeypatch):
    """A writer far slower than the traffic: every offer returns at once, the overflow is
    dropped and counted, and what was queued is still written at close."""
    release = threading.Event()
    real_write = RequestLog._write

    def slow_write(self, item):
        release.wait(5)
        real_write(self, item)

    monkeypatch.setattr(RequestLog, "_write", slow_write)
    log = RequestLog(RequestLogConfig(tmp_path / "logs", queue_size=4))
    started = time.monotonic()
    for _ in range(200):
        log.draw()
        log.offer("churn", 1, "predict_raw", RAW, OUT, set(RAW))
    offered_in = time.monotonic() - started
    release.set()
    stats = log.close()
    # 200 offers against a writer stuck for up to 5 s: had one waited, this would take 5 s.
    assert offered_in < 2.0
    assert stats.dropped >= 195 - 4 and stats.written + stats.dropped == 200
    assert len(list(read_logs(tmp_path / "logs"))) == stats.written


def test_the_total_stays_bounded_and_each_removal_is_said(tmp_path, caplog):
    folder = tmp_path / "logs"
    config = RequestLogConfig(folder, max_mb=0.5)  # files of 128 KiB, at most 512 KiB in all
    log = RequestLog(config)
    big = {"text": np.array([[b"x" * 4000]] * 4)}
    with caplog.at_level(logging.WARNING, logger=request_log.__name__):
        for _ in range(800):  # about 13 MB of records
            log.draw()
            while not log.offer("m", 1, "predict_raw", big, OUT, set(big)):
                time.sleep(0.001)  # this test wants every record written, not dropped
        stats = log.close()
    total = sum(p.stat().st_size for p in log_files(folder))
    assert stats.written == 800 and stats.files_removed > 0
    assert total <= config.max_bytes + 20_000  # the current file may pass its size by a record
    removals = [r.getMessage() for r in caplog.records if "removed requests-" in r.getMessage()]
    assert len(removals) == stats.files_removed and "--log-max-mb 0.5" in removals[0]


def test_a_sampled_share_is_logged(tmp_path):
    log = RequestLog(RequestLogConfig(tmp_path / "logs", sample_rate=0.25), rng=random.Random(7))
    for _ in range(2000):
        if log.draw():
            log.offer("m", 1, "predict_raw", RAW, OUT, set(RAW))
    stats = log.close()
    assert stats.written + stats.sampled_out == 2000
    assert 400 < stats.written < 600
    record = next(read_logs(tmp_path / "logs"))
    assert record.log_metadata.sampling_config.sampling_rate == 0.25


@pytest.mark.parametrize("kwargs", [{"sample_rate": 0.0}, {"sample_rate": 1.5}, {"max_mb": 0}])
def test_bad_settings_name_their_argument(tmp_path, kwargs):
    with pytest.raises(ValueError, match=f"argument {next(iter(kwargs))}"):
        RequestLogConfig(tmp_path, **kwargs)

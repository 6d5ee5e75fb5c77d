"""`amp-pipeline monitor`'s parts without a run: logged requests decoded as the serving signatures
read them, the served answers' drift, and a shadow version paired with production."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from amp_pipeline.core.errors import InputError
from amp_pipeline.pipeline.monitor import drift, shadow
from amp_pipeline.pipeline.monitor.traffic import ANSWER, KEY, SHADOW, VERSION, read_traffic
from amp_pipeline.serving.requestlog.writer import RequestLog, RequestLogConfig
from tests.helpers import tf_example


def _log(folder, entries):
    """Records as `serve` writes them; a version-3 record is a shadow's answer."""
    log = RequestLog(RequestLogConfig(folder))
    for model, version, signature, inputs, outputs in entries:
        log.draw()
        origin = "grpc/shadow" if version == 3 else "grpc"
        log.offer(model, version, signature, inputs, outputs, set(inputs), origin)
    log.close()


def test_both_signatures_decode_into_one_row_per_example_and_shadows_pair(tmp_path):
    examples = [tf_example(age=31, city=b"Oslo"), tf_example(age=47, city=b"Rome")]
    examples = np.array(examples, object)
    raw = {"age": np.array([[52]]), "city": np.array([[b"Lima"]])}
    answer = {"classes": np.array([b"yes", b"no"])}
    shadow_answer = {"classes": np.array([b"yes", b"yes"])}
    no = {"classes": np.array([b"no"])}
    _log(
        tmp_path,
        [
            ("churn", 2, "serving_default", {"examples": examples}, answer),
            ("churn", 3, "serving_default", {"examples": examples}, shadow_answer),
            ("churn", 2, "predict_raw", raw, no),
            ("churn", 2, "predict_features", {"x": np.zeros((1, 4))}, no),
            ("other", 1, "predict_raw", raw, no),
        ],
    )  # fmt: skip
    traffic = read_traffic(tmp_path, "churn")
    assert traffic.records == 5
    assert dict(traffic.skipped) == {
        "signature predict_features (no raw features)": 1,
        "model other": 1,
    }
    production = traffic.production()
    assert production[["age", "city", ANSWER]].values.tolist() == [
        [31, "Oslo", "yes"], [47, "Rome", "no"], [52, "Lima", "no"],
    ]  # fmt: skip
    assert shadow.versions(traffic.rows) == (2, 3)
    report = shadow.shadow_report(traffic.rows, 2, 3, regression=False)
    assert (report["pairs"], report["unpaired"]) == (2, 1)  # the raw request had no shadow
    assert report["agreement"]["share"] == 0.5
    lo, hi = report["agreement"]["interval"]
    assert 0 < lo < 0.5 < hi < 1


def test_no_logs_or_no_such_model_is_bad_input(tmp_path):
    with pytest.raises(InputError, match="no request logs there"):
        read_traffic(tmp_path, "churn")
    _log(tmp_path, [("other", 1, "predict_raw", {"a": np.array([[1]])}, {})])
    with pytest.raises(InputError, match="no logged request of model churn"):
        read_traffic(tmp_path, "churn")


def test_prediction_drift_of_classes_and_of_values():
    thresholds = drift.Thresholds()
    same = drift.prediction_drift(["a", "b"] * 50, ["a", "b"] * 200, False, thresholds)
    assert same["distance"] == 0 and not same["beyond"]
    moved = drift.prediction_drift(["a"] * 80 + ["b"] * 20, ["a", "b"] * 200, False, thresholds)
    assert moved["distance"] == pytest.approx(0.3) and moved["beyond"]
    assert moved["shares"]["a"] == [0.5, 0.8]
    rng = np.random.default_rng(0)
    reference = rng.normal(0, 1, 2000).tolist()
    alike = drift.prediction_drift(rng.normal(0, 1, 2000).tolist(), reference, True, thresholds)
    shifted = drift.prediction_drift(rng.normal(2, 1, 2000).tolist(), reference, True, thresholds)
    assert alike["distance"] < 0.02 < 0.1 < shifted["distance"]
    assert drift.prediction_drift([], reference, True, thresholds)["skipped"]


def test_jensen_shannon_is_zero_for_the_same_and_one_for_disjoint():
    p = np.array([0.5, 0.5, 0.0, 0.0])
    assert drift.jensen_shannon(p, p) == 0
    assert drift.jensen_shannon(p, p[::-1]) == pytest.approx(1.0)


def _rows(production: list, candidate: list, ids: list[str]) -> pd.DataFrame:
    rows = []
    for i, (a, b, key) in enumerate(zip(production, candidate, ids, strict=True)):
        rows.append({"id": key, ANSWER: a, VERSION: 1, KEY: f"r{i}/0/0", SHADOW: False})
        rows.append({"id": key, ANSWER: b, VERSION: 2, KEY: f"r{i}/0/0", SHADOW: True})
    return pd.DataFrame(rows)


def test_labels_joined_on_a_request_key_give_a_paired_accuracy_change(tmp_path):
    n = 400
    truth = ["a"] * n
    production = ["a"] * 300 + ["b"] * 100
    candidate = ["a"] * 360 + ["b"] * 40  # right on 60 more
    ids = [f"u{i}" for i in range(n)]
    labels_csv = tmp_path / "labels.csv"
    pd.DataFrame({"id": ids, "y": truth}).to_csv(labels_csv, index=False)
    labels = shadow.read_labels(labels_csv, "id", "y")
    report = shadow.shadow_report(_rows(production, candidate, ids), 1, 2, False, labels, "id")
    labelled = report["labelled"]
    assert labelled["production_accuracy"] == 0.75 and labelled["candidate_accuracy"] == 0.9
    assert labelled["accuracy_change"] == pytest.approx(0.15)
    lo, hi = labelled["interval"]
    assert 0 < lo < 0.15 < hi
    with pytest.raises(InputError, match="no column 'user'"):
        shadow.read_labels(labels_csv, "user", "y")


def test_regression_shadow_reports_the_mean_absolute_difference_and_the_error_change(tmp_path):
    rng = np.random.default_rng(1)
    y = rng.normal(10, 2, 300)
    production = y + rng.normal(0, 1.0, 300)
    candidate = y + rng.normal(0, 0.5, 300)
    ids = [str(i) for i in range(300)]
    labels = pd.Series(y, index=ids)
    report = shadow.shadow_report(_rows(production, candidate, ids), 1, 2, True, labels, "id")
    a = report["agreement"]
    assert a["interval"][0] < a["mean_abs_difference"] < a["interval"][1]
    labelled = report["labelled"]
    assert labelled["mae_change"] < 0 and labelled["interval"][1] < 0  # the candidate is better


def test_a_folder_that_is_no_run_or_has_no_statistics_is_bad_input(tmp_path):
    from amp_pipeline.pipeline.monitor.run_record import read_run

    with pytest.raises(InputError, match="no run_summary.json: not an amp-pipeline run"):
        read_run(tmp_path)
    (tmp_path / "run_summary.json").write_text('{"status": "failed"}')
    with pytest.raises(InputError, match="no metadata.sqlite: the run recorded no statistics"):
        read_run(tmp_path, 1)


def test_served_values_are_counted_into_the_reference_buckets_as_tfdv_counts():
    """Integers on bucket edges (an age band 1-6, 10 buckets of 0.5) land where TFDV put them:
    the same values read as the same distribution, and a shift reads as one."""
    import tensorflow_data_validation as tfdv

    values = np.array([1] * 40 + [2] * 30 + [3] * 20 + [4] * 15 + [5] * 10 + [6] * 25, float)
    stats = tfdv.generate_statistics_from_dataframe(pd.DataFrame({"lectage": values}))
    reference = drift.feature_stats(stats, "lectage")
    assert drift.numeric_distance(reference, values) == pytest.approx(0, abs=1e-3)
    assert drift.numeric_distance(reference, np.minimum(values + 1, 6)) > 0.1

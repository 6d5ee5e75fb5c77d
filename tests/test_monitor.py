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


def test_a_feature_constant_in_training_reads_the_share_of_served_values_off_it():
    """TFDV's histogram of an always-zero pixel is one bucket [0, 0] that holds every served
    value: the share off the constant is what moves."""
    import tensorflow_data_validation as tfdv

    stats = tfdv.generate_statistics_from_dataframe(pd.DataFrame({"pixel_0": np.zeros(500)}))
    thresholds = drift.Thresholds()
    schema = drift.served_schema(tfdv.infer_schema(stats), "label", thresholds)
    for served, share, beyond in ((np.full(50, 16.0), 1.0, True), (np.zeros(50), 0.0, False)):
        frame = pd.DataFrame({"pixel_0": served})
        served_stats = tfdv.generate_statistics_from_dataframe(frame)
        checks = drift.feature_checks(stats, served_stats, schema, frame, thresholds)
        skew = checks["features"]["pixel_0"]["skew"]
        assert skew["comparator"] == drift.OFF_CONSTANT
        assert skew["distance"] == share and skew["beyond"] is beyond
    # One served row in 100 off the constant is a share of 0.01, under the threshold.
    assert drift.share_off_constant(stats.datasets[0].features[0], np.r_[np.zeros(99), 3]) == 0.01


def test_labels_with_an_empty_cell_are_read_as_the_log_writes_them(tmp_path):
    """An integer label with an empty cell: pandas' own reading makes it float ("3.0"), which
    never equals a served class "3"; the empty row is left out, the others are joined."""
    labels_csv = tmp_path / "labels.csv"
    labels_csv.write_text("id,label\n1,3\n2,\n3,5\n")
    labels = shadow.read_labels(labels_csv, "id", "label")
    assert labels.to_dict() == {"1": "3", "3": "5"}
    rows = _rows(["3", "4", "5"], ["3", "4", "1"], ["1", "2", "3"])
    labelled = shadow.shadow_report(rows, 1, 2, False, labels, "id")["labelled"]
    assert labelled["examples"] == 2 and labelled["production_accuracy"] == 1.0
    assert labelled["candidate_accuracy"] == 0.5


def test_the_regression_shadow_interval_is_student_t():
    """Five examples: the t quantile (2.776 at 4 degrees of freedom), not the normal 1.96."""
    diffs = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    report = shadow.shadow_report(_rows([0.0] * 5, list(diffs), list("abcde")), 1, 2, True)
    lo, hi = report["agreement"]["interval"]
    assert (hi - lo) / 2 == pytest.approx(2.7764 * diffs.std(ddof=1) / np.sqrt(5), rel=1e-3)


def test_a_second_check_reads_only_the_requests_logged_since_the_first(tmp_path):
    """1,000 requests of "a", checked; then 100 of "b": the second window is the 100, all "b"
    (over the whole folder the share of "b" would be 0.09, under the 0.1 threshold); a third
    check with nothing new says so."""
    from amp_pipeline.serving.requestlog.records import log_files

    def log(n: int, value: str) -> None:  # a new file each time, as a restarted server writes
        examples = np.array([tf_example(city=value.encode())] * n, object)
        answers = {"classes": np.array([b"no"] * n)}
        _log(tmp_path / "logs", [("churn", 2, "serving_default", {"examples": examples}, answers)])

    log(1000, "a")
    traffic = read_traffic(tmp_path / "logs", "churn")
    assert traffic.records == 1 and len(traffic.rows) == 1000
    log(100, "b")
    window = read_traffic(tmp_path / "logs", "churn", traffic.cursor)
    assert len(window.rows) == 100 and set(window.rows["city"]) == {"b"}
    assert window.cursor == {f.name: 1 for f in log_files(tmp_path / "logs")}
    assert len(window.cursor) == 2
    with pytest.raises(InputError, match="no request logged since the last check"):
        read_traffic(tmp_path / "logs", "churn", window.cursor)


def test_served_findings_the_run_tolerated_are_tolerated_unless_the_column_is_closed():
    """A new city, read through the vocabulary's OOV id, is no anomaly in an open column (as
    AnomalyCheck judged the eval split); declared closed (`--closed-columns city`), it is."""
    import tensorflow_data_validation as tfdv

    train = pd.DataFrame({"city": ["Oslo", "Rome"] * 50})
    stats = tfdv.generate_statistics_from_dataframe(train)
    thresholds = drift.Thresholds(categorical=1.0)
    schema = drift.served_schema(tfdv.infer_schema(stats), "label", thresholds)
    frame = pd.DataFrame({"city": ["Oslo", "Rome", "Lima"] * 10})
    served = tfdv.generate_statistics_from_dataframe(frame)
    open_ = drift.feature_checks(stats, served, schema, frame, thresholds, None, {"city"})
    assert open_["anomalies"] == {}
    assert [t["feature"] for t in open_["tolerated"]] == ["city"]
    closed = drift.feature_checks(stats, served, schema, frame, thresholds)
    assert list(closed["anomalies"]) == ["city"] and closed["tolerated"] == []


def test_an_integer_feature_with_missing_cells_is_still_an_integer():
    """pandas reads a column with a missing cell as float; TFDV would then call an INT feature
    FLOAT, a type anomaly on healthy traffic."""
    import tensorflow_data_validation as tfdv

    stats = tfdv.generate_statistics_from_dataframe(pd.DataFrame({"age": np.arange(100)}))
    thresholds = drift.Thresholds(numeric=1.0)
    schema = drift.served_schema(tfdv.infer_schema(stats), "label", thresholds)
    schema.feature[0].presence.min_fraction = 0  # optional, as AnomalyCheck makes it
    schema.feature[0].ClearField("shape")
    rows = pd.DataFrame({"age": [30, None, 41, 52] * 10})
    frame = drift.features_frame(rows, schema)
    served = tfdv.generate_statistics_from_dataframe(frame)
    checks = drift.feature_checks(stats, served, schema, frame, thresholds)
    assert checks["anomalies"] == {} and "age" in checks["features"]

"""Continuous training on a public table in spans: lme4's InstEval course ratings, split by how
many semesters ago the lecture was held (lectage 3, 2, 1: spans 1, 2, 3; 2,000 rows each,
tests/testdata/insteval_sample.csv.gz). The first run trains on spans 1-2 (--rolling-spans 2);
the next one, at the defaults, on the newest span, warm-started from the pushed model and gated
against it, through the documented loop (examples/retrain_when_moved.sh: `monitor` reads served
traffic that moved, exits 4, and the newest span is retrained); a span whose student ages
shifted stops a --drift fail run before training."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import ROOT, clean_env, run_cli
from tests.helpers import CHEAP, pushed_versions

pytestmark = pytest.mark.e2e
SAMPLE = ROOT / "tests" / "testdata" / "insteval_sample.csv.gz"
ARGS = (
    "--label", "rating", "--task", "regression", "--train-steps", "30", *CHEAP,
    "--error-tolerance", "0.2", "--min-speedup", "0",
)  # fmt: skip


def write_spans(folder: Path, shifted_span: bool = False) -> str:
    """span-1..3 (one CSV each, the lecture's age dropped), and with `shifted_span` a span 4:
    span 3's rows with every student 4 semesters further on."""
    with gzip.open(SAMPLE, "rt") as f:
        table = pd.read_csv(f)
    for span, lectage in ((1, 3), (2, 2), (3, 1)):
        (folder / f"span-{span}").mkdir(parents=True)
        part = table[table.lectage == lectage].drop(columns=["lectage"])
        part.to_csv(folder / f"span-{span}" / "ratings.csv", index=False)
    if shifted_span:
        (folder / "span-4").mkdir()
        part = (
            table[table.lectage == 1]
            .drop(columns=["lectage"])
            .assign(studage=lambda t: t.studage + 4)
        )
        part.to_csv(folder / "span-4" / "ratings.csv", index=False)
    return str(folder / "span-{SPAN}" / "*.csv")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("spans")
    pattern = write_spans(root / "data")
    out = root / "out"
    first = run_cli("run", "--data", pattern, "--span", "2", "--rolling-spans", "2",
                    "--output", str(out), *ARGS)  # fmt: skip
    first_summary = json.loads((out / "run_summary.json").read_text())
    logs = root / "logs"
    serve_shifted_traffic(out, logs, root / "data" / "span-3" / "ratings.csv")
    second = subprocess.run(
        ["bash", str(ROOT / "examples" / "retrain_when_moved.sh"), str(out), str(logs), pattern,
         "rating", *ARGS[2:]],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**clean_env(), "AMP_PIPELINE": f"{sys.executable} -m amp_pipeline"},
    )  # fmt: skip
    return out, (first, first_summary), second


def serve_shifted_traffic(out: Path, logs: Path, span_csv: Path) -> None:
    """The production model's requests as `serve --log-requests` logs them: span 3's rows
    through predict_raw, each student four semesters further on (the monitor's drift)."""
    from amp_pipeline.serving.requestlog.writer import RequestLog, RequestLogConfig

    (version,) = pushed_versions(out / "serving" / "model")
    rows = pd.read_csv(span_csv).assign(studage=lambda t: t.studage + 4)
    inputs = {c: rows[c].to_numpy(np.int64).reshape(-1, 1) for c in rows if c != "rating"}
    log = RequestLog(RequestLogConfig(logs))
    log.draw()
    answers = {"predictions": np.full((len(rows), 1), 3.2, np.float32)}
    log.offer("model", int(version), "predict_raw", inputs, answers, set(inputs), "grpc")
    log.close()


def test_rolling_spans_train_on_both_spans_and_say_so(two_runs):
    out, (first, summary), _ = two_runs
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "spans: spans 1-2 (of 1-3), 4,000 rows" in first.stdout
    assert summary["data"]["spans"]["spans"] == [1, 2]
    assert summary["data"]["rows"] == 4000
    # Both spans' rows went through ExampleGen (train and eval together), and TFX's span
    # property names the newest.
    db = sqlite3.connect(out / "metadata.sqlite")
    spans = db.execute(
        "select p.int_value from Artifact a join ArtifactProperty p on a.id = p.artifact_id "
        "where a.uri like '%CsvExampleGen%' and p.name = 'span' order by a.id"
    ).fetchall()
    assert [s for (s,) in spans] == [2, 3]
    assert summary["warm_start"]["amp"]["reason"] == "from scratch: no production model yet"
    assert "warm start: auto: no production model yet" in first.stdout
    # Span 2 against span 1 (drift is judged between the newest span and the one before it).
    assert summary["data"]["drift"]["span"] == 2 and summary["data"]["drift"]["previous_span"] == 1


def test_monitor_exit_4_retrains_the_next_span_warm_started_and_gated_against_production(
    two_runs,
):
    out, _, second = two_runs
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "retrain: the traffic moved; training on the newest span" in second.stdout
    monitor = json.loads((out / "monitor" / "monitor.json").read_text())
    assert "studage" in json.dumps(monitor)
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["data"]["spans"]["spans"] == [3]
    assert summary["data"]["rows"] == 2000
    assert "warm start: auto: both twins start from production model" in second.stdout
    for twin in ("fp32", "amp"):
        start = summary["warm_start"][twin]
        assert start["applied"], start
        # New students and lecturers arrive with the span: their rows are remapped by value.
        assert "vocabularies remapped by value" in start["reason"]
    rules = {r["name"]: r for r in summary["gate"]["rules"]}
    production = rules["production_regression"]
    assert not production["skipped"] and production["n"] > 300, production  # paired examples
    assert "AMP vs production" in production["detail"] and "MAE" in production["detail"]
    assert summary["production"]["mae"] > 0
    assert len(pushed_versions(out / "serving" / "model")) == 2
    report = (out / "report.md").read_text()
    assert "- Spans: span 3 (of 1-3)" in report
    assert "- Drift between spans: span 3 vs span 2" in report
    assert "- Warm start: both twins from the production model" in report
    drift = json.loads((out / "span_drift.json").read_text())
    assert {f["feature"] for f in drift["features"]} >= {"studage", "dept", "rating"}
    thresholds = (out / "span_drift_schema.pbtxt").read_text()
    assert "jensen_shannon_divergence" in thresholds and "infinity_norm" in thresholds


def test_a_shifted_span_is_flagged_and_drift_fail_stops_before_training(tmp_path):
    pattern = write_spans(tmp_path / "data", shifted_span=True)
    out = tmp_path / "out"
    result = run_cli("run", "--data", pattern, "--drift", "fail", "--output", str(out), *ARGS)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("amp-pipeline: error: --drift fail: span 4 vs span 3: DRIFT"), line
    assert "studage Jensen-Shannon" in line
    assert not (out / "tfx" / "TrainerAmp").exists()

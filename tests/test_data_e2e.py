"""Real-world CSVs through the CLI: `inspect` for each convention, `run` end to end."""

import gzip
import json

import numpy as np
import pytest

from tests.conftest import run_cli


def _messy_rows(n, seed=0):
    """A CSV as exported from a spreadsheet or R: `;`, BOM, CRLF, NA, yes/no, quoted fields
    with the delimiter and newlines, names with spaces and punctuation, an ID, a constant, free
    text and dates; the label follows `Monthly charges ($)` and `contract`."""
    rng = np.random.default_rng(seed)
    header = (
        "customer id;Monthly charges ($);tenure (months);active?;contract;note;country;"
        "signup date;Churn"
    )
    lines = []
    for i in range(n):
        charges = rng.normal(70, 20)
        contract = ["monthly", "yearly", "two-year"][i % 3]
        churn = "yes" if charges + (25 if contract == "monthly" else 0) > 80 else "no"
        note = '"called twice; asked for\r\na refund"' if i % 4 == 0 else "none"
        lines.append(
            ";".join(
                [
                    str(10_000 + i),
                    "NA" if i % 11 == 0 else f"{charges:.2f}",
                    "N/A" if i % 13 == 0 else str(int(rng.integers(1, 72))),
                    ["yes", "no"][i % 2],
                    contract,
                    note,
                    "NL",
                    f"2023-{i % 12 + 1:02d}-{i % 28 + 1:02d}",
                    churn,
                ]
            )
        )
    return header, lines


def _write_shards(folder, n=600):
    header, lines = _messy_rows(n)
    folder.mkdir()
    half = len(lines) // 2
    (folder / "part-00000.csv").write_bytes(
        ("\ufeff" + header + "\r\n" + "\r\n".join(lines[:half]) + "\r\n").encode()
    )
    (folder / "part-00001.csv.gz").write_bytes(
        gzip.compress((header + "\r\n" + "\r\n".join(lines[half:]) + "\r\n").encode())
    )
    (folder / "_SUCCESS").write_text("")
    return folder


def test_inspect_shows_what_the_pipeline_makes_of_a_messy_export(tmp_path):
    folder = _write_shards(tmp_path / "export")
    result = run_cli("inspect", "--data", str(folder), "--label", "Churn")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "600 rows, 2 classes" in out and "delimiter ';'" in out
    assert "Monthly charges ($)  Monthly_charges" in out
    assert "active?" in out and "bool" in out
    for column, reason in (
        ("customer id", "ID-like"),
        ("country", "constant (always 'NL')"),
        ("signup date", "a date or time"),
    ):
        assert f"excluded     '{column}': {reason}" in out, out
    charges = next(ln for ln in out.splitlines() if ln.strip().startswith("Monthly charges"))
    assert charges.split()[-2:] == ["55", "(9.2%)"]  # every 11th row is NA


def test_inspect_flags_choose_delimiter_encoding_markers_and_columns(tmp_path):
    latin = tmp_path / "latin.csv"
    latin.write_bytes(
        ("Température;ville;label\n" + "".join(f"{i}.5;Zürich;{i % 2}\n" for i in range(30)))
        .replace(";", "|")
        .encode("latin-1")
    )
    bad = run_cli("inspect", "--data", str(latin))
    assert bad.returncode == 2
    assert "latin.csv: line 1 holds bytes that are not utf-8 (e9)" in bad.stderr
    good = run_cli(
        "inspect",
        "--data",
        str(latin),
        "--encoding",
        "latin-1",
        "--delimiter",
        "|",
        "--na-values=-1,missing",  # (a value starting with '-' needs the '=' form)
        "--keep-columns",
        "ville",
    )
    assert good.returncode == 0, good.stderr
    assert "delimiter '|', encoding iso8859-1, 2 missing-value markers ('-1', 'missing')" in (
        good.stdout
    )
    assert "Température  Temp_rature" in good.stdout and "ville" in good.stdout
    unknown = run_cli(
        "inspect", "--data", str(latin), "--encoding", "latin-1", "--drop-columns", "x"
    )
    assert unknown.returncode == 2 and "--drop-columns x: no such column" in unknown.stderr


def test_mismatched_shards_stop_the_run_naming_the_file(tmp_path, cli):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "a.csv").write_text("x,label\n" + "".join(f"{i},{i % 2}\n" for i in range(20)))
    (folder / "b.csv").write_text("x,y,label\n" + "".join(f"{i},1,{i % 2}\n" for i in range(20)))
    result = cli("run", "--data", str(folder), "--output", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "b.csv: its header differs from a.csv's (y)" in line
    assert not (tmp_path / "out" / "serving").exists()


@pytest.mark.e2e
def test_a_messy_sharded_export_runs_end_to_end_and_predicts_by_original_names(tmp_path):
    from tests.helpers import predict_classes

    folder = _write_shards(tmp_path / "export")
    out = tmp_path / "out"
    result = run_cli(
        "run",
        "--data",
        str(folder),
        "--label",
        "Churn",
        "--output",
        str(out),
        "--train-steps",
        "150",
        "--tflite",
        "none",
        "--speed-rounds",
        "0",
        "--accuracy-tolerance",
        "0.05",
        "--min-speedup",
        "0",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "note: column 'customer id' is not a feature: ID-like" in result.stdout
    summary = json.loads((out / "run_summary.json").read_text())
    data = summary["data"]
    assert data["rows"] == 600 and data["classes"] == ["no", "yes"]
    assert data["missing"] == {"Monthly_charges": 55, "tenure_months": 47}
    assert {e["column"] for e in data["excluded"]} == {"customer id", "country", "signup date"}
    report = (out / "report.md").read_text()
    assert "| Monthly_charges | 55 | 9.2% |" in report
    # The served model reads the features under their sanitised names ...
    header, lines = _messy_rows(600)
    import csv
    import io

    names = [
        "customer_id",
        "Monthly_charges",
        "tenure_months",
        "active",
        "contract",
        "note",
        "country",
        "signup_date",
        "Churn",
    ]
    assert [*csv.reader([header], delimiter=";")][0][1] == "Monthly charges ($)"
    rows = [
        dict(zip(names, r, strict=True))
        for r in csv.reader(io.StringIO("\n".join(lines[:200])), delimiter=";")
    ]
    for r in rows:
        r["active"] = "1" if r["active"] == "yes" else "0"
        for k in ("Monthly_charges", "tenure_months"):
            if r[k] in ("NA", "N/A"):
                r[k] = ""
    predicted = predict_classes(summary["exports"]["saved_model"], rows, label="Churn")
    truth = np.array([r["Churn"] for r in rows])
    assert np.mean(predicted == truth) > max(np.mean(truth == "yes"), np.mean(truth == "no"))
    # ... and the registered MLflow model takes the columns under their original names.
    import mlflow
    import pandas as pd

    original = [*csv.reader([header], delimiter=";")][0]
    frame = pd.DataFrame(
        {
            "Monthly charges ($)": [float(r["Monthly_charges"] or 70) for r in rows],
            "tenure (months)": [int(r["tenure_months"] or 30) for r in rows],
            "active?": [int(r["active"]) for r in rows],
            "contract": [r["contract"] for r in rows],
            "note": [r["note"] for r in rows],
        }
    )
    assert set(frame.columns) <= set(original)
    registered = summary["mlflow"]["registered_model"]
    mlflow.set_tracking_uri(summary["mlflow"]["tracking_uri"])
    try:
        model = mlflow.pyfunc.load_model(f"models:/{registered['name']}/{registered['version']}")
        by_name = model.predict(frame)["class"].to_numpy()
    finally:
        mlflow.set_tracking_uri("")
        import os

        os.environ.pop("MLFLOW_TRACKING_URI", None)
    assert np.mean(by_name == truth) > 0.6


@pytest.mark.e2e
def test_a_label_with_300_classes_trains_evaluates_and_is_gated(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "many.csv"
    lines = ["a,b,label"]
    for i in range(3000):
        c = i % 300
        lines.append(f"{c / 300 + rng.normal(0, 0.001):.5f},{rng.normal():.3f},class_{c}")
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    result = run_cli(
        "run",
        "--data",
        str(path),
        "--output",
        str(out),
        "--train-steps",
        "60",
        "--tflite",
        "none",
        "--speed-rounds",
        "0",
        "--accuracy-tolerance",
        "1",
        "--min-speedup",
        "0",
    )
    assert result.returncode in (0, 3), result.stdout + result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    assert len(summary["data"]["classes"]) == 300
    assert any("300 classes" in n for n in summary["data"]["notices"])
    assert "per-class slices" in result.stdout
    assert summary["fp32"]["accuracy"] is not None and summary["gate"]["rules"]
    decision = json.loads((out / "decision.json").read_text())
    assert decision["per_class_accuracy"] == {}  # no slice per class above 50 classes
    assert before_serving_ok(out, summary)


def before_serving_ok(out, summary) -> bool:
    """A promoted 300-class model is served with 300 probabilities per example."""
    if summary["status"] != "promoted":
        return True
    import tensorflow as tf

    loaded = tf.saved_model.load(summary["exports"]["saved_model"])
    probs = loaded.signatures["predict_raw"](a=tf.constant([0.5]), b=tf.constant([0.0]))
    return probs["probabilities"].shape == (1, 300)

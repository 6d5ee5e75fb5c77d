"""The whole pipeline on other inputs than the digits: a CSV with strings, missing values and a
string label (under two seeds, then a loss-scale collapse in its folder), an image folder and
TFRecords."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.helpers import CHEAP, LOOSE_GATE, csv_rows, digits_rows, predict_classes
from tests.test_cli import tree_digest

pytestmark = pytest.mark.e2e
TESTDATA = Path(__file__).parent / "testdata"


@pytest.fixture(scope="module")
def churn_run(tmp_path_factory):
    """A CSV with strings, missing values and a string label, trained under two seeds."""
    out = tmp_path_factory.mktemp("churn") / "out"
    result = run_cli(
        "run",
        "--data",
        str(TESTDATA / "churn.csv"),
        "--label",
        "churn",
        "--output",
        str(out),
        "--train-steps",
        "100",
        "--seeds",
        "2",
        *LOOSE_GATE,
        *CHEAP,
    )
    return out, result


def test_tabular_csv_with_strings_missing_values_and_string_label(churn_run):
    data = TESTDATA / "churn.csv"
    out, result = churn_run
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["fp32"]["model"] == "mlp"
    # Both twins trained under seeds 42 and 43; the gate paired them seed by seed.
    seeds = summary["seeds"]
    assert seeds["seeds"] == [42, 43]
    for twin in ("fp32", "amp"):
        per_seed = seeds[twin]["per_seed"]
        assert [r["seed"] for r in per_seed] == [42, 43]
        assert all(0 < r["accuracy"] <= 1 and r["examples_per_sec"] > 0 for r in per_seed)
        assert seeds[twin]["accuracy"]["n"] == 2
    assert [p["seed"] for p in seeds["pairs"]] == [42, 43]
    assert all(p["n"] == seeds["pairs"][0]["n"] > 0 for p in seeds["pairs"])
    assert "seed 43" in result.stdout and "mean change" in result.stdout
    parity = next(r for r in summary["gate"]["rules"] if r["name"] == "accuracy_parity")
    # Both seeds pooled per example: n is the number of distinct eval examples, not 2 x n.
    assert parity["n"] == seeds["pairs"][0]["n"] and parity["seeds"] == 2
    assert parity["outcome"] in ("pass", "unproven") and len(parity["interval"]) == 2
    rows = csv_rows(data)
    predicted = predict_classes(summary["exports"]["saved_model"], rows, label="churn")
    truth = np.array([r["churn"] for r in rows])
    assert set(predicted) <= {"yes", "no"}
    majority = max(np.mean(truth == "yes"), np.mean(truth == "no"))
    assert np.mean(predicted == truth) > majority


def test_image_folder_and_tfrecord_inputs(tmp_path):
    """Digits as PNG files in one folder per class; then the same as TFRecords."""
    import tensorflow as tf
    from PIL import Image

    rows = digits_rows(400)
    folder = tmp_path / "images"
    for i, row in enumerate(rows):
        pixels = np.array([int(row[f"pixel_{k}"]) for k in range(64)]).reshape(8, 8)
        (folder / row["label"]).mkdir(parents=True, exist_ok=True)
        Image.fromarray((pixels * 15).astype(np.uint8)).save(folder / row["label"] / f"{i}.png")
    out = tmp_path / "out"
    result = run_cli(
        "run",
        "--data",
        str(folder),
        "--image-size",
        "8",
        "--output",
        str(out),
        "--train-steps",
        "60",
        *CHEAP,
        "--accuracy-tolerance",
        "1",
        "--min-speedup",
        "0",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["data"]["classes"] == [str(i) for i in range(10)]
    assert Path(summary["exports"]["saved_model"]).parent.name == "images"

    # The converted TFRecord file, given back as --data, runs as a TFRecord input.
    records = out / "data" / "images" / "images.tfrecord"
    tf_input = tmp_path / "digits.tfrecord"
    shutil.copy(records, tf_input)
    out2 = tmp_path / "out2"
    # What ran is what is reported: with --policy float32 --xla on the AMP trainer runs the
    # float32 program without XLA, and the summary, MLflow and the warnings say so.
    result = run_cli(
        "run",
        "--data",
        str(tf_input),
        "--output",
        str(out2),
        "--policy",
        "float32",
        "--xla",
        "on",
        "--train-steps",
        "30",
        *CHEAP,
        "--accuracy-tolerance",
        "1",
        "--min-speedup",
        "0",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out2 / "run_summary.json").read_text())
    assert summary["status"] == "promoted"
    assert summary["fp32"]["model"] == "cnn"
    assert summary["policy"] == "float32" and summary["xla"] is False
    assert "XLA on a CPU" not in result.stdout and "--xla on applies to" in result.stdout
    assert "recipe       float32, xla=off" in result.stdout
    from mlflow import MlflowClient

    params = (
        MlflowClient(summary["mlflow"]["tracking_uri"])
        .get_run(summary["mlflow"]["run_id"])
        .data.params
    )
    assert params["xla"] == "False" and params["xla_requested"] == "on"
    assert tf.io.gfile.exists(summary["exports"]["saved_model"])


def test_loss_scale_collapse_fails_the_run_with_a_diagnosis(churn_run):
    # In the churn run's folder: its data components are reused from the cache, and the model
    # it pushed must stay as it was.
    out, first = churn_run
    assert first.returncode == 0
    before = tree_digest(out / "serving")
    result = run_cli(
        "run",
        "--data",
        str(TESTDATA / "churn.csv"),
        "--label",
        "churn",
        "--output",
        str(out),
        "--policy",
        "mixed_float16",
        "--learning-rate",
        "1e6",
        "--collapse-patience",
        "5",
        "--train-steps",
        "100",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "WARNING: mixed_float16 on a CPU" in result.stdout  # the loud override warning
    (line,) = result.stderr.strip().splitlines()
    assert "TrainerAmp" in line and "mixed_float16 training stopped" in line
    assert "learning rate too high (now 1e+06" in line
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["status"] == "failed" and summary["exit_code"] == 1
    assert tree_digest(out / "serving") == before

"""The whole pipeline on other inputs than the digits: a CSV with strings, missing values and a
string label (under two seeds, then a loss-scale collapse in its folder), an image folder and
TFRecords."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.helpers import (
    CHEAP,
    LOOSE_GATE,
    PINNED_AMP,
    csv_rows,
    digits_rows,
    predict_classes,
    pushed_versions,
)
from tests.test_cli import tree_digest

pytestmark = pytest.mark.e2e
TESTDATA = Path(__file__).parent / "testdata"
UNREACHABLE = ("--min-speedup", "50")  # after LOOSE_GATE's 0: the last flag wins


@pytest.fixture(scope="module")
def churn_run(tmp_path_factory):
    """A CSV with strings, missing values and a string label, trained under two seeds, asking
    for a speed-up no CPU gives (`--min-speedup 50`): AMP is "not faster here" for certain, as
    mixed_bfloat16 is for this MLP on the CPUs measured (0.98-0.99x, benchmarks/RESULTS.md), so
    the float32 twin ships (components/gate/twins.py)."""
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
        *UNREACHABLE,
        *PINNED_AMP,
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
    parity = next(
        r for r in summary["gate"]["twins"]["amp"]["rules"] if r["name"] == "accuracy_parity"
    )
    # Both seeds pooled per example: n is the number of distinct eval examples, not 2 x n.
    assert parity["n"] == seeds["pairs"][0]["n"] and parity["seeds"] == 2
    assert parity["outcome"] in ("pass", "unproven") and len(parity["interval"]) == 2
    rows = csv_rows(data)
    predicted = predict_classes(summary["exports"]["saved_model"], rows, label="churn")
    truth = np.array([r["churn"] for r in rows])
    assert set(predicted) <= {"yes", "no"}
    majority = max(np.mean(truth == "yes"), np.mean(truth == "no"))
    assert np.mean(predicted == truth) > majority


def test_amp_not_faster_ships_the_float32_twin(churn_run):
    out, result = churn_run
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gate         PROMOTED float32 twin: AMP not faster here (ratio " in result.stdout
    # The recipe's probe ran before training, in the header.
    assert "  probe: this model's largest matmul (" in result.stdout
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["status"] == "promoted" and summary["exit_code"] == 0
    assert summary["shipped_precision"] == "float32" and summary["shipped_policy"] == "float32"
    assert "min_speedup" in summary["gate"]["twins"]["amp"]["failed"]
    assert summary["recipe_probe"]["dtype"] in ("bfloat16", "float16")
    decision = json.loads((out / "decision.json").read_text())
    assert decision["shipped_precision"] == "float32"
    assert {r["name"] for r in decision["rules"]} >= {"min_accuracy", "serving_infra"}
    assert "accuracy_parity" not in {r["name"] for r in decision["rules"]}
    # The summary's serving is the shipped twin's infra validation; the AMP twin's sits under
    # its name.
    assert summary["serving"]["twin"] == "float32" and summary["serving"]["passed"] is True
    assert summary["serving"]["latency"] == decision["fp32_serving"]["latency"]
    assert summary["serving_by_twin"]["amp"]["latency"] == decision["serving"]["latency"]
    # The float32 twin is what was pushed: its variables are float32 and its own TFLite model
    # sits beside it, listed in the summary.
    pushed = out / "serving" / "churn" / pushed_versions(out / "serving" / "churn")[-1]
    assert summary["exports"]["saved_model"] == str(pushed)
    (fp32_dir,) = (out / "tfx" / "TrainerFp32" / "model").glob("*/Format-Serving")
    assert tree_digest(pushed) == tree_digest(fp32_dir)
    # The export check read the artifact back from disk: every layer computes in float32.
    dtypes = json.loads((pushed / "dtype_report.json").read_text())
    assert dtypes["policy"] == "float32"
    assert {layer["compute_dtype"] for layer in dtypes["layers"]} == {"float32"}
    rows = csv_rows(TESTDATA / "churn.csv")[:120]
    predicted = predict_classes(pushed, rows, label="churn")
    assert np.mean(predicted == np.array([r["churn"] for r in rows])) > 0.6
    assert "Shipped: float32 twin" in (out / "report.md").read_text()


def trainer_math(out, trainer: str) -> dict:
    """The float32-math record the trainer's own process wrote (read in the child)."""
    runs = (out / "tfx" / trainer / "model_run").glob("*/figures.json")
    newest = max(runs, key=lambda p: int(p.parent.name))
    return json.loads(newest.read_text())["fp32_math"]


def test_monitor_judges_traffic_by_the_schema_the_model_trained_with(churn_run, tmp_path):
    """Served churn rows with a city the data never had and missing ages, answered by the pushed
    model: the monitor reads the curated schema (age made optional, as in training) and reads
    the new city through the OOV id, as AnomalyCheck judged the eval split. Neither is an
    anomaly; SchemaGen's raw schema would have made both one."""
    import tensorflow as tf

    from amp_pipeline.pipeline.monitor.check import MonitorOptions, monitor
    from amp_pipeline.pipeline.monitor.run_record import read_run
    from amp_pipeline.serving.requestlog.writer import RequestLog, RequestLogConfig
    from tests.helpers import tf_example

    out, result = churn_run
    assert result.returncode == 0
    run = read_run(out)
    assert "city" in run.open_features and "age" in run.optional_features
    (age,) = [f for f in run.schema.feature if f.name == "age"]
    assert age.presence.min_fraction == 0 and not age.HasField("shape")
    summary = json.loads((out / "run_summary.json").read_text())
    pushed = summary["exports"]["saved_model"]
    rows = [
        tf_example(age=None if i % 3 == 0 else 30 + i % 40, income=20.0 + i % 30,
                   city="tokyo" if i % 4 == 0 else ["lima", "rome", "oslo"][i % 3])
        for i in range(120)
    ]  # fmt: skip
    examples = np.array(rows, object)
    signature = tf.saved_model.load(pushed).signatures["serving_default"]
    outputs = {k: v.numpy() for k, v in signature(examples=tf.constant(examples)).items()}
    log = RequestLog(RequestLogConfig(tmp_path / "logs"))
    log.draw()
    log.offer("churn", run.version, "serving_default", {"examples": examples}, outputs,
              {"examples"}, "grpc")  # fmt: skip
    log.close()
    checked, _ = monitor(MonitorOptions(out, tmp_path / "logs", tmp_path / "mon", track=False))
    assert checked["anomalies"] == {}, checked["anomalies"]
    assert "city" in {t["feature"] for t in checked["tolerated"]}


def test_the_float32_twin_is_strict_float32_by_default(churn_run):
    out, result = churn_run
    summary = json.loads((out / "run_summary.json").read_text())
    # The float32 twin's process turned TF32 off; the AMP twin's kept TensorFlow's default.
    fp32 = trainer_math(out, "TrainerFp32")
    assert fp32["requested"] == "strict" and fp32["tf32_enabled"] is False
    assert trainer_math(out, "TrainerAmp")["tf32_enabled"] is True
    # No TF32 on a CPU: the summary and the table say so.
    assert summary["fp32_math"] == fp32["effective"] == "not applicable on this CPU"
    assert "float32 twin's math: not applicable on this CPU" in result.stdout


def test_require_amp_rejects_and_compares_with_the_pushed_float32_twin(churn_run):
    out, first = churn_run
    assert first.returncode == 0
    serving = out / "serving" / "churn"
    before = tree_digest(serving)
    result = run_cli(
        "run", "--data", str(TESTDATA / "churn.csv"), "--label", "churn", "--output", str(out),
        "--train-steps", "60", "--seed", "7", "--require-amp", "--fp32-math", "tf32",
        *UNREACHABLE, *CHEAP, *PINNED_AMP,
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    assert "(--require-amp: the float32 twin is not shipped)" in result.stdout
    # --fp32-math tf32 reached the float32 twin's process.
    assert trainer_math(out, "TrainerFp32")["requested"] == "tf32"
    assert trainer_math(out, "TrainerFp32")["tf32_enabled"] is True
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["status"] == "rejected" and summary["shipped_precision"] == "none"
    assert summary["exports"]["saved_model"] is None
    assert tree_digest(serving) == before
    # The model in production is the float32 twin the first run pushed: both twins of this
    # run were compared with it on the same paired evidence.
    for twin in ("amp", "float32"):
        (production,) = [
            r
            for r in summary["gate"]["twins"][twin]["rules"]
            if r["name"] == "production_regression"
        ]
        assert production["outcome"] != "skipped" and production["n"] > 0, production
        assert "vs production" in production["detail"]
    # MLflow: the rejected AMP twin is registered, tagged with its precision, not champion.
    from mlflow import MlflowClient

    client = MlflowClient(summary["mlflow"]["tracking_uri"])
    reg = summary["mlflow"]["registered_model"]
    version = client.get_model_version(reg["name"], str(reg["version"]))
    assert version.tags["gate"] == "rejected" and version.tags["twin"] == "amp"
    assert version.tags["precision"] == summary["policy"]
    champion = client.get_model_version_by_alias(reg["name"], "champion")
    assert champion.version != version.version and champion.tags["twin"] == "float32"


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

"""Bring your own model, end to end: the examples through `amp-pipeline run` and `check-model`."""

import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, run_cli
from tests.helpers import LOOSE_GATE, digits_rows, predict_classes, pushed_versions
from tests.test_cli import tree_digest

pytestmark = pytest.mark.e2e
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("byom") / "out"


def _summary(out: Path) -> dict:
    return json.loads((out / "run_summary.json").read_text())


def _pushed_accuracy(summary: dict) -> float:
    rows = digits_rows()[:300]
    predicted = predict_classes(summary["exports"]["saved_model"], rows, label="label")
    return float(np.mean(predicted == np.array([r["label"] for r in rows])))


def test_custom_layer_example_is_rejected_and_its_bad_layer_named(out):
    # bfloat16 on every CPU (emulated where the CPU has no BF16): the planted layer breaks. The
    # AMP twin is rejected with its bad layer named; its float32 twin, unbroken, ships.
    result = run_cli(
        "run",
        "--model-module",
        str(EXAMPLES / "custom_layer.py"),
        "--policy",
        "mixed_bfloat16",
        "--output",
        str(out),
        "--train-steps",
        "100",
        "--tflite",
        "none",
        "--speed-rounds",
        "0",
        *LOOSE_GATE,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "gate         PROMOTED float32 twin: AMP lost accuracy (" in result.stdout
    assert "readiness    1 finding(s) under mixed_bfloat16" in result.stdout
    assert "layer 'recenter' (Recenter) differs from float32" in result.stdout
    assert "with dtype='float32'" in result.stdout
    assert "FAIL     accuracy_parity" in result.stdout
    summary = _summary(out)
    assert summary["status"] == "promoted" and summary["model"] == "module:custom_layer.py"
    assert summary["shipped_precision"] == "float32"
    assert "accuracy_parity" in summary["gate"]["twins"]["amp"]["failed"]
    readiness = summary["readiness"]
    assert readiness["ok"] is False and readiness["numeric"]["first_bad_layer"] == "recenter"
    assert summary["output_fix"]["action"] == "final_layer_float32"
    assert summary["output_fix"]["layer"] == "head"
    assert len(pushed_versions(out / "serving" / "digits")) == 1  # the float32 twin
    report = (out / "report.md").read_text()
    assert "## AMP readiness" in report and "'recenter'" in report
    full = json.loads((out / "readiness.json").read_text())
    assert any(row["layer"] == "recenter" for row in full["dtype_report"])
    from mlflow import MlflowClient

    parent = MlflowClient(summary["mlflow"]["tracking_uri"]).get_run(summary["mlflow"]["run_id"])
    assert "'recenter'" in parent.data.tags["readiness"]
    assert parent.data.metrics["readiness_ok"] == 0.0
    assert parent.data.params["model_module"].endswith("custom_layer.py")


def test_subclassed_example_with_its_own_optimizer_is_promoted(out):
    result = run_cli(
        "run",
        "--model-module",
        str(EXAMPLES / "subclassed.py"),
        "--output",
        str(out),
        "--train-steps",
        "100",
        "--tflite",
        "float16",
        "--speed-rounds",
        "0",
        *LOOSE_GATE,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = _summary(out)
    assert summary["status"] == "promoted"
    if summary["policy"] != "float32":  # where auto picks a mixed policy
        assert summary["output_fix"]["action"] == "wrapped"
        assert "wrapped in a float32 layer" in result.stdout
    assert summary["exports"]["tflite"]["float16"]["passed"]
    assert _pushed_accuracy(summary) > 0.8


def test_own_preprocessing_example_trains_on_its_own_features(out):
    import tensorflow as tf

    from tests.helpers import to_example

    result = run_cli(
        "run",
        "--model-module",
        str(EXAMPLES / "own_preprocessing.py"),
        "--output",
        str(out),
        "--train-steps",
        "100",
        "--tflite",
        "float32",
        "--speed-rounds",
        "0",
        *LOOSE_GATE,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = _summary(out)
    assert summary["status"] == "promoted"
    # No graph here can redo a module's own preprocessing_fn: its TFLite takes that `x`, says
    # so, and the gate ran it on LiteRT with the SavedModel's own `x` of the eval rows.
    card = json.loads(
        (Path(summary["exports"]["saved_model"]) / "tflite" / "model_float32.json").read_text()
    )
    assert [(i["name"], i["kind"], i["shape"]) for i in card["inputs"]] == [("x", "x", [None, 80])]
    assert "preprocessing_fn" in card["inputs"][0]["preprocessing"]
    float32 = summary["exports"]["tflite"]["float32"]
    assert float32["passed"] and float32["agreement"] >= 0.995, float32
    # After the custom layer's float32 twin and the subclassed one.
    assert len(pushed_versions(out / "serving" / "digits")) == 3
    # The served model runs the module's preprocessing_fn: 64 pixels + 16 row/column sums.
    loaded = tf.saved_model.load(summary["exports"]["saved_model"])
    rows = digits_rows()[:4]
    x = loaded.signatures["transform_features"](
        examples=tf.constant([to_example(r, drop="") for r in rows])
    )["x"]
    assert x.shape == (4, 80)
    assert _pushed_accuracy(summary) > 0.8


def test_the_trainer_falls_back_from_xla_when_the_compile_fails(out, tmp_path):
    """A module whose layer XLA cannot compile (a host Python call), trained with XLA on by the
    real trainer process on the Transform output of the runs above."""
    from amp_pipeline.components.training.options import TrainSpec
    from amp_pipeline.components.training.trainer import run_in_subprocess
    from amp_pipeline.pipeline.results import read_run

    module = tmp_path / "host_op.py"
    module.write_text(
        textwrap.dedent(
            """
            import keras
            import tensorflow as tf

            class HostOp(keras.layers.Layer):
                def call(self, x):
                    y = tf.numpy_function(lambda a: a * 1, [x], x.dtype)
                    return tf.reshape(y, tf.shape(x))

            def build_model(spec):
                inputs = keras.Input((spec.input_width,))
                x = keras.layers.Dense(32, activation="relu")(HostOp()(inputs))
                return keras.Model(inputs, keras.layers.Dense(spec.num_classes, "softmax")(x))
            """
        )
    )
    from amp_pipeline.components.models.user_module import resolve

    latest = read_run(out / "metadata.sqlite", "amp-pipeline-digits", None)
    transform = latest.outputs["Transform"]
    examples = Path(transform["transformed_examples"].uri)
    data_spec = json.loads((out / "run_summary.json").read_text())["data"]
    from amp_pipeline.components.data.ingest import prepare

    data = prepare(None, "label", tmp_path / "data")
    assert data.classes == tuple(data_spec["classes"])
    spec = TrainSpec(
        train_files=(str(examples / "Split-train" / "*"),),
        eval_files=(str(examples / "Split-eval" / "*"),),
        transform_output=transform["transform_graph"].uri,
        serving_model_dir=str(tmp_path / "serving"),
        model_run_dir=str(tmp_path / "run"),
        data_spec=data.to_dict(),
        model="module:host_op.py",
        policy="mixed_bfloat16",
        xla=True,
        train_steps=10,
        eval_steps=2,
        model_module=resolve(str(module)).to_dict(),
        tflite_variants=(),
        readiness=True,
    )
    figures = run_in_subprocess(spec)
    assert figures["xla_requested"] is True and figures["xla"] is False
    assert figures["xla_fallback"] == "unsupported operation PyFunc (no XLA kernel)"
    assert figures["readiness"]["compile"]["ok"] is False
    assert "XLA cannot compile a train step" in " ".join(figures["readiness"]["findings"])
    assert figures["accuracy"] >= 0  # it trained, and evaluated


def test_a_module_with_its_own_preprocessing_and_a_wrong_output_is_bad_input(out, tmp_path):
    module = tmp_path / "wrong_width.py"
    module.write_text(
        (EXAMPLES / "own_preprocessing.py").read_text().replace("spec.num_classes", "4")
    )
    before = tree_digest(out / "serving")
    result = run_cli("run", "--model-module", str(module), "--output", str(out), *LOOSE_GATE)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "wrong_width.py" in line
    assert "the model's output has shape (batch, 4), expected (batch, 10)" in line
    assert tree_digest(out / "serving") == before
    assert _summary(out)["status"] == "bad_input"


def test_check_model_names_the_bad_layer_without_running_the_pipeline(tmp_path):
    check_out = tmp_path / "check"
    result = run_cli(
        "check-model",
        "--model-module",
        str(EXAMPLES / "custom_layer.py"),
        "--policy",
        "mixed_float16",
        "--output",
        str(check_out),
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "first bad layer 'recenter'" in result.stdout
    assert "outputs non-finite values under mixed_float16" in result.stdout
    assert "xla          one train step compiles" in result.stdout  # the GPU recipe's XLA
    assert "NOT READY" in result.stdout
    assert "Trainer" not in result.stdout and not (check_out / "serving").exists()
    report = json.loads((check_out / "readiness.json").read_text())
    assert report["numeric"]["first_bad_layer"] == "recenter"

    fixed = tmp_path / "custom_layer_fixed.py"
    shutil.copy(EXAMPLES / "custom_layer.py", fixed)
    fixed.write_text(fixed.read_text().replace("FIXED = False", "FIXED = True"))
    result = run_cli(
        "check-model",
        "--model-module",
        str(fixed),
        "--policy",
        "mixed_float16",
        "--output",
        str(check_out),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict      READY" in result.stdout
    assert "Transform            cached" in result.stdout  # the data half was reused

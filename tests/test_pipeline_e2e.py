"""The whole pipeline under LocalDagRunner on real data, as `amp-pipeline run` runs it. The first
run is the installed wheel's: `pip wheel .` into a fresh virtualenv, its `amp-pipeline` command
started outside the checkout; the reruns are the checkout's, on the same output folder."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import clean_env, run_cli
from tests.helpers import (
    CHEAP,
    LOOSE_GATE,
    PINNED_AMP,
    check_edge_app,
    check_tracked_run,
    digits_rows,
    litert_only_python,
    predict_classes,
    pushed_versions,
)
from tests.test_cli import tree_digest
from tests.wheel_env import build_wheel, fresh_venv, site_packages

pytestmark = pytest.mark.e2e
STEPS = "150"
# The digits under a real reduced-precision twin, on the MLP: bfloat16 convolutions are emulated
# on CPUs without AVX-512 BF16, and the CNN's 150 bfloat16 steps took 153-207 s against 17-23 s in
# float32 on a 2-core Zen 3 (benchmarks/RESULTS.md, "The test suite's time"). The CNN at the
# defaults runs end to end in tests/test_gate_defaults_e2e.py, and under bfloat16 (20 steps,
# two mirrored replicas) in test_mirrored_over_two_cpu_devices_trains_and_exports below.
DIGITS = ("--model", "mlp", *PINNED_AMP)


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("digits")
    bin_dir = fresh_venv(build_wheel(root / "wheel"), root / "venv")
    out = root / "out"
    # Bytecode written, so that the venv's .pyc files show which modules the run imported.
    env = {k: v for k, v in clean_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [str(bin_dir / "amp-pipeline"), "run", "--output", str(out), "--train-steps", STEPS,
         *LOOSE_GATE, *DIGITS],
        cwd=root, capture_output=True, text=True, timeout=600, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return out, result


def test_the_run_came_from_the_installed_wheel(digits_run):
    """The trainers' child processes imported the wheel's code: the venv's uncompiled modules
    got their .pyc files from the run (job.py is imported only in a trainer's process)."""
    out, result = digits_run
    assert result.returncode == 0, result.stdout + result.stderr
    installed = site_packages(out.parent / "venv") / "amp_pipeline"
    for module in ("components/training/job", "components/gate/component", "pipeline/cli/commands"):
        folder, name = (installed / module).parent, Path(module).name
        assert list(folder.glob(f"__pycache__/{name}.cpython-*.pyc")), module
    # In that environment the package is the wheel's, and no bare project name is importable.
    probe = (
        "import importlib.util, amp_pipeline\n"
        "print(amp_pipeline.__file__)\n"
        "print([n for n in ('core', 'pipeline', 'components', 'serving', 'kubeflow',"
        " 'benchmarks', 'user_models') if importlib.util.find_spec(n)])\n"
    )
    found = subprocess.run(
        [str(out.parent / "venv" / "bin" / "python"), "-c", probe],
        cwd=out.parent, capture_output=True, text=True, env=clean_env(), check=True,
    )  # fmt: skip
    where, leaked = found.stdout.splitlines()
    assert where == str(installed / "__init__.py") and leaked == "[]"


def test_digits_run_promotes_and_the_pushed_model_reads_digits(digits_run):
    out, result = digits_run
    assert result.returncode == 0, result.stdout + result.stderr
    # TensorFlow's CUDA registration lines (E level, on every machine) do not reach stderr.
    assert "Unable to register" not in result.stderr, result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["status"] == "promoted" and summary["exit_code"] == 0
    # The AMP twin ships (LOOSE_GATE asks for no speed-up, and its accuracy is within 0.05).
    assert summary["shipped_precision"] == summary["gate"]["shipped_precision"] == "amp"
    for trainer in ("fp32", "amp"):
        figures = summary[trainer]
        assert figures["examples_per_sec"] > 0
        assert figures["step_time_ms"]["p50"] <= figures["step_time_ms"]["p90"]
        assert figures["peak_memory_mb"] > 0 and figures["memory_method"]
    assert summary["fp32"]["policy"] == "float32"
    assert summary["amp"]["policy"] == summary["policy"]
    assert summary["hardware"]["reason"]
    # The trainers' ratio is reported; the gate's speedup is SideBySide's median round.
    assert summary["speedup_trainers"] == pytest.approx(
        summary["amp"]["examples_per_sec"] / summary["fp32"]["examples_per_sec"]
    )
    rounds = summary["speed"]["ratio"]
    assert summary["speedup"] == pytest.approx(rounds["median"])
    assert summary["gate"]["passed"] is True
    decision_md = (out / "decision.md").read_text()
    assert decision_md.startswith("# Promotion gate: PROMOTED")
    assert "no model in production yet" in decision_md
    # ... and no TFMA run was spent on the missing production model.
    assert (Path(summary["evaluation"]["production"]) / "NO_PRODUCTION_MODEL").exists()
    assert {r["name"] for r in summary["gate"]["rules"]} >= {
        "accuracy_parity",
        "min_accuracy",
        "production_regression",
        "min_speedup",
        "serving_infra",
    }
    # Infra validation served the candidate over gRPC and REST before it was pushed.
    serving = summary["serving"]
    assert serving["passed"] and serving["reasons"] == []
    assert {"serving_default", "predict_raw"} <= set(serving["signatures"])
    for protocol in ("grpc", "rest"):
        assert 0 < serving["latency"][protocol]["p99_ms"] <= 500
    # TF Serving deployment files for what was pushed.
    assert 'name: "digits"' in Path(summary["deploy"]["models_config"]).read_text()
    assert Path(summary["deploy"]["kubernetes"]).is_file()
    pushed = Path(summary["exports"]["saved_model"])
    assert pushed.parent == out / "serving" / "digits"
    rows = digits_rows()[:300]
    predicted = predict_classes(pushed, rows, label="label")
    accuracy = float(np.mean(predicted == np.array([r["label"] for r in rows])))
    assert accuracy > 0.5, f"pushed model accuracy {accuracy:.3f} (chance is 0.1)"
    # Every TFLite variant is listed, pushed next to the SavedModel, with its figures.
    tflite = summary["exports"]["tflite"]
    assert set(tflite) == {"float32", "float16", "dynamic_int8", "int8"}
    for name, variant in tflite.items():
        assert variant["converted"] and variant["passed"], (name, variant)
        assert Path(variant["path"]).is_file()
        assert Path(variant["path"]).parent == pushed / "tflite"
        assert variant["size_bytes"] == Path(variant["path"]).stat().st_size
        assert 0 < variant["latency_ms"] and 0.5 < variant["accuracy"] <= 1
        assert variant["agreement"] >= 0.99
    assert tflite["float16"]["size_bytes"] < 0.6 * tflite["float32"]["size_bytes"]
    assert (pushed / "tflite" / "labels.txt").read_text().split() == [str(i) for i in range(10)]
    # The terminal shows one progress line per component and the final table.
    progress = [ln for ln in result.stdout.splitlines() if "/15]" in ln]
    assert sum(" done " in ln or " cached " in ln for ln in progress) == 15
    assert f"gate         PROMOTED AMP twin ({summary['policy']})" in result.stdout
    assert (out / "logs" / "tfx.log").stat().st_size > 0
    # MLflow's default store: a SQLite file in the output folder, read back like a server.
    assert summary["mlflow"]["tracking_uri"] == f"sqlite:///{out / 'mlflow.db'}"
    check_tracked_run(summary["mlflow"]["tracking_uri"], summary, int(STEPS))
    assert (out / "report.md").read_text().startswith("# amp-pipeline run: PROMOTED")
    assert (out / "metadata.sqlite").exists()


def test_the_pushed_tflite_reads_raw_digits_under_litert_alone(digits_run, tmp_path):
    """A device app (examples/edge/predict.py) in a venv with ai-edge-litert and numpy only,
    reading the pushed tflite/ folder and raw CSV rows (pixels 0-16, as the CSV has them),
    answers as predict_raw: float32 on >= 99.9% of the digits with probabilities within 1e-3,
    float16 on >= 99.5%, the int8 variants as the gate held them."""
    out, result = digits_run
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    pushed = Path(summary["exports"]["saved_model"])
    rows = digits_rows()
    python = litert_only_python(tmp_path)
    measured = check_edge_app(python, pushed, rows, tmp_path)
    assert measured["float32"]["agreement"] >= 0.999 and measured["float32"]["max_diff"] < 1e-3
    assert measured["float16"]["agreement"] >= 0.995, measured
    for variant in ("dynamic_int8", "int8"):  # shipped: the gate held them to its thresholds
        assert measured[variant]["agreement"] >= 0.95, measured
    # The sidecar says what the one input is: raw pixels in the CSV's units, in column order.
    card = json.loads((pushed / "tflite" / "model_int8.json").read_text())
    (pixels,) = card["inputs"]
    assert (pixels["name"], pixels["dtype"], pixels["shape"]) == ("pixels", "float32", [None, 64])
    assert pixels["columns"] == [f"pixel_{i}" for i in range(64)]
    assert pixels["pixel_scale_in_graph"] == 16.0


def test_serving_signatures_equal_the_trained_keras_model(digits_run):
    import keras
    import tensorflow as tf

    from tests.helpers import to_example

    out, result = digits_run
    assert result.returncode == 0
    summary = json.loads((out / "run_summary.json").read_text())
    loaded = tf.saved_model.load(summary["exports"]["saved_model"])
    rows = digits_rows()[:64]
    examples = tf.constant([to_example(r, drop="label") for r in rows])
    served = loaded.signatures["serving_default"](examples=examples)
    (keras_file,) = (out / "tfx" / "TrainerAmp" / "model_run").glob("*/model.keras")
    model = keras.saving.load_model(keras_file)
    labelled = tf.constant([to_example(r, drop="") for r in rows])
    x = loaded.signatures["transform_features"](examples=labelled)["x"]
    expected = model.predict(x.numpy(), verbose=0)
    # The served model computes in float32; it equals a float32-trained Keras model exactly, and
    # a bfloat16-trained one (on BF16 CPUs) up to bfloat16's rounding.
    atol = 1e-5 if summary["policy"] == "float32" else 2e-2
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=atol)
    assert (served["class_ids"].numpy() == expected.argmax(axis=1)).mean() >= 0.98
    # The raw-tensor signature (REST clients) answers the same.
    raw = {
        f"pixel_{i}": tf.constant([int(r[f"pixel_{i}"]) for r in rows], tf.int64) for i in range(64)
    }
    by_raw = loaded.signatures["predict_raw"](**raw)
    np.testing.assert_allclose(
        by_raw["probabilities"].numpy(), served["probabilities"].numpy(), atol=1e-6
    )


def test_rerun_uses_cache_and_keeps_every_pushed_version(digits_run):
    out, first = digits_run
    assert first.returncode == 0
    serving = out / "serving" / "digits"
    (old_version,) = pushed_versions(serving)
    old_digest = tree_digest(serving / old_version)

    cached = run_cli("run", "--output", str(out), "--train-steps", STEPS, *LOOSE_GATE, *DIGITS)
    assert cached.returncode == 0, cached.stderr
    progress = [ln for ln in cached.stdout.splitlines() if "/15]" in ln]
    for name in ("CsvExampleGen", "Transform", "TrainerAmp", "TrainerFp32", "Evaluator "):
        (line,) = [ln for ln in progress if f"] {name}" in ln]
        assert "cached" in line, line
    # Only the production comparison reruns: the candidate is now the production model.
    assert "already in production" in cached.stdout
    assert pushed_versions(serving) == [old_version]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["status"] == "promoted" and summary["already_in_production"]
    assert summary["exports"]["saved_model"] == str(serving / old_version)

    # TFMA's bound lowered under the digits' eval split: both Evaluators read a sample. Another
    # seed trains a new candidate; the data components come from the cache.
    fresh = run_cli(
        "run",
        "--output",
        str(out),
        "--train-steps",
        STEPS,
        "--seed",
        "7",
        "--tfma-max-examples",
        "100",
        *LOOSE_GATE,
        *CHEAP,
        *DIGITS,
    )
    assert fresh.returncode == 0, fresh.stderr
    versions = pushed_versions(serving)
    assert len(versions) == 2 and versions[0] == old_version
    assert tree_digest(serving / old_version) == old_digest
    # This run had a model in production to compare with.
    decision_md = (out / "decision.md").read_text()
    assert "| production_regression |" in decision_md and "vs production" in decision_md
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["production"]["accuracy"] is not None
    samples = summary["gate"]["tfma_sample"]
    for sample in (samples["fp32_baseline"], samples["production"]):
        assert sample["every"] == -(-sample["of"] // 100) and sample["examples"] <= 100
    decision = json.loads((out / "decision.json").read_text())
    assert decision["per_class_accuracy"]  # TFMA's per-class reading, from the sample ...
    # ... while the rules counted every eval example (k/378, not k/95).
    n = samples["fp32_baseline"]["of"]
    (parity,) = [r for r in decision["rules"] if r["name"] == "accuracy_parity"]
    assert parity["n"] == n and f"n={n:,}" in parity["detail"]
    assert round(decision["measurements"]["amp_accuracy"] * n, 6).is_integer()
    (production,) = [r for r in decision["rules"] if r["name"] == "production_regression"]
    assert production["n"] == n


def test_rejection_names_the_rule_and_leaves_production_untouched(digits_run):
    out, first = digits_run
    assert first.returncode == 0
    serving = out / "serving" / "digits"
    before = tree_digest(serving)
    newest = pushed_versions(serving)[-1]
    # Train the AMP candidate for 3 steps only: far below its float32 twin. At the gate's
    # default thresholds, it is rejected. A latency budget no server meets fails infra
    # validation too, of both twins: neither ships.
    result = run_cli(
        "run",
        "--output",
        str(out),
        "--train-steps",
        STEPS,
        "--amp-train-steps",
        "3",
        "--serving-latency-budget-ms",
        "0.001",
        *CHEAP,
        *DIGITS,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "gate         REJECTED: failed accuracy_parity" in result.stdout
    (gate_line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("  gate ")]
    assert "; the float32 twin failed " in gate_line and "serving_infra" in gate_line
    assert "FAIL     accuracy_parity" in result.stdout
    parity = next(
        r
        for r in json.loads((out / "decision.json").read_text())["rules"]
        if r["name"] == "accuracy_parity"
    )
    assert parity["threshold"] == -0.005 and parity["value"] < -0.005
    assert "beyond the 0.50% tolerance" in parity["detail"]
    decision = json.loads((out / "decision.json").read_text())
    assert decision["decision"] == "rejected" and "accuracy_parity" in decision["failed"]
    assert "serving_infra" in decision["failed"]
    assert "FAIL     serving_infra" in result.stdout and "over the budget of" in result.stdout
    assert "| accuracy_parity |" in (out / "decision.md").read_text()
    assert decision["shipped_precision"] == "none"
    assert "serving_infra" in decision["twins"]["float32"]["failed"]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["status"] == "rejected" and summary["exit_code"] == 3
    assert summary["shipped_precision"] == "none"
    assert summary["exports"]["saved_model"] is None
    assert pushed_versions(serving)[-1] == newest
    assert tree_digest(serving) == before
    # The rejected candidate is registered too, tagged with its failing rules, not champion.
    from mlflow import MlflowClient

    client = MlflowClient(summary["mlflow"]["tracking_uri"])
    reg = summary["mlflow"]["registered_model"]
    version = client.get_model_version(reg["name"], str(reg["version"]))
    assert version.tags["gate"] == "rejected"
    assert "accuracy_parity" in version.tags["failed_rules"]
    assert client.get_model_version_by_alias(reg["name"], "champion").version != version.version


def test_anomalies_stop_the_run_before_training(digits_run, tmp_path):
    out, first = digits_run
    assert first.returncode == 0
    before = tree_digest(out / "serving")
    # 'color' takes 2 values, then 14 rows of one-off values: the eval split holds values the
    # schema (inferred from the train split) has never seen. Declared closed, a new value is
    # drift and stops the run (an open column reads it through its out-of-vocabulary id:
    # components/data/anomaly_check.py, tests/test_edges_e2e.py).
    rng = np.random.default_rng(0)
    lines = ["x,color,label"]
    for i in range(400):
        color = ["red", "blue"][i % 2] if i < 386 else f"c{i}"
        lines.append(f"{rng.normal():.3f},{color},{i % 2}")
    data = tmp_path / "drift.csv"
    data.write_text("\n".join(lines) + "\n")
    result = run_cli(
        "run", "--data", str(data), "--output", str(out), "--model-name", "digits",
        "--closed-columns", "color", *LOOSE_GATE,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "ExampleValidator found anomalies" in line and "'color'" in line
    assert "Trainer" not in result.stdout  # stopped before training
    assert tree_digest(out / "serving") == before


def test_mirrored_over_two_cpu_devices_trains_and_exports(digits_run, tmp_path):
    """The real trainer process under --distribution mirrored (2 logical CPU devices) on the
    digits run's Transform output: the global batch, the scaled learning rate, the export."""
    from amp_pipeline.components.data.ingest import prepare
    from amp_pipeline.components.training.options import TrainSpec
    from amp_pipeline.components.training.trainer import run_in_subprocess

    out, _ = digits_run
    # The first run's Transform output (later tests in this module run in the same folder, and
    # some stop before Transform: the latest run is not necessarily one that has it).
    transform = out / "tfx" / "Transform"
    first = min((p.name for p in (transform / "transform_graph").iterdir()), key=int)
    examples = transform / "transformed_examples" / first
    spec = TrainSpec(
        train_files=(str(examples / "Split-train" / "*"),),
        eval_files=(str(examples / "Split-eval" / "*"),),
        transform_output=str(transform / "transform_graph" / first),
        serving_model_dir=str(tmp_path / "serving"),
        model_run_dir=str(tmp_path / "run"),
        data_spec=prepare(None, "label", tmp_path / "data").to_dict(),
        policy="mixed_bfloat16",
        batch_size=32,
        train_steps=20,
        eval_steps=2,
        tflite_variants=(),
        distribution="mirrored",
        cpu_replicas=2,
    )
    figures = run_in_subprocess(spec)
    spread = figures["distribution"]
    assert spread["strategy"] == "MirroredStrategy" and spread["replicas"] == 2
    assert (spread["per_replica_batch"], spread["global_batch"]) == (32, 64)
    assert spread["learning_rate"] == pytest.approx(2 * spec.learning_rate)
    assert figures["batch_size"] == 64 and figures["accuracy"] > 0.2  # it learned
    assert (tmp_path / "serving" / "saved_model.pb").exists()


def _log_as_served(folder, base, production, candidate, rows, shift=None):
    """Digits rows answered by the pushed `production` version through its predict_raw
    signature (and by `candidate` as a shadow, when given), logged as `serve --log-requests`
    logs them: the serving path itself is tests/test_serving_e2e.py's."""
    import tensorflow as tf

    from amp_pipeline.serving.requestlog.writer import RequestLog, RequestLogConfig

    inputs = {
        k: np.array([[int(float(r[k]))] for r in rows], np.int64) for k in rows[0] if k != "label"
    }
    for name, by in shift or ():
        inputs[name] = np.minimum(inputs[name] + by, 16)
    log = RequestLog(RequestLogConfig(folder))
    for version, origin in ((production, "grpc"), (candidate, "grpc/shadow")):
        if version is None:
            continue
        signature = tf.saved_model.load(str(base / str(version))).signatures["predict_raw"]
        for start in range(0, len(rows), 100):
            batch = {k: tf.constant(v[start : start + 100]) for k, v in inputs.items()}
            outputs = {k: v.numpy() for k, v in signature(**batch).items()}
            batch = {k: v.numpy() for k, v in batch.items()}
            if origin == "grpc":
                log.draw()
            log.offer("digits", version, "predict_raw", batch, outputs, set(batch), origin)
    log.close()


def test_after_the_push_monitor_checks_traffic_and_judges_a_shadow(digits_run, tmp_path, capsys):
    """README "After the push" on the run's pushed versions: `monitor` exits 0 on rows drawn
    from the training CSV and reports the shadow's agreement with an interval; on the same rows
    with pixel_20 shifted by 6 (of 16) and the always-zero pixel_0 served as 5 it exits 4,
    naming the first feature in one line."""
    out, _ = digits_run
    serving = out / "serving" / "digits"
    versions = [int(v) for v in pushed_versions(serving)]
    assert len(versions) >= 2  # the reruns above pushed more
    production, candidate = max(versions), min(versions)
    rows = digits_rows(300)
    _log_as_served(tmp_path / "logs", serving, production, candidate, rows)
    from amp_pipeline.pipeline.monitor.check import MonitorOptions, monitor

    result, code = monitor(MonitorOptions(out, tmp_path / "logs", tmp_path / "mon"))
    assert code == 0, result["flagged"]
    assert result == json.loads((tmp_path / "mon" / "monitor.json").read_text())
    assert result["examples"] == 300 and result["production_version"] == production
    assert len(result["features"]) == 64 and not result["anomalies"]
    assert all(not f["skew"]["beyond"] for f in result["features"].values())
    assert not result["prediction_drift"]["beyond"]
    shadow = result["shadow"]
    assert (shadow["pairs"], shadow["candidate_version"]) == (300, candidate)
    lo, hi = shadow["agreement"]["interval"]
    assert lo <= shadow["agreement"]["share"] <= hi and hi - lo < 0.2
    assert result["mlflow_run_id"]  # a child run of the model's MLflow run

    # pixel_20 shifted by 6, and pixel_0, zero on every training row, served as 5.
    shifts = (("pixel_20", 6), ("pixel_0", 5))
    _log_as_served(tmp_path / "shifted", serving, production, None, rows, shifts)
    # The command's own function, in this process (the TF import of a fresh one saved).
    from amp_pipeline.cli import build_parser
    from amp_pipeline.pipeline.cli.monitor import cmd_monitor

    args = build_parser().parse_args(
        ["monitor", "--run", str(out), "--requests", str(tmp_path / "shifted"),
         "--output", str(tmp_path / "mon2"), "--no-tracking"]
    )  # fmt: skip
    assert cmd_monitor(args) == 4
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("amp-pipeline: monitor: skew in feature pixel_0: share off the constant")
    flagged = json.loads((tmp_path / "mon2" / "monitor.json").read_text())["features"]
    assert [name for name, f in flagged.items() if f["skew"]["beyond"]] == ["pixel_0", "pixel_20"]
    assert flagged["pixel_0"]["skew"]["distance"] == 1.0
    assert flagged["pixel_20"]["skew"]["comparator"] == "Jensen-Shannon"
    assert (tmp_path / "mon2" / "pixel_20_histograms.png").stat().st_size > 0

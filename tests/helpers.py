"""Helpers the end-to-end tests share: predicting through a pushed SavedModel."""

from __future__ import annotations

import csv
import gzip
import os
from pathlib import Path

import numpy as np

from amp_pipeline.components.data.ingest import DIGITS_CSV


def digits_rows(limit: int | None = None) -> list[dict[str, str]]:
    text = gzip.decompress(DIGITS_CSV.read_bytes()).decode()
    rows = list(csv.DictReader(text.splitlines()))
    return rows[:limit] if limit else rows


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def to_example(row: dict[str, str], drop: str) -> bytes:
    """A raw tf.Example as CsvExampleGen writes it: ints, floats or bytes; empty = absent."""
    import tensorflow as tf

    feature = {}
    for key, value in row.items():
        if key == drop or value == "":
            continue
        try:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
        except ValueError:
            try:
                feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
            except ValueError:
                feature[key] = tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[value.encode()])
                )
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def predict_classes(saved_model_dir: str | Path, rows, label: str) -> np.ndarray:
    """Class names the pushed model's serving_default signature returns for `rows`."""
    import tensorflow as tf

    serve = tf.saved_model.load(str(saved_model_dir)).signatures["serving_default"]
    examples = tf.constant([to_example(r, drop=label) for r in rows])
    return np.array([c.decode() for c in serve(examples=examples)["classes"].numpy()])


def tf_example(**features) -> bytes:
    """A serialized tf.Example: int values as int64, float as float, str and bytes as bytes;
    a None value is a missing feature."""
    import tensorflow as tf

    feature = {}
    for name, value in features.items():
        if value is None:
            continue
        if isinstance(value, int):
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        elif isinstance(value, float):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
        else:
            raw = value.encode() if isinstance(value, str) else value
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[raw]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def pushed_versions(serving_model_dir: Path) -> list[str]:
    return sorted(p.name for p in serving_model_dir.iterdir() if p.is_dir())


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_tracked_run(
    tracking_uri: str, summary: dict, train_steps: int, champion: bool = True
) -> None:
    """Reads a pipeline run back from MLflow and checks what a user would look for."""
    import mlflow
    import pandas as pd
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    info = summary["mlflow"]
    assert info["tracking_uri"] == tracking_uri
    parent = client.get_run(info["run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["tfx.pipeline_name"].startswith("amp-pipeline")
    assert parent.data.tags["tfx.run_id"]
    assert parent.data.tags["mlmd.execution_id.TrainerAmp"].isdigit()
    assert parent.data.tags["git_commit"] and parent.data.tags["hardware.device"]
    assert parent.data.params["policy"] == summary["policy"]
    assert parent.data.params["train_steps"] == str(train_steps)
    for key in ("speedup", "memory_ratio", "accuracy_delta", "amp_accuracy", "gate_passed"):
        assert key in parent.data.metrics, key
    assert parent.data.metrics["amp_accuracy"] == summary["amp"]["accuracy"]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {
        "run_summary.json",
        "report.md",
        "throughput_memory.png",
        "training_curves.png",
        "loss_scale.png",
        "dtype_report.json",
    } <= artifacts, artifacts

    children = client.search_runs(
        [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    by_name = {r.info.run_name: r for r in children}
    assert set(by_name) == {"fp32-trainer", "amp-trainer", "export", "gate"}
    assert all(r.info.status == "FINISHED" for r in children)
    for name in ("fp32-trainer", "amp-trainer"):
        run = by_name[name]
        for key in (
            "examples_per_sec",
            "step_time_p50_ms",
            "step_time_p90_ms",
            "peak_memory_mb",
            "accuracy",
            "overflow_steps",
        ):
            assert key in run.data.metrics, (name, key)
        history = client.get_metric_history(run.info.run_id, "train_loss")
        assert len(history) == train_steps
    export = by_name["export"]
    for variant in summary["exports"]["tflite"]:
        for key in ("size_bytes", "accuracy", "agreement", "latency_ms"):
            assert f"tflite_{variant}_{key}" in export.data.metrics
    assert {a.path for a in client.list_artifacts(export.info.run_id, "tflite")}
    gate = by_name["gate"]
    assert gate.data.metrics["gate_passed"] == (1.0 if summary["gate"]["passed"] else 0.0)
    assert {"decision.json", "decision.md"} <= {
        a.path for a in client.list_artifacts(gate.info.run_id)
    }

    registered = info["registered_model"]
    version = client.get_model_version(registered["name"], str(registered["version"]))
    assert version.tags["gate"] == summary["status"]
    if summary["status"] == "promoted" and champion:
        alias = client.get_model_version_by_alias(registered["name"], "champion")
        assert alias.version == version.version
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri)
    try:
        model = mlflow.pyfunc.load_model(f"models:/{registered['name']}/{version.version}")
    finally:  # set_tracking_uri also exports MLFLOW_TRACKING_URI: undo both
        mlflow.set_tracking_uri(previous)
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    rows = digits_rows()[:200]
    frame = pd.DataFrame({f"pixel_{i}": [int(r[f"pixel_{i}"]) for r in rows] for i in range(64)})
    predicted = model.predict(frame)
    truth = np.array([r["label"] for r in rows])
    assert float(np.mean(predicted["class"].to_numpy() == truth)) > 0.5


POSITIVE = "great lovely superb fun moving brilliant charming delightful wonderful clever".split()
NEGATIVE = "awful boring dull clumsy tedious weak messy bland painful lazy".split()
FILLER = (
    "the a this film movie plot cast story scene ending music it was and but very really "
    "quite so of to in with actors director screen time"
).split()


def text_rows(n: int, seed: int = 0, *, extra: bool = True) -> list[dict[str, str]]:
    """Short posts whose sentiment words decide a 'pos'/'neg' label (some posts carry the other
    side's words too, so the task is not trivial), with punctuation, capitals, empty posts and
    a date and a number column beside them."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = "pos" if rng.random() < 0.5 else "neg"
        own, other = (POSITIVE, NEGATIVE) if label == "pos" else (NEGATIVE, POSITIVE)
        words = list(rng.choice(FILLER, rng.integers(3, 20)))
        for _ in range(rng.integers(1, 4)):
            words.insert(rng.integers(0, len(words) + 1), str(rng.choice(own)))
        if rng.random() < 0.2:
            words.insert(rng.integers(0, len(words) + 1), str(rng.choice(other)))
        post = " ".join(words).capitalize() + rng.choice([".", "!", "?!", "..."])
        if rng.random() < 0.02:
            post = ""
        row = {"post": post, "label": label}
        if extra:
            row["posted"] = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
            row["likes"] = str(int(rng.integers(0, 500)))
        rows.append(row)
    return rows


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    import csv

    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


# The gate's own thresholds are unit-tested; here they are loosened so that the pipeline's
# mechanics are tested the same way on every CPU (on a BF16 CPU the AMP trainer really runs
# bfloat16, whose accuracy after 150 steps may differ from float32's by more than 0.005).
LOOSE_GATE = (
    "--accuracy-tolerance", "0.05", "--min-speedup", "0", "--tflite-max-int8-drop", "0.1",
    "--recall-tolerance", "0.2", "--auc-tolerance", "0.05",
)  # fmt: skip
# Tests about a reduced-precision AMP twin name its policy: `--policy auto` resolves to float32
# on a CPU with neither AVX-512 BF16 nor AMX (CI's Intel runners, Zen 3), where the AMP twin
# would be the float32 program a second time. mixed_bfloat16 runs on every x86 CPU (emulated,
# slower, where the hardware lacks it), so these tests see the same two programs everywhere.
PINNED_AMP = ("--policy", "mixed_bfloat16")
# Runs that test neither the TFLite export nor the speed measurement skip both: no TFLite
# conversion, no side-by-side timing (the speed rule then judges the trainers' own
# throughputs). The digits run of test_pipeline_e2e.py tests both, at their defaults.
CHEAP = ("--tflite", "none", "--speed-rounds", "0")


def predict_over_both_protocols(
    model_dir: Path, model: str, request: Path, serve_args: tuple[str, ...] = ()
) -> dict:
    """`amp-pipeline serve` on `model_dir` (the pushed model's folder, with `serve_args`), then
    `amp-pipeline predict --csv request` over gRPC and over REST: {protocol: CompletedProcess}.
    The server is stopped whatever happens (SIGINT: it closes its request log first)."""
    import subprocess
    import sys

    from amp_pipeline.benchmarks.load.serving import stop_server, wait_ready
    from amp_pipeline.serving.client import ClientConfig
    from tests.conftest import ROOT, clean_env, run_cli

    grpc_port, rest_port = free_port(), free_port()
    server = subprocess.Popen(
        [
            sys.executable, "-m", "amp_pipeline", "serve", "--model-dir",
            str(model_dir), "--grpc-port", str(grpc_port), "--rest-port", str(rest_port),
            *serve_args,
        ],
        cwd=ROOT, env=clean_env(), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_ready(ClientConfig(grpc_port=grpc_port, rest_port=rest_port), server, model)
        return {
            protocol: run_cli(
                "predict",
                "--model-name",
                model,
                "--csv",
                str(request),
                "--protocol",
                protocol,
                "--grpc-port",
                str(grpc_port),
                "--rest-port",
                str(rest_port),
            )  # fmt: skip
            for protocol in ("grpc", "rest")
        }
    finally:
        stop_server(server)


def write_eval_split(root: Path, n: int, feature: str = "v", label: str = "") -> str:
    """An Examples folder (`root`) whose gzipped eval split holds n examples, example i with the
    int64 feature `feature` = i (and, with `label`, the int64 `label` = i % 3)."""
    import tensorflow as tf

    split = root / "Split-eval"
    split.mkdir(parents=True)
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    with tf.io.TFRecordWriter(str(split / "data.gz"), options) as w:
        for i in range(n):
            value = tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))
            features = {feature: value}
            if label:
                features[label] = tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3]))
            example = tf.train.Example(features=tf.train.Features(feature=features))
            w.write(example.SerializeToString())
    return str(root)


def litert_only_python(root: Path) -> Path:
    """The python of a fresh Python 3.10 venv that holds ai-edge-litert and numpy and nothing
    else (links to this venv's copies): what a device app has. TensorFlow does not import there."""
    import subprocess
    import sys
    import sysconfig

    venv = root / "litert-venv"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_paths()["purelib"])
    target = venv / "lib" / "python3.10" / "site-packages"
    for name in ("ai_edge_litert", "numpy", "numpy.libs"):
        (target / name).symlink_to(site / name)
    probe = subprocess.run([str(python), "-c", "import tensorflow"], capture_output=True)
    assert probe.returncode != 0, "TensorFlow imports in the LiteRT-only venv"
    return python


def run_edge_app(
    python: Path, tflite: Path, rows: Path, variant: str = "float32"
) -> list[list[str]]:
    """examples/edge/predict.py under `python` on a CSV: each output line's fields."""
    import subprocess

    from tests.conftest import ROOT

    result = subprocess.run(
        [str(python), str(ROOT / "examples" / "edge" / "predict.py"), "--model", str(tflite),
         "--csv", str(rows), "--variant", variant, "--probabilities"],
        capture_output=True, text=True, timeout=300, cwd=tflite.parent,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return [line.split("\t") for line in result.stdout.splitlines()]


def predict_raw_on_rows(saved_model: Path, rows: list[dict[str, str]]) -> np.ndarray:
    """The SavedModel's predict_raw on CSV rows ({column: cell}, "" missing), the columns mapped
    to features as the TFLite sidecar maps them: probabilities, or predictions."""
    import json

    import tensorflow as tf

    from amp_pipeline.components.export.device_parity import raw_batch
    from amp_pipeline.core import names

    card = json.loads((Path(saved_model) / "tflite" / "model_float32.json").read_text())
    pairs = [p for i in card["inputs"] for p in zip(i["columns"], i["features"], strict=True)]
    cells = [{f: (r[c] if r[c] != "" else None) for c, f in pairs} for r in rows]
    serve = tf.saved_model.load(str(saved_model)).signatures[names.RAW_SIGNATURE]
    out = serve(**raw_batch(serve, cells))
    key = names.PREDICTIONS if names.PREDICTIONS in out else names.PROBABILITIES
    return out[key].numpy()


def check_edge_app(
    python: Path,
    saved_model: Path,
    rows: list[dict[str, str]],
    work: Path,
    label_std: float | None = None,
) -> dict:
    """The edge app's answers (LiteRT alone, on the pushed tflite/ folder and `rows` written
    as a CSV under `work`) against predict_raw's on the same rows, per shipped variant:
    agreement and largest probability difference (regression: the share of predictions within
    1% of the label's standard deviation, and the largest difference)."""
    csv_path = write_csv(Path(work) / "edge_rows.csv", rows)
    reference = predict_raw_on_rows(saved_model, rows)
    out = {}
    for model in sorted((Path(saved_model) / "tflite").glob("model_*.tflite")):
        variant = model.stem.removeprefix("model_")
        lines = run_edge_app(python, model.parent, csv_path, variant)
        assert len(lines) == len(rows), (variant, len(lines))
        if label_std is None:
            probs = np.array([[float(v) for v in line[3:]] for line in lines])
            out[variant] = {
                "agreement": float(np.mean(probs.argmax(1) == reference.argmax(1))),
                "max_diff": float(np.max(np.abs(probs - reference))),
            }
        else:
            predicted = np.array([float(line[1]) for line in lines])
            close = np.abs(predicted - reference) <= 0.01 * label_std
            out[variant] = {
                "within_1pct_std": float(np.mean(close)),
                "max_diff": float(np.max(np.abs(predicted - reference))),
            }
    return out

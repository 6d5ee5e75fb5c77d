"""Infra validation: does the model serve, over the wire, what it computes in process?

The candidate is staged in TF Serving's layout (`<tmp>/<model_name>/1/`), loaded by the local
server on free loopback ports, and asked over gRPC (Predict on `serving_default` with serialized
tf.Examples; GetModelMetadata) and over REST (row format with base64 examples; columnar format on
`predict_raw` with raw feature values). Every answer must equal the SavedModel's own, called in
process on the same inputs, and single-example requests must stay within a latency budget.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from amp_pipeline.core import names
from amp_pipeline.serving.batching import BatchingConfig
from amp_pipeline.serving.client import ClientConfig, ClientError, ServingClient
from amp_pipeline.serving.server import LocalServer, ServerConfig

SERVING = names.SERVING_SIGNATURE
RAW = names.RAW_SIGNATURE
ATOL = 1e-5  # same graph, same machine; batching may change the summation order slightly


@dataclasses.dataclass(frozen=True)
class ValidationConfig:
    """Attributes:
    latency_budget_ms: largest p99 latency of a single-example request (gRPC and REST).
    latency_requests: single-example requests timed per protocol.
    """

    latency_budget_ms: float  # the run's --serving-latency-budget-ms (pipeline/config.py)
    latency_requests: int = 20


def _percentiles(samples_ms: list[float]) -> dict:
    return {
        "p50_ms": float(np.percentile(samples_ms, 50)),
        "p99_ms": float(np.percentile(samples_ms, 99)),
    }


def _raw_inputs(examples: list[bytes], specs: dict) -> tuple[dict, list[int]]:
    """Columns for `predict_raw` from serialized examples; only examples holding every feature."""
    import tensorflow as tf

    columns: dict[str, list] = {name: [] for name in specs}
    kept = []
    for i, serialized in enumerate(examples):
        features = tf.train.Example.FromString(serialized).features.feature
        row = {}
        for name, spec in specs.items():
            if name not in features:
                break
            f = features[name]
            values = list(getattr(f, f.WhichOneof("kind")).value) if f.WhichOneof("kind") else []
            if not values:
                break
            row[name] = values if spec.shape is not None and len(spec.shape) > 1 else values[0]
        else:
            kept.append(i)
            for name, value in row.items():
                columns[name].append(value)
    return columns, kept


def answer_keys(outputs: dict) -> tuple[str, ...]:
    """The outputs a served answer is checked on: probabilities and class ids, or a regression
    model's predictions."""
    if names.PREDICTIONS in outputs:
        return (names.PREDICTIONS,)
    return (names.PROBABILITIES, names.CLASS_IDS)


def by_output(rows: list, keys: tuple[str, ...]) -> dict:
    """REST row-format predictions as {output: values}. A signature with one output (a
    regression model's `predictions`) answers each row with the bare value, not a dict."""
    if rows and not isinstance(rows[0], dict):
        return {keys[0]: rows}
    return {k: [r[k] for r in rows] for k in keys}


def _compare(what: str, got: dict, want: dict, failures: list[str]) -> float:
    """Probabilities within ATOL and equal class ids (regression predictions, in the label's
    units: within ATOL of their size, at least ATOL); returns the largest difference."""
    key = names.PREDICTIONS if names.PREDICTIONS in want else names.PROBABILITIES
    values_got = np.asarray(got[key], dtype=np.float64)
    values_want = np.asarray(want[key], dtype=np.float64)
    if values_got.shape != values_want.shape:
        failures.append(
            f"{what}: {key} of shape {values_got.shape}, in process {values_want.shape}"
        )
        return float("inf")
    diff = float(np.max(np.abs(values_got - values_want))) if values_got.size else 0.0
    bound = (
        ATOL * max(1.0, float(np.max(np.abs(values_want)))) if key == names.PREDICTIONS else ATOL
    )
    if not diff <= bound:
        failures.append(f"{what}: {key} differ from in process by up to {diff:.2e}")
    if key == names.PROBABILITIES and not np.array_equal(
        np.asarray(got[names.CLASS_IDS]), np.asarray(want[names.CLASS_IDS])
    ):
        failures.append(f"{what}: class ids differ from in process")
    return diff


def validate(
    saved_model_dir: str, model_name: str, examples: list[bytes], config: ValidationConfig
) -> dict:
    """Serves `saved_model_dir` locally and checks it; returns the report (`passed`, reasons)."""
    import tensorflow as tf

    failures: list[str] = []
    report: dict = {
        "model_name": model_name,
        "examples": len(examples),
        "config": dataclasses.asdict(config),
    }
    loaded = tf.saved_model.load(saved_model_dir)
    batch = tf.constant(examples)
    want = {k: v.numpy() for k, v in loaded.signatures[SERVING](examples=batch).items()}
    with tempfile.TemporaryDirectory() as tmp:
        version_dir = Path(tmp) / model_name / "1"
        version_dir.parent.mkdir(parents=True)
        _stage(saved_model_dir, version_dir)
        server_config = ServerConfig(
            model_dir=version_dir.parent,
            grpc_port=0,
            rest_port=0,
            poll_s=3600,
            batching=BatchingConfig(),
        )
        try:
            server = LocalServer(server_config).start()
        except Exception as e:  # noqa: BLE001 - a model the server cannot load fails validation
            report.update(passed=False, reasons=[f"the server could not load the model: {e}"])
            return report
        client = ServingClient(ClientConfig(grpc_port=server.grpc_port, rest_port=server.rest_port))
        try:
            signatures, _ = client.metadata(model_name)
            report["signatures"] = sorted(signatures)
            got = client.predict(model_name, {"examples": np.array(examples, dtype=object)})
            report["grpc_max_abs_diff"] = _compare("gRPC Predict", got, want, failures)
            instances = [{"b64": base64.b64encode(e).decode()} for e in examples]
            rows = client.rest_predict(model_name, instances=instances)["predictions"]
            got = by_output(rows, answer_keys(want))
            report["rest_max_abs_diff"] = _compare("REST :predict (instances)", got, want, failures)
            if RAW in loaded.signatures:
                specs = server.repository.get(model_name).inputs[RAW]
                columns, kept = _raw_inputs(examples, specs)
                if kept:
                    raw = {
                        # object arrays for strings: numpy's bytes type drops trailing NULs
                        k: tf.constant(
                            np.array(v, dtype=object if specs[k].dtype == tf.string else None),
                            dtype=specs[k].dtype,
                        )
                        for k, v in columns.items()
                    }
                    want_raw = {k: v.numpy() for k, v in loaded.signatures[RAW](**raw).items()}
                    columns = {
                        k: [x.decode() if isinstance(x, bytes) else x for x in v]
                        for k, v in columns.items()
                    }
                    out = client.rest_predict(model_name, inputs=columns, signature=RAW)["outputs"]
                    out = out if isinstance(out, dict) else {names.PREDICTIONS: out}
                    report["rest_raw_max_abs_diff"] = _compare(
                        "REST :predict (inputs, predict_raw)", out, want_raw, failures
                    )
                report["rest_raw_examples"] = len(kept)
            report["latency"] = _latency(client, model_name, examples[0], loaded, config)
        except ClientError as e:
            failures.append(str(e))
        finally:
            client.close()
            server.stop()
    for protocol in ("grpc", "rest"):
        p99 = report.get("latency", {}).get(protocol, {}).get("p99_ms")
        if p99 is not None and not p99 <= config.latency_budget_ms:
            failures.append(
                f"{protocol} p99 latency {p99:.1f} ms is over the budget of "
                f"{config.latency_budget_ms:g} ms"
            )
    report.update(passed=not failures, reasons=failures)
    return report


def _latency(client: ServingClient, model_name: str, example: bytes, loaded, config) -> dict:
    import tensorflow as tf

    def timed(call) -> list[float]:
        call()  # warm-up
        samples = []
        for _ in range(config.latency_requests):
            start = time.perf_counter()
            call()
            samples.append((time.perf_counter() - start) * 1000)
        return samples

    one = np.array([example], dtype=object)
    b64 = [{"b64": base64.b64encode(example).decode()}]
    serve = loaded.signatures[SERVING]
    return {
        "grpc": _percentiles(timed(lambda: client.predict(model_name, {"examples": one}))),
        "rest": _percentiles(timed(lambda: client.rest_predict(model_name, instances=b64))),
        "in_process": _percentiles(timed(lambda: serve(examples=tf.constant([example])))),
        "requests": config.latency_requests,
    }


def _stage(src: str, dst: Path) -> None:
    """The SavedModel at `dst`: a symlink for a local folder, a copy for a remote URI."""
    if "://" not in src:
        os.symlink(os.path.abspath(src), dst)
        return
    import tensorflow as tf

    for root, _, files in tf.io.gfile.walk(src):
        rel = os.path.relpath(root, src) if root != src else ""
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            tf.io.gfile.copy(f"{root.rstrip('/')}/{name}", str(dst / rel / name))

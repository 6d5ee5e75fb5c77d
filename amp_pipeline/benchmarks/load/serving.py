"""Load benchmark of the local server: N concurrent gRPC or REST clients for a bounded time.

For each server setting (batching on, batching off) the server runs as `amp-pipeline serve` in
its own process, so that its threads do not share a GIL with the clients; the baseline calls the
same SavedModel signature in this process from the same number of threads. Every client sends
the same request (one or more serialized eval examples) in a loop until the time or the request
count runs out. Reported: requests, errors, throughput, p50/p99 latency.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from amp_pipeline.benchmarks.records import cpu_name
from amp_pipeline.core import names
from amp_pipeline.serving.client import ClientConfig, ClientError, ServingClient


def load(
    make_call: Callable[[], Callable[[], None]],
    clients: int,
    duration_s: float,
    max_requests: int | None = None,
) -> dict:
    """Runs `clients` threads, each calling its own `make_call()` in a loop; returns the stats."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    sent = 0
    lock = threading.Lock()
    start_gate = threading.Barrier(clients + 1)
    deadline = 0.0

    def client(i: int) -> None:
        nonlocal sent
        call = make_call()
        start_gate.wait()
        while time.perf_counter() < deadline:
            with lock:
                if max_requests is not None and sent >= max_requests:
                    return
                sent += 1
            t0 = time.perf_counter()
            try:
                call()
            except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
                continue
            latencies[i].append((time.perf_counter() - t0) * 1000)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    deadline = time.perf_counter() + duration_s + 3600  # set for real once all are ready
    start_gate.wait()
    t_start = time.perf_counter()
    deadline = t_start + duration_s
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t_start
    samples = [x for per_client in latencies for x in per_client]
    return {
        "clients": clients,
        "requests": len(samples) + len(errors),
        "errors": len(errors),
        "first_errors": errors[:3],
        "seconds": elapsed,
        "throughput_rps": len(samples) / elapsed if elapsed else 0.0,
        "p50_ms": float(np.percentile(samples, 50)) if samples else None,
        "p99_ms": float(np.percentile(samples, 99)) if samples else None,
    }


def grpc_call_factory(config: ClientConfig, model: str, examples: list[bytes]):
    """Each client: its own channel (as separate client processes would have)."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = names.SERVING_SIGNATURE
    request.inputs["examples"].CopyFrom(tf.make_tensor_proto(np.array(examples, dtype=object)))

    def make_call():
        client = ServingClient(config)
        return lambda: client.predict_request(request)

    return make_call


def rest_call_factory(config: ClientConfig, model: str, examples: list[bytes]):
    """Each client: its own HTTP connection per request, as urllib makes them; no retries, so a
    reset connection counts as an error."""
    import base64
    import dataclasses

    rows = [{"b64": base64.b64encode(e).decode()} for e in examples]

    def make_call():
        client = ServingClient(dataclasses.replace(config, retries=0))
        return lambda: client.rest_predict(model, instances=rows)

    return make_call


PROTOCOLS = {"grpc": grpc_call_factory, "rest": rest_call_factory}


def start_server(
    model_dir: Path, batching: bool, grpc_port: int, rest_port: int, extra: tuple[str, ...] = ()
):
    args = [
        sys.executable,
        "-m",
        "amp_pipeline",
        "serve",
        "--model-dir",
        str(model_dir),
        "--grpc-port",
        str(grpc_port),
        "--rest-port",
        str(rest_port),
    ]
    if not batching:
        args.append("--no-batching")
    args.extend(extra)
    process = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=os.environ.copy()
    )
    wait_ready(ClientConfig(grpc_port=grpc_port, rest_port=rest_port), process, model_dir.name)
    return process


def wait_ready(config: ClientConfig, process: subprocess.Popen, model: str, timeout=120) -> None:
    """Polls REST status until the model is AVAILABLE; fails if the process dies first."""
    client = ServingClient(ClientConfig(config.host, config.grpc_port, config.rest_port, 2.0, 0))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode} while starting")
        try:
            client.rest_status(model)
            return
        except ClientError:
            time.sleep(0.3)
    raise RuntimeError(f"the server was not ready after {timeout} s")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def in_process_factory(saved_model_dir: Path, examples: list[bytes]):
    import tensorflow as tf

    serve = tf.saved_model.load(str(saved_model_dir)).signatures[names.SERVING_SIGNATURE]
    batch = tf.constant(examples)

    def make_call():
        return lambda: serve(examples=batch)

    return make_call


def run_serving_bench(
    model_base: Path,
    examples: list[bytes],
    clients: int,
    duration_s: float,
    ports: tuple[int, int],
    protocols: tuple[str, ...] = ("grpc", "rest"),
    logged: Path | None = None,
) -> dict:
    """Server with batching, server without (over each of `protocols`), and the in-process
    baseline; one result each. With `logged` (a scratch folder): the server with batching
    again, logging every request there and running the oldest other version as a shadow, and
    the production answers' added latency against the plain server's."""
    from amp_pipeline.serving.repository import version_dirs

    versions = version_dirs(model_base)
    if not versions:
        raise ValueError(f"{model_base}: no pushed version there")
    version_dir = versions[max(versions)]
    results = {}
    settings: list[tuple[bool, tuple[str, ...], str]] = [
        (True, (), "batching on"),
        (False, (), "batching off"),
    ]
    shadow = min(versions) if len(versions) > 1 else None
    if logged is not None:
        settings.append((True, ("--log-requests", str(logged / "log")), "batching on, request log"))
        if shadow is not None:
            with_shadow = ("--log-requests", str(logged / "shadow"), "--shadow", str(shadow))
            settings.append((True, with_shadow, f"batching on, request log + shadow v{shadow}"))
    for batching, extra, label in settings:
        process = start_server(model_base, batching, *ports, extra)
        try:
            for protocol in protocols:
                factory = PROTOCOLS[protocol](
                    ClientConfig(grpc_port=ports[0], rest_port=ports[1]), model_base.name, examples
                )
                load(factory, clients, min(2.0, duration_s))  # warm-up
                results[f"server {protocol}, {label}"] = load(factory, clients, duration_s)
        finally:
            stop_server(process)
    added = {}
    for *_, label in settings[2:]:  # the logged settings against the plain one
        for protocol in protocols:
            plain = results[f"server {protocol}, batching on"]
            with_log = results[f"server {protocol}, {label}"]
            added[f"{protocol}, {label.removeprefix('batching on, ')}"] = {
                "p50_ms": with_log["p50_ms"] - plain["p50_ms"],
                "p99_ms": with_log["p99_ms"] - plain["p99_ms"],
                "throughput_ratio": with_log["throughput_rps"] / plain["throughput_rps"],
            }
    factory = in_process_factory(version_dir, examples)
    load(factory, clients, min(2.0, duration_s))
    results["in process (no server)"] = load(factory, clients, duration_s)
    return {
        "model": model_base.name,
        "version": max(versions),
        "examples_per_request": len(examples),
        "clients": clients,
        "duration_s": duration_s,
        "machine": {
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "results": results,
        "logging_added_ms": added,
        "shadow_version": shadow if logged is not None else None,
    }


def to_markdown(result: dict) -> str:
    m = result["machine"]
    lines = [
        f"Model `{result['model']}` version {result['version']}, "
        f"{result['examples_per_request']} example(s) per request, {result['clients']} concurrent "
        f"clients for {result['duration_s']:.0f} s each, on {m['cpu']} ({m['cores']} cores), "
        "loopback. REST clients open a connection per request and do not retry.",
        "",
        "| setting | requests | errors | throughput req/s | p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in result["results"].items():
        lines.append(
            f"| {name} | {r['requests']} | {r['errors']} | {r['throughput_rps']:.0f} | "
            f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} |"
        )
    for what, added in (result.get("logging_added_ms") or {}).items():
        lines.append(
            f"\n{what}: {added['p50_ms']:+.2f} ms at p50, {added['p99_ms']:+.2f} ms at p99, "
            f"throughput x{added['throughput_ratio']:.2f}, against the same server without it "
            "(batching on, one setting after the other)."
        )
    return "\n".join(lines) + "\n"


def write_outputs(result: dict, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "serving.json", "md": out_dir / "serving.md"}
    paths["json"].write_text(json.dumps(result, indent=2))
    paths["md"].write_text(to_markdown(result))
    return paths

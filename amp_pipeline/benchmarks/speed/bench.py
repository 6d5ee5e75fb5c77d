"""The AMP benchmark: every configuration in a fresh process, float32 and AMP interleaved,
the median of the repeats; writes bench.json, bench.md and bench.png."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from amp_pipeline.benchmarks.records import machine  # noqa: F401 (cli.py reads bench.machine)
from amp_pipeline.benchmarks.speed.configs import BenchConfig
from amp_pipeline.components.amp.perf import median
from amp_pipeline.core.child_process import PROJECT_ROOT

logger = logging.getLogger(__name__)


def worker_env() -> dict:
    root = str(PROJECT_ROOT)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env.pop("TF_CONFIG", None)
    return env


def loopback_cluster(workers: int) -> list[dict]:
    """TF_CONFIG of each of `workers` local workers on free 127.0.0.1 ports."""
    import socket

    ports = []
    sockets = []
    for _ in range(workers):  # held open together, so that no two ports repeat
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
        ports.append(s.getsockname()[1])
    for s in sockets:
        s.close()
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    return [{"cluster": cluster, "task": {"type": "worker", "index": i}} for i in range(workers)]


def run_one(
    config: BenchConfig, timeout: int = 3600, weights_out: str = "", env: dict | None = None
) -> dict:
    """Runs one configuration in `python -m amp_pipeline.benchmarks.speed.worker` (one process per
    worker under multiworker; the chief's figures), or `amp_pipeline.benchmarks.speed.jax_worker`
    under KERAS_BACKEND=jax, and returns its figures. `env`: extra environment (the JAX memory cap
    of the batch search)."""
    multiworker = config.replicas > 1 and config.replica_mode == "multiworker"
    module = (
        "amp_pipeline.benchmarks.speed.jax_worker"
        if config.backend == "jax"
        else "amp_pipeline.benchmarks.speed.worker"
    )
    tasks = loopback_cluster(config.replicas) if multiworker else [None]
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path, out_path = Path(tmp) / "config.json", Path(tmp) / "out.json"
        cfg_path.write_text(json.dumps(dataclasses.asdict(config)))
        procs = []
        for i, task in enumerate(tasks):
            worker = {**worker_env(), **(env or {})}
            if config.backend == "jax":
                worker["KERAS_BACKEND"] = "jax"
            if task is not None:
                worker["TF_CONFIG"] = json.dumps(task)
            args = [str(cfg_path), str(out_path) if i == 0 else "", weights_out if i == 0 else ""]
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", module, *args],
                    env=worker,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        errors = []
        try:
            for proc in procs:
                _, err = proc.communicate(timeout=timeout)
                if proc.returncode != 0:
                    errors.append((err.strip().splitlines() or ["no output"])[-1])
        finally:
            for proc in procs:  # one failed worker leaves the others waiting on it
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if errors:
            raise RuntimeError(f"benchmark {config.key} failed: {errors[0]}")
        return json.loads(out_path.read_text())


def run_bench(
    configs: list[BenchConfig],
    repeats: int = 3,
    progress: Callable[[str], None] = print,
    runner: Callable[[BenchConfig], dict] = run_one,
) -> dict:
    """Measures every configuration `repeats` times, in rounds: each round runs every
    configuration once, in order (a model's float32 and AMP runs next to each other), so that
    drift in the machine's speed hits all of them alike. Reports each one's median."""
    if repeats < 1:
        raise ValueError(f"Invalid value for argument repeats: must be >= 1. Received: {repeats}")
    runs: dict[str, list[dict]] = {c.key: [] for c in configs}
    for r in range(repeats):
        for c in configs:
            t0 = time.monotonic()
            result = runner(c)
            runs[c.key].append(result)
            progress(
                f"  round {r + 1}/{repeats}  {c.key:<38} {result['examples_per_sec']:10.1f} ex/s"
                f"  {result['peak_memory_mb']:8.1f} MB  ({time.monotonic() - t0:.0f}s)"
            )
    results = []
    for c in configs:
        rs = runs[c.key]
        results.append(
            {
                **dataclasses.asdict(c),
                "key": c.key,
                "examples_per_sec": median([x["examples_per_sec"] for x in rs]),
                "step_time_ms": {
                    "p50": median([x["step_time_ms"]["p50"] for x in rs]),
                    "p90": median([x["step_time_ms"]["p90"] for x in rs]),
                },
                "peak_memory_mb": median([x["peak_memory_mb"] for x in rs]),
                "memory_method": rs[0]["memory_method"],
                # What ran it: "cpu", or the JAX device's kind (a GPU's name); library versions.
                "ran_on": rs[0].get("device", c.device),
                "versions": rs[0].get("versions"),
                "repeats": [x["examples_per_sec"] for x in rs],
            }
        )
    return {
        "results": results,
        "comparisons": compare(results),
        "scaling": scaling(results),
        "repeats": repeats,
    }


def scaling(results: list[dict]) -> list[dict]:
    """Scaling efficiency of each data-parallel configuration: its global examples/sec over
    `replicas` times the single-replica figure of the same model, policy and XLA setting."""
    single = {
        (model_label(r), r["policy"], r["xla"]): r for r in results if r.get("replicas", 1) == 1
    }
    out = []
    for r in results:
        one = single.get((model_label(r), r["policy"], r["xla"]))
        n = r.get("replicas", 1)
        if n == 1 or one is None:
            continue
        out.append(
            {
                "model": model_label(r),
                "policy": r["policy"],
                "xla": r["xla"],
                "replicas": n,
                "replica_mode": r["replica_mode"],
                "speedup": r["examples_per_sec"] / one["examples_per_sec"],
                "efficiency": r["examples_per_sec"] / (n * one["examples_per_sec"]),
            }
        )
    return out


def _group(r: dict) -> tuple:
    return (model_label(r), r["xla"], r.get("replicas", 1), r.get("backend", "tensorflow"))


def model_label(r: dict) -> str:
    """A result's model as the tables name it: bert with its size and sequence length."""
    if r["model"] == "bert":
        return f"bert-{r.get('bert_size', 'base')}@{r.get('seq_len', 128)}"
    return r["model"]


def compare(results: list[dict]) -> list[dict]:
    """AMP vs each float32 baseline of the same model, XLA setting, replicas and backend (under
    JAX: float32 at JAX's default matmul precision, TF32 on tensor cores, and at `highest`):
    speedup and memory ratio."""
    out = []
    for r in results:
        if r["policy"] == "float32":
            continue
        for b in results:
            if b["policy"] != "float32" or _group(b) != _group(r):
                continue
            out.append(
                {
                    "model": model_label(r),
                    "policy": r["policy"],
                    "xla": r["xla"],
                    "replicas": r.get("replicas", 1),
                    "backend": r.get("backend", "tensorflow"),
                    "baseline": baseline_label(b),
                    "speedup": r["examples_per_sec"] / b["examples_per_sec"],
                    "memory_ratio": (
                        r["peak_memory_mb"] / b["peak_memory_mb"] if b["peak_memory_mb"] else None
                    ),
                }
            )
    return out


def baseline_label(r: dict) -> str:
    if r.get("backend", "tensorflow") != "jax":
        return "float32"
    gpu = r.get("ran_on", "cpu") != "cpu"
    if r.get("matmul_precision") == "highest":
        return "float32 (highest: true FP32)"
    return "float32 (JAX default: TF32 on tensor cores)" if gpu else "float32 (JAX default)"


def to_markdown(bench: dict) -> str:
    m = bench["machine"]
    lines = [
        "# AMP benchmark",
        "",
        f"Machine: {m['cpu']} ({m.get('microarchitecture', 'unknown')}), {m['cores']} cores; "
        "BF16 flags: "
        f"{', '.join(m['bf16_flags']) or 'none'}; AVX-512: {', '.join(m['avx512']) or 'none'}.",
        *(
            [f"Accelerator: {', '.join(sorted(ran_on))} (Keras 3 on JAX, every step XLA-compiled)."]
            if (ran_on := {r.get("ran_on", "cpu") for r in bench["results"]} - {"cpu"})
            else []
        ),
        f"Method: Keras `fit` on synthetic data, each configuration in a fresh process, "
        f"{bench['repeats']} rounds with every configuration once per round (float32 and AMP "
        "of a model side by side), warm-up steps excluded, median reported. Peak memory: "
        f"{bench['results'][0]['memory_method'] if bench['results'] else 'n/a'}.",
        "",
        "| model | policy | XLA | replicas | batch (global) | examples/sec | step p50 ms "
        "| step p90 ms | peak MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in bench["results"]:
        n = r.get("replicas", 1)
        lines.append(
            f"| {model_label(r)} | "
            f"{baseline_label(r) if r['policy'] == 'float32' else r['policy']} "
            f"| {'on' if r['xla'] else 'off'} "
            f"| {n if n == 1 else str(n) + ' ' + r['replica_mode']} | {r['batch_size'] * n} "
            f"| {r['examples_per_sec']:.1f} | {r['step_time_ms']['p50']:.1f} "
            f"| {r['step_time_ms']['p90']:.1f} | {r['peak_memory_mb']:.0f} |"
        )
    if bench["comparisons"]:
        lines += [
            "",
            "| model | AMP policy | XLA | replicas | baseline | speedup | memory vs baseline |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in bench["comparisons"]:
            mem = "n/a" if c["memory_ratio"] is None else f"{c['memory_ratio']:.2f}x"
            lines.append(
                f"| {c['model']} | {c['policy']} | {'on' if c['xla'] else 'off'} "
                f"| {c.get('replicas', 1)} | {c.get('baseline', 'float32')} "
                f"| {c['speedup']:.2f}x | {mem} |"
            )
    lines += max_batch_lines(bench.get("max_batch"))
    if bench.get("scaling"):
        lines += [
            "",
            "| model | policy | XLA | replicas | speedup vs 1 replica | scaling efficiency |",
            "|---|---|---|---|---|---|",
        ]
        for c in bench["scaling"]:
            lines.append(
                f"| {c['model']} | {c['policy']} | {'on' if c['xla'] else 'off'} "
                f"| {c['replicas']} {c['replica_mode']} | {c['speedup']:.2f}x "
                f"| {c['efficiency']:.0%} |"
            )
        lines += [
            "",
            f"Replicas share this machine's {bench['machine']['cores']} cores: local workers "
            "and logical CPU devices prove the data-parallel path and measure its overhead; "
            "they add no compute, so efficiency here is not what separate GPUs or machines give.",
        ]
    return "\n".join(lines) + "\n"


def plot(bench: dict, path: Path) -> None:
    """bench.png: throughput and peak memory per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = bench["results"]
    labels = [r["key"].replace("/xla=", "\nxla=") for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(results)), 4.5))
    colors = ["#4c72b0" if r["policy"] == "float32" else "#dd8452" for r in results]
    axes[0].bar(labels, [r["examples_per_sec"] for r in results], color=colors)
    axes[0].set_ylabel("examples / second (median)")
    axes[0].set_title("Throughput")
    axes[1].bar(labels, [r["peak_memory_mb"] for r in results], color=colors)
    axes[1].set_ylabel("peak memory MB (median)")
    axes[1].set_title("Peak memory")
    for ax in axes:
        ax.tick_params(axis="x", labelsize=7, rotation=45)
    fig.suptitle(f"AMP vs float32 on {bench['machine']['cpu']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(bench: dict, output: Path) -> dict[str, Path]:
    output.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": output / "bench.json",
        "md": output / "bench.md",
        "png": output / "bench.png",
    }
    paths["json"].write_text(json.dumps(bench, indent=2))
    paths["md"].write_text(to_markdown(bench))
    plot(bench, paths["png"])
    return paths


def bench_configs(
    models: list[str],
    policies: list[str],
    xla: list[bool],
    batch_size: int,
    image_size: int,
    steps: int,
    warmup_steps: int = 3,
    replicas: tuple[int, ...] = (1,),
    replica_mode: str = "multiworker",
    backend: str = "tensorflow",
    transformer_size: str = "small",
    bert_size: str = "base",
    seq_lens: tuple[int, ...] = (128,),
) -> list[BenchConfig]:
    """Every combination, ordered so that a model's float32 and AMP runs sit side by side.

    Under JAX every step is compiled by XLA (`xla` is on), and float32 is measured twice: at
    JAX's default matmul precision (TF32 on tensor cores, what NVIDIA compares AMP against on
    Ampere and later) and at `highest` (true FP32, the Volta comparison)."""
    pairs = []
    for p in policies:
        pairs.append((p, ""))
        if backend == "jax" and p == "float32":
            pairs.append((p, "highest"))
    if backend == "jax":
        xla = [True]
    return [
        BenchConfig(
            m,
            p,
            x,
            batch_size,
            image_size,
            steps,
            warmup_steps,
            replicas=n,
            replica_mode=replica_mode,
            backend=backend,
            matmul_precision=precision,
            transformer_size=transformer_size,
            bert_size=bert_size,
            seq_len=seq_len,
        )
        for m in models
        for seq_len in (seq_lens if m == "bert" else (128,))
        for x in xla
        for n in replicas
        for p, precision in pairs
    ]


def device_total_gib(backend: str) -> float | None:
    """Total memory of the JAX GPU (None on a CPU or under TensorFlow): read in a probe
    process, from the allocator's limit at a known fraction."""
    if backend != "jax":
        return None
    probe = (
        "import jax; d = jax.devices()[0]; s = d.memory_stats() or {}; "
        "print(s.get('bytes_limit', 0) if d.platform == 'gpu' else 0)"
    )
    env = {
        **worker_env(),
        "KERAS_BACKEND": "jax",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5",
    }
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
    )
    try:
        limit = int(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return None
    return limit / 0.5 / 2**30 if limit else None


def largest_batches(
    configs: list[BenchConfig],
    budget_gib: float,
    limit: int,
    budget_s: float,
    progress: Callable[[str], None] = print,
) -> list[dict]:
    """The largest batch of each configuration under `budget_gib` (benchmarks/max_batch.py),
    each search sharing `budget_s` equally."""
    from amp_pipeline.benchmarks.speed import max_batch

    total = device_total_gib(configs[0].backend) if configs else None
    env = max_batch.jax_memory_env(budget_gib, total)
    out = []
    for config in configs:

        def fits(batch: int, config=config) -> dict:
            trial = dataclasses.replace(config, batch_size=batch, steps=3, warmup_steps=1)
            try:
                r = run_one(trial, timeout=600, env=env)
            except RuntimeError as e:  # a crash out of memory (the host's, say) does not fit
                return {"fits": False, "error": str(e)[-300:]}
            if r.get("oom"):
                return {"fits": False, "error": "out of memory"}
            peak = r["peak_memory_mb"]
            fit = peak <= budget_gib * 1024
            progress(f"    {config.key} batch {batch}: {peak:.0f} MB {'fits' if fit else 'over'}")
            return {"fits": fit, "peak_memory_mb": peak, "examples_per_sec": r["examples_per_sec"]}

        found = max_batch.search(fits, config.batch_size, limit, budget_s / len(configs))
        out.append(
            {
                "key": config.key,
                "model": model_label(config.__dict__),
                "policy": config.policy,
                "matmul_precision": config.matmul_precision,
                "backend": config.backend,
                "budget_gib": budget_gib,
                "cap": f"XLA_PYTHON_CLIENT_MEM_FRACTION={env['XLA_PYTHON_CLIENT_MEM_FRACTION']}"
                if env
                else "none (CPU): the measured peak decides",
                **found.to_dict(),
            }
        )
    return out


def batch_ratios(found: list[dict]) -> list[dict]:
    """Largest AMP batch over the largest float32 batch of the same model."""
    base = {(r["model"], r["matmul_precision"]): r for r in found if r["policy"] == "float32"}
    out = []
    for r in found:
        if r["policy"] == "float32":
            continue
        for (model, precision), b in base.items():
            if model == r["model"] and b["max_batch"] and r["max_batch"]:
                out.append(
                    {
                        "model": model,
                        "policy": r["policy"],
                        "baseline": "float32" + (f"@{precision}" if precision else ""),
                        "ratio": r["max_batch"] / b["max_batch"],
                        "lower_bound": r["bounded"] or b["bounded"],
                    }
                )
    return out


def max_batch_lines(found: dict | None) -> list[str]:
    if not found:
        return []
    lines = [
        "",
        "| configuration | memory budget | cap | largest batch | first that did not fit |",
        "|---|---|---|---|---|",
    ]
    for r in found["searches"]:
        bound = " (lower bound: time ran out)" if r["bounded"] else ""
        lines.append(
            f"| {r['key']} | {r['budget_gib']:g} GiB | {r['cap']} | {r['max_batch']}{bound} "
            f"| {r['first_failed'] or 'none up to the limit'} |"
        )
    for c in found["ratios"]:
        lines.append(
            f"\nLargest batch, {c['model']} {c['policy']} vs {c['baseline']}: {c['ratio']:.2f}x"
            + (" (a lower bound)" if c["lower_bound"] else "")
        )
    return lines

"""The AMP benchmark: every configuration in a fresh process, float32 and AMP interleaved,
the median of the repeats; writes bench.json, bench.md and bench.png."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.configs import BenchConfig

logger = logging.getLogger(__name__)


def run_one(config: BenchConfig, timeout: int = 3600) -> dict:
    """Runs one configuration in `python -m benchmarks.worker` and returns its figures."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path, out_path = Path(tmp) / "config.json", Path(tmp) / "out.json"
        cfg_path.write_text(json.dumps(dataclasses.asdict(config)))
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.worker", str(cfg_path), str(out_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"benchmark {config.key} failed: {tail}")
        return json.loads(out_path.read_text())


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


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
                "examples_per_sec": _median([x["examples_per_sec"] for x in rs]),
                "step_time_ms": {
                    "p50": _median([x["step_time_ms"]["p50"] for x in rs]),
                    "p90": _median([x["step_time_ms"]["p90"] for x in rs]),
                },
                "peak_memory_mb": _median([x["peak_memory_mb"] for x in rs]),
                "memory_method": rs[0]["memory_method"],
                "repeats": [x["examples_per_sec"] for x in rs],
            }
        )
    return {"results": results, "comparisons": compare(results), "repeats": repeats}


def compare(results: list[dict]) -> list[dict]:
    """AMP vs float32 of the same model and XLA setting: speedup and memory ratio."""
    base = {(r["model"], r["xla"]): r for r in results if r["policy"] == "float32"}
    out = []
    for r in results:
        b = base.get((r["model"], r["xla"]))
        if r["policy"] == "float32" or b is None:
            continue
        out.append(
            {
                "model": r["model"],
                "policy": r["policy"],
                "xla": r["xla"],
                "speedup": r["examples_per_sec"] / b["examples_per_sec"],
                "memory_ratio": (
                    r["peak_memory_mb"] / b["peak_memory_mb"] if b["peak_memory_mb"] else None
                ),
            }
        )
    return out


def microarchitecture(cpuinfo: str | None = None) -> str:
    """AMD Zen generation from /proc/cpuinfo's family and model (the model name says only "AMD
    EPYC" on these machines); vendor, family and model otherwise."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return "unknown"
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    vendor = fields.get("vendor_id", "")
    family, model = fields.get("cpu family"), fields.get("model")
    if not family or not model:
        return "unknown"
    family, model = int(family), int(model)
    if vendor == "AuthenticAMD":
        if family == 26:
            return f"AMD Zen 5 (family {family}, model {model})"
        if family == 25:
            zen = "Zen 4" if model >= 0x10 else "Zen 3"
            return f"AMD {zen} (family {family}, model {model})"
    return f"{vendor} family {family} model {model}"


def machine() -> dict:
    from components.precision import cpu_flags, cpu_name

    flags = cpu_flags()
    return {
        "cpu": cpu_name(),
        "microarchitecture": microarchitecture(),
        "cores": os.cpu_count(),
        "bf16_flags": sorted(f for f in flags if "bf16" in f or f.startswith("amx")),
        "avx512": sorted(f for f in flags if f.startswith("avx512")),
        "python": platform.python_version(),
    }


def to_markdown(bench: dict) -> str:
    m = bench["machine"]
    lines = [
        "# AMP benchmark",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores; BF16 flags: "
        f"{', '.join(m['bf16_flags']) or 'none'}; AVX-512: {', '.join(m['avx512']) or 'none'}.",
        f"Method: Keras `fit` on synthetic data, each configuration in a fresh process, "
        f"{bench['repeats']} rounds with every configuration once per round (float32 and AMP "
        "of a model side by side), warm-up steps excluded, median reported. Peak memory: "
        f"{bench['results'][0]['memory_method'] if bench['results'] else 'n/a'}.",
        "",
        "| model | policy | XLA | batch | examples/sec | step p50 ms | step p90 ms | peak MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in bench["results"]:
        lines.append(
            f"| {r['model']} | {r['policy']} | {'on' if r['xla'] else 'off'} | {r['batch_size']} "
            f"| {r['examples_per_sec']:.1f} | {r['step_time_ms']['p50']:.1f} "
            f"| {r['step_time_ms']['p90']:.1f} | {r['peak_memory_mb']:.0f} |"
        )
    if bench["comparisons"]:
        lines += [
            "",
            "| model | AMP policy | XLA | speedup vs float32 | memory vs float32 |",
            "|---|---|---|---|---|",
        ]
        for c in bench["comparisons"]:
            mem = "n/a" if c["memory_ratio"] is None else f"{c['memory_ratio']:.2f}x"
            lines.append(
                f"| {c['model']} | {c['policy']} | {'on' if c['xla'] else 'off'} "
                f"| {c['speedup']:.2f}x | {mem} |"
            )
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
) -> list[BenchConfig]:
    """Every combination, ordered so that a model's float32 and AMP runs sit side by side."""
    return [
        BenchConfig(m, p, x, batch_size, image_size, steps, warmup_steps)
        for m in models
        for x in xla
        for p in policies
    ]

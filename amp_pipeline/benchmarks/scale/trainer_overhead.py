"""`python -m amp_pipeline.benchmarks.scale.trainer_overhead RUN_OUTPUT`: the pipeline's trainer
against a bare `model.fit` of the same model, batch and policy, side by side.

For each twin of a finished run (float32 and AMP; their `train_spec.json`, so the model, batch,
policy, XLA setting and thread count are the run's own), fresh processes alternate:

- **bare**: the Transform output's train split read into numpy arrays once, then
  `model.fit(x, y, batch_size=..., shuffle=True)` with a per-step timing callback and nothing
  else: what a user's own training loop would do;
- **pipeline**: the trainer's own path, `datasets.train_dataset` (in memory where the split fits
  IN_MEMORY_MAX_BYTES, else streamed from Transform's files) and `fitting.fit_watched` (step
  timer, loss-scale monitor, peak-memory probe).

Both build the model with `model_building.build_fresh` and compile it with
`model_building.compile_model`, train the same number of steps, and time steps with the same
StepTimer (its first 5 steps excluded). Throughput is the batch over the median step time, the
figure the run's own summary reports (and, beside it, over the measured steps' wall time). The ratio
pipeline/bare is the median of the per-round ratios, each round one bare and one pipeline process
run back to back.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from amp_pipeline.benchmarks.records import ROOT
from amp_pipeline.core import names


def find_specs(run_output: Path) -> dict[str, Path]:
    """{"fp32": path, "amp": path} of the twins' train_spec.json under a run's output folder
    (the newest of each where the pipeline root holds several runs)."""
    found = {}
    for twin, node in (("fp32", "TrainerFp32"), ("amp", "TrainerAmp")):
        paths = sorted(
            run_output.rglob(f"{node}/model_run/*/{names.TRAIN_SPEC_JSON}"),
            key=lambda p: p.stat().st_mtime,
        )
        if not paths:
            raise SystemExit(f"{run_output}: no {node} train_spec.json (run the pipeline first)")
        found[twin] = paths[-1]
    return found


def worker(mode: str, spec_path: str, steps: int) -> dict:
    """One measurement in this (fresh) process: the model trained `steps` steps."""
    import tensorflow as tf

    from amp_pipeline.components.training import datasets, fitting, model_building
    from amp_pipeline.components.training.options import TrainSpec

    spec = TrainSpec.from_json(Path(spec_path).read_text())
    if spec.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(spec.intra_op_threads)
    spec = dataclasses.replace(spec, train_steps=steps)
    model, _ = model_building.build_fresh(spec, spec.policy)
    compile_start = time.perf_counter()
    model_building.compile_model(spec, model, spec.xla)
    if mode == "bare":
        from amp_pipeline.components.amp.perf import StepTimer

        x, y = datasets.split_arrays(tuple(spec.train_files), spec.transform_output)
        per_epoch = len(y) // spec.batch_size
        timer = StepTimer(spec.batch_size, warmup_steps=5)
        model.fit(
            x[: per_epoch * spec.batch_size],
            y[: per_epoch * spec.batch_size],
            batch_size=spec.batch_size,
            epochs=-(-steps // per_epoch),
            steps_per_epoch=min(per_epoch, steps),
            shuffle=True,
            callbacks=[timer],
            verbose=0,
        )
        data = "numpy arrays, model.fit's own batching"
    else:
        train_ds = datasets.train_dataset(spec, spec.batch_size, spec.seed)
        _, timer, _, _, _ = fitting.fit_watched(spec, model, None, train_ds)
        in_memory = datasets.memory_arrays(spec, spec.batch_size) is not None
        data = "in memory" if in_memory else "streamed from Transform's files"
    summary = timer.summary()
    return {
        "mode": mode,
        "policy": spec.policy,
        "batch_size": spec.batch_size,
        "xla": spec.xla,
        "threads": spec.intra_op_threads,
        "data": data,
        "examples_per_sec_p50": spec.batch_size / (summary["step_time_ms"]["p50"] / 1000),
        "examples_per_sec_wall": summary["examples_per_sec"],
        "measured_steps": summary["measured_steps"],
        "seconds": time.perf_counter() - compile_start,
    }


def measure(mode: str, spec_path: Path, steps: int) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "amp_pipeline.benchmarks.scale.trainer_overhead",
            "--worker",
            mode,
            str(spec_path),
            "--steps",
            str(steps),
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    if out.returncode != 0:
        raise RuntimeError(f"{mode} worker failed: {out.stderr.strip()[-600:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def compare(specs: dict[str, Path], rounds: int, steps: int, label: str) -> list[dict]:
    rows = []
    for twin, spec_path in specs.items():
        runs = []
        for r in range(rounds):
            order = ("bare", "pipeline") if r % 2 == 0 else ("pipeline", "bare")
            got = {mode: measure(mode, spec_path, steps) for mode in order}
            runs.append(got)
            print(
                f"{label} {twin} round {r + 1}: bare {got['bare']['examples_per_sec_p50']:,.0f}, "
                f"pipeline {got['pipeline']['examples_per_sec_p50']:,.0f} examples/s (p50 step)",
                flush=True,
            )
        ratio = median(
            [
                g["pipeline"]["examples_per_sec_p50"] / g["bare"]["examples_per_sec_p50"]
                for g in runs
            ]
        )
        wall = median(
            [
                g["pipeline"]["examples_per_sec_wall"] / g["bare"]["examples_per_sec_wall"]
                for g in runs
            ]
        )
        first = runs[0]["pipeline"]
        rows.append(
            {
                "run": label,
                "twin": twin,
                "policy": first["policy"],
                "batch_size": first["batch_size"],
                "xla": first["xla"],
                "threads": first["threads"],
                "data": first["data"],
                "bare_p50": median([g["bare"]["examples_per_sec_p50"] for g in runs]),
                "pipeline_p50": median([g["pipeline"]["examples_per_sec_p50"] for g in runs]),
                "ratio_p50": ratio,
                "ratio_wall": wall,
                "rounds": runs,
            }
        )
    return rows


def to_markdown(machine: dict, rows: list[dict], steps: int, rounds: int) -> str:
    lines = [
        f"# Trainer overhead ({machine.get('cpu', '')}, {machine.get('cores', '')} cores)",
        "",
        f"{steps} steps per process, {rounds} rounds (one bare and one pipeline process each, "
        "the order alternating); examples/s = batch / median step time; ratio = median of the "
        "per-round pipeline/bare ratios.",
        "",
        "| run | twin | policy | batch | XLA | pipeline data | bare ex/s | pipeline ex/s | "
        "pipeline/bare (p50 step) | pipeline/bare (wall) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['twin']} | {r['policy']} | {r['batch_size']} | {r['xla']} | "
            f"{r['data']} | {r['bare_p50']:,.0f} | {r['pipeline_p50']:,.0f} | "
            f"{r['ratio_p50']:.3f} | {r['ratio_wall']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amp_pipeline.benchmarks.scale.trainer_overhead", description=__doc__
    )
    parser.add_argument("runs", nargs="*", type=Path, help="finished runs' output folders")
    parser.add_argument("--worker", nargs=2, metavar=("MODE", "SPEC"), help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/trainer_overhead"))
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.steps)))
        return 0
    if not args.runs:
        parser.error("name at least one finished run's output folder")
    from amp_pipeline.benchmarks.scale.runs import machine

    rows = []
    for run in args.runs:
        rows += compare(find_specs(run), args.rounds, args.steps, run.name)
    args.out.mkdir(parents=True, exist_ok=True)
    info = machine()
    (args.out / "trainer_overhead.json").write_text(
        json.dumps({"machine": info, "steps": args.steps, "rows": rows}, indent=2)
    )
    text = to_markdown(info, rows, args.steps, args.rounds)
    (args.out / "trainer_overhead.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

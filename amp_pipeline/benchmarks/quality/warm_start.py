"""`python -m amp_pipeline.benchmarks.quality.warm_start --data insteval.csv`: what warm start
saves on a public table in spans.

lme4's InstEval course ratings split by the lecture's age (`lectage` 6 .. 1: spans 1 .. 6, the
newest last; the column itself dropped). One run trains on span `--base-span` at the defaults
and is pushed. Then the next span is trained once per step count in `--steps`, each in a copy of
that output folder (so each starts from the same production model): warm-started
(`--warm-start on`) and from scratch (`--warm-start off`), everything else at its default but
`--tflite none --speed-rounds 0`. Per run: the float32 twin's eval RMSE and MAE on the new
span's own eval split (the same split for every run: ExampleGen's hash of each row) and the
wall time. The figure: the fewest steps at which the warm-started twin reaches the RMSE the
fresh one reaches at the most steps. Writes bench/warm_start/warm_start.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from amp_pipeline.benchmarks.records import ROOT, cpu_name, write_report

COMMON = ("--label", "rating", "--task", "regression", "--tflite", "none", "--speed-rounds", "0")


def write_spans(data: Path, out: Path) -> str:
    import pandas as pd

    table = pd.read_csv(data)
    for lectage in sorted(table.lectage.unique(), reverse=True):
        span = int(table.lectage.max() - lectage + 1)
        folder = out / f"span-{span}"
        folder.mkdir(parents=True, exist_ok=True)
        table[table.lectage == lectage].drop(columns=["lectage"]).to_csv(
            folder / "ratings.csv", index=False
        )
    return str(out / "span-{SPAN}" / "*.csv")


def run(pattern: str, out: Path, *flags: str) -> dict:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "amp_pipeline", "run", "--data", pattern, "--output", str(out),
         *COMMON, *flags],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"run failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    summary = json.loads((out / "run_summary.json").read_text())
    return {
        "exit": proc.returncode,
        "wall_s": round(wall, 1),
        "rmse": summary["fp32"]["metrics"]["rmse"],
        "mae": summary["fp32"]["metrics"]["mae"],
        "warm_start": summary["warm_start"]["fp32"]["reason"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amp_pipeline.benchmarks.quality.warm_start", description=__doc__
    )
    parser.add_argument("--data", type=Path, default=Path("../shared/data/insteval.csv"))
    parser.add_argument("--base-span", type=int, default=5)
    parser.add_argument("--steps", type=int, nargs="+", default=[60, 125, 250, 500])
    parser.add_argument("--out", type=Path, default=Path("bench/warm_start"))
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    pattern = write_spans(args.data, args.out / "data")
    base = args.out / "base"
    base_run = run(pattern, base, "--span", str(args.base_span))
    rows = []
    for steps in args.steps:
        for mode in ("on", "off"):
            out = args.out / f"{mode}-{steps}"
            shutil.copytree(base, out)
            result = run(pattern, out, "--span", str(args.base_span + 1), "--train-steps",
                         str(steps), "--warm-start", mode)  # fmt: skip
            rows.append({"steps": steps, "mode": mode, **result})
            print(json.dumps(rows[-1]), flush=True)
            shutil.rmtree(out / "tfx", ignore_errors=True)
    most = max(args.steps)
    target = next(r["rmse"] for r in rows if r["steps"] == most and r["mode"] == "off")
    reached = [r["steps"] for r in rows if r["mode"] == "on" and r["rmse"] <= target]
    record = {
        "machine": cpu_name(),
        "base_span": args.base_span,
        "base_run": base_run,
        "runs": rows,
        "scratch_rmse_at_most_steps": target,
        "warm_steps_to_that_rmse": min(reached) if reached else None,
    }
    lines = [
        f"# Warm start on InstEval spans ({cpu_name()})",
        "",
        f"Base: span {args.base_span}, defaults, RMSE {base_run['rmse']:.4f}. Next span "
        f"{args.base_span + 1}, float32 twin's eval RMSE:",
        "",
        "| steps | warm start | RMSE | MAE | wall s |",
        "|---:|---|---:|---:|---:|",
        *(
            f"| {r['steps']} | {r['mode']} | {r['rmse']:.4f} | {r['mae']:.4f} | {r['wall_s']} |"
            for r in rows
        ),
        "",
        f"From scratch at {most} steps: RMSE {target:.4f}; warm-started, the fewest steps to "
        f"reach it: {record['warm_steps_to_that_rmse']}.",
    ]
    write_report(args.out, "warm_start", record, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

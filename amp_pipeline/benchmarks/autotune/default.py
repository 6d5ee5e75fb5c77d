"""`python -m amp_pipeline.benchmarks.autotune.default`: what would `--policy autotune` as the CPU
default cost?

On the embedded digits (CNN) and on a tabular CSV (the MLP), each in a fresh output folder, one
`amp-pipeline run` under the rule table (`--policy auto`, today's default) and one under
`--policy autotune` (its probe spends up to `--autotune-budget-s` before training), in
alternating order over `--rounds`. Per run: the whole run's wall time, the TrainerAmp
component's time (the probe runs inside it), the AMP twin's recipe, which twin shipped and the
exit code. Writes bench/autotune_default.{json,md}; the figures quoted in RESULTS.md come from
this file on the machine it names.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from amp_pipeline.benchmarks.records import ROOT, cpu_name, write_report

TABLE = ROOT / "tests" / "testdata" / "churn.csv"


def run_once(data: str | None, label: str, policy: str, out: Path, steps: int) -> dict:
    shutil.rmtree(out, ignore_errors=True)  # each run in a fresh folder (no autotune cache)
    cmd = [
        sys.executable,
        "-m",
        "amp_pipeline",
        "run",
        "--output",
        str(out),
        "--policy",
        policy,
    ]
    cmd += ["--train-steps", str(steps), "--label", label]
    cmd += ["--data", data] if data else []
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    summary = json.loads((out / "run_summary.json").read_text())
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}")
    tuned = summary.get("autotune") or {}
    return {
        "policy_flag": policy,
        "wall_s": wall,
        "trainer_amp_s": summary["timings_s"].get("TrainerAmp"),
        "amp_recipe": summary["policy"],
        "autotune_winner": (tuned.get("winner") or {}).get("key"),
        "shipped_precision": summary["shipped_precision"],
        "amp_failed": (summary["gate"].get("twins") or {}).get("amp", {}).get("failed"),
        "amp_batch": summary["amp"].get("batch_size"),
        "speedup": summary["speedup"],
        "exit_code": proc.returncode,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--out", default="bench/autotune_default")
    args = p.parse_args(argv)
    out = ROOT / args.out
    cases = {"digits (cnn)": (None, "label"), "churn.csv (mlp)": (str(TABLE), "churn")}
    runs: dict[str, list[dict]] = {name: [] for name in cases}
    for r in range(args.rounds):
        for name, (data, label) in cases.items():
            order = ("auto", "autotune") if r % 2 == 0 else ("autotune", "auto")
            for policy in order:
                result = run_once(data, label, policy, out / "runs" / policy, args.steps)
                runs[name].append(result)
                print(name, json.dumps(result), flush=True)
    flags = Path("/proc/cpuinfo").read_text()
    machine = {
        "cpu": cpu_name(),
        "cores": len([ln for ln in flags.splitlines() if ln.startswith("processor")]),
        "amx_bf16": " amx_bf16" in flags,
        "avx512_bf16": " avx512_bf16" in flags,
    }
    lines = [
        f"# --policy autotune as the CPU default: its cost ({machine['cpu']}, "
        f"{machine['cores']} cores, AMX-BF16 {machine['amx_bf16']}, AVX-512 BF16 "
        f"{machine['avx512_bf16']})",
        "",
        "| data | policy | wall s (median) | TrainerAmp s | AMP recipe | shipped | exit |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, results in runs.items():
        for policy in ("auto", "autotune"):
            mine = [r for r in results if r["policy_flag"] == policy]
            lines.append(
                f"| {name} | {policy} | {statistics.median(r['wall_s'] for r in mine):.0f} | "
                f"{statistics.median(r['trainer_amp_s'] or 0 for r in mine):.0f} | "
                f"{', '.join(sorted({r['amp_recipe'] for r in mine}))} | "
                f"{', '.join(sorted({r['shipped_precision'] for r in mine}))} | "
                f"{', '.join(sorted({str(r['exit_code']) for r in mine}))} |"
            )
    record = {"machine": machine, "steps": args.steps, "runs": runs}
    write_report(out, "autotune_default", record, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

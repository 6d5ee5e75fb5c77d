"""`python -m amp_pipeline.benchmarks.autotune.check`: does autotune pick a recipe at least as fast
as the rule table's, and faster where the rule table's is slower than float32?

Per model, on the embedded digits: a first `amp-pipeline autotune` probe picks a winner; a second,
independent probe (`--autotune-refresh`) measures every candidate again, and the table reads the
first probe's winner, the rule table's recipe and float32, all at the user's batch unless the
winner changed it, from that second probe. Reading the winner's figure from the probe that
chose it would be biased upwards (the maximum of noisy medians); the second probe is not.
Writes benchmarks/results/autotune_check.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from amp_pipeline.benchmarks.records import ROOT

MODELS = ("cnn", "mlp", "transformer", "resnet50")


def probe(model: str, out: Path, budget_s: float, refresh: bool) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "amp_pipeline",
        "autotune",
        "--model",
        model,
        "--output",
        str(out),
    ]
    cmd += ["--autotune-budget-s", str(budget_s)] + (["--autotune-refresh"] if refresh else [])
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"autotune --model {model} failed: {proc.stderr.strip()[-500:]}")
    return json.loads((out / "autotune" / "autotune.json").read_text())


def rate(report: dict, key: str) -> float | None:
    row = report["candidates"].get(key)
    return row["median"] if row and row.get("median") else None


def check(model: str, out: Path, budget_s: float) -> dict:
    first = probe(model, out, budget_s, refresh=True)
    second = probe(model, out, budget_s, refresh=True)
    rule = first["rule_table"]
    rule_key = f"{rule['policy']}/xla={'on' if rule['xla'] else 'off'}/batch=64/threads=default"
    fp32_key = "float32/xla=off/batch=64/threads=default"
    winner = first["winner"]["key"]
    row = {
        "model": model,
        "budget_s": budget_s,
        "winner": winner,
        "rule": rule_key,
        "winner_rate": rate(second, winner),
        "rule_rate": rate(second, rule_key),
        "float32_rate": rate(second, fp32_key),
        "second_probe_winner": second["winner"]["key"],
        "hardware": first["hardware"],
    }
    if row["winner_rate"] and row["rule_rate"]:
        row["winner_vs_rule"] = row["winner_rate"] / row["rule_rate"]
    if row["rule_rate"] and row["float32_rate"]:
        row["rule_vs_float32"] = row["rule_rate"] / row["float32_rate"]
    return row


def to_markdown(rows: list[dict], machine: str) -> str:
    lines = [
        f"Machine: {machine}. Embedded digits; examples/sec from the second, independent probe.",
        "",
        "| model | probe budget | autotune's choice | ex/s | rule table's choice | ex/s "
        "| float32 b64 ex/s | autotune vs rule | rule vs float32 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def rate(v):
        return "not measured" if v is None else f"{v:,.0f}"

    def ratio(v):
        return "n/a" if v is None else f"{v:.2f}x"

    for r in rows:
        lines.append(
            f"| {r['model']} | {r.get('budget_s', 60):.0f} s | {r['winner']} "
            f"| {rate(r['winner_rate'])} | {r['rule']} "
            f"| {rate(r['rule_rate'])} | {rate(r['float32_rate'])} "
            f"| {ratio(r.get('winner_vs_rule'))} | {ratio(r.get('rule_vs_float32'))} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from amp_pipeline.benchmarks.records import machine

    p = argparse.ArgumentParser(prog="python -m amp_pipeline.benchmarks.autotune.check")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument(
        "--budget-s",
        type=float,
        default=60.0,
        help="each probe's budget (ResNet-50 needs about 300 s on 2 cores to measure anything)",
    )
    p.add_argument("--work", type=Path, default=Path("/tmp/autotune_check"))
    p.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results")
    args = p.parse_args(argv)
    previous = args.output / "autotune_check.json"
    # Rows of other models from an earlier run stay (a rerun of one model replaces its row).
    kept = json.loads(previous.read_text())["rows"] if previous.exists() else []
    models = args.models.split(",")
    rows = [r for r in kept if r["model"] not in models]
    for model in models:
        rows.append(check(model, args.work, args.budget_s))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "hardware"}), flush=True)
    rows.sort(key=lambda r: MODELS.index(r["model"]) if r["model"] in MODELS else len(MODELS))
    m = machine()
    name = f"{m['cpu']} ({m['microarchitecture']}), {m['cores']} cores"
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "autotune_check.json").write_text(
        json.dumps({"machine": m, "rows": rows}, indent=2)
    )
    (args.output / "autotune_check.md").write_text(to_markdown(rows, name))
    print(to_markdown(rows, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())

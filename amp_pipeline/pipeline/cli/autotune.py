"""`amp-pipeline autotune`: which recipe is fastest for this model here, and does it keep parity?

The data half of the pipeline runs (cached), then the same probe the AMP trainer runs under
`--policy autotune` (components/training/autotune.py). It writes
`<output>/autotune/autotune.json` and prints the candidates, the parity probe and the winner.
"""

from __future__ import annotations

import dataclasses
from typing import TextIO

from amp_pipeline.core.fmt import number
from amp_pipeline.pipeline.config import RunConfig


def autotune(config: RunConfig, console: TextIO) -> dict:
    """Probes, chooses, writes autotune.json; returns its content.

    Raises:
        InputError: bad data or a broken model module (exit code 2).
    """
    from amp_pipeline.pipeline.data_half import transformed

    with transformed(config, "autotune") as (t, terminal):
        from amp_pipeline.components.training.options import TrainSpec
        from amp_pipeline.components.training.trainer import autotuned
        from amp_pipeline.pipeline.pipeline import twin_options

        options = twin_options(t.config, t.data, t.module_ref, "autotune", False, False, "auto")
        options = dataclasses.replace(
            options, autotune_cache=str(config.output_dir / "autotune_cache.json")
        )
        spec = TrainSpec(
            train_files=t.train_files,
            eval_files=t.eval_files,
            transform_output=t.transform_output,
            serving_model_dir="",
            model_run_dir=str(config.output_dir / "autotune"),
            data_spec=t.data.to_dict(),
            **options.to_config(),
        )
        terminal.write(f"  probing for up to {spec.autotune_budget_s:.0f} s ...\n")
        _, report = autotuned(spec)
    return report


def format_report(report: dict) -> str:
    """The candidates by throughput, the parity probe and the winner."""
    lines = ["  candidate                                       examples/sec      spread  note"]
    rows = sorted(report["candidates"].items(), key=lambda kv: -(kv[1]["median"] or 0))
    for key, r in rows:
        spread = r.get("spread") or [None, None]
        note = r.get("dropped") or ""
        lines.append(
            f"  {key:<46} {number(r['median'], ',.0f'):>12}  {number(spread[0], ',.0f'):>5}-"
            f"{number(spread[1], ',.0f'):<6} {note}"
        )
    for p in report.get("parity", []):
        mark = "ok " if p["ok"] else "NO "
        lines.append(
            f"  parity  {mark} {p['policy']}, xla={'on' if p['xla'] else 'off'}: {p['reason']}"
        )
    w = report["winner"]
    rule = report.get("rule_table") or {}
    lines += [
        f"  winner       {w['key']}: {number(w['examples_per_sec'], ',.0f')} examples/sec "
        f"({w['reason']})",
        f"  rule table   {rule.get('policy')}, xla={'on' if rule.get('xla') else 'off'}",
    ]
    if report.get("cached"):
        lines.append("  (from the cache: --autotune-refresh probes again)")
    return "\n".join(lines)

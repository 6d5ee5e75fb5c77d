"""run_summary.json (the contract in docs/ARCHITECTURE.md and the README) and the short table
printed at the end of a run."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from components.amp.precision import Recipe
from components.gate import speed_record
from core import names
from core.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_PROMOTED, EXIT_REJECTED
from core.fmt import number
from pipeline.results import NodeOutput

TRAINER_KEYS = (
    "policy",
    "accuracy",
    "loss",
    "examples_per_sec",
    "step_time_ms",
    "peak_memory_mb",
    "memory_method",
    "train_steps",
    "batch_size",
    "model",
)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def build_summary(
    outputs: dict[str, dict[str, NodeOutput]],
    recipe: Recipe,
    config_dict: dict,
    data_dict: dict,
    output_dir: Path,
) -> dict:
    """Assembles run_summary.json from the run's artifacts, and copies the gate's decision files
    next to it."""
    from components.amp.diagnosis import why_not_faster
    from pipeline.pipeline import (
        EVALUATOR,
        EVALUATOR_PRODUCTION,
        GATE,
        PUSHER,
        TRAINER_AMP,
        TRAINER_FP32,
    )
    from pipeline.results import trainer_figures

    fp32 = trainer_figures(outputs[TRAINER_FP32]["model_run"])
    amp = trainer_figures(outputs[TRAINER_AMP]["model_run"])
    decision_dir = Path(outputs[GATE]["decision"].uri)
    decision = json.loads((decision_dir / names.DECISION_JSON).read_text())
    for name in (names.DECISION_JSON, names.DECISION_MD):
        shutil.copyfile(decision_dir / name, output_dir / name)
    measured = decision["measurements"]
    pushed = outputs.get(PUSHER, {}).get("pushed_model")
    pushed_path = None
    if pushed is not None and pushed.properties.get("pushed"):
        pushed_path = pushed.properties.get("pushed_destination")
    already = decision.get("already_in_production", False)
    if already and not pushed_path:
        pushed_path = _newest_version(output_dir / "serving" / config_dict["model_name"])
    status = "promoted" if decision["passed"] and pushed_path else "rejected"

    def trainer(figures: dict, accuracy: float) -> dict:
        d = {k: figures[k] for k in TRAINER_KEYS if k in figures}
        d["accuracy"] = accuracy
        d["trainer_accuracy"] = figures["accuracy"]
        return d

    amp_out = trainer(amp, measured["amp_accuracy"])
    amp_out["loss_scale"] = {k: v for k, v in amp.get("loss_scale", {}).items() if k != "history"}
    amp_out["dtype_warnings"] = amp.get("dtype_warnings", [])
    trainers_speedup = _ratio(amp["examples_per_sec"], fp32["examples_per_sec"])
    speed = decision.get("speed") or {}
    record = decision.get("speed_record") or speed_record.build(fp32, amp, speed)
    # The gate's figure: the precision ratio where it was measured, else the recipe ratio.
    speedup = record[record["gate_uses"]]["ratio"]
    rules = {r["name"]: r for r in decision["rules"]}
    for name, variant in amp.get("tflite", {}).get("variants", {}).items():
        if f"tflite_{name}" in rules:
            variant["passed"] = rules[f"tflite_{name}"]["passed"]
            variant["outcome"] = rules[f"tflite_{name}"]["outcome"]
    return {
        "status": status,
        "exit_code": EXIT_PROMOTED if status == "promoted" else EXIT_REJECTED,
        # What the AMP trainer ran (it may have fallen back from XLA), not what was asked.
        "policy": amp.get("policy", recipe.policy),
        "xla": amp.get("xla", recipe.xla),
        "xla_fallback": amp.get("xla_fallback"),
        "loss_scaling": amp.get("loss_scaling", recipe.loss_scaling),
        "model": amp.get("model"),
        "model_module": amp.get("model_module"),
        "output_fix": amp.get("output_fix"),
        "readiness": readiness_summary(amp.get("readiness")),
        "autotune": autotune_summary(amp.get("autotune")),
        "distribution": amp.get("distribution"),
        "why_not_faster": why_not_faster(
            speedup,
            amp.get("policy", recipe.policy),
            recipe.reason,
            fp32,
            amp,
            amp.get("diagnostics"),
        ),
        "hardware": {**recipe.hardware.to_dict(), "reason": recipe.reason},
        "warnings": list(recipe.warnings),
        "fp32": trainer(fp32, measured["fp32_accuracy"]),
        "amp": amp_out,
        "production": {"accuracy": measured["production_accuracy"]},
        "speedup": speedup,
        "speedup_kind": record["gate_uses"],
        "speedup_trainers": trainers_speedup,
        "speed": speed,
        "speed_record": record,
        "seeds": decision.get("seeds"),
        "memory_ratio": record["memory"]["ratio"],
        "memory_ratio_kind": record["memory"]["kind"],
        "memory_spread_mb": {
            twin: (decision.get("seeds") or {}).get(twin, {}).get("peak_memory_mb")
            for twin in ("fp32", "amp")
        },
        "accuracy_delta": measured["amp_accuracy"] - measured["fp32_accuracy"],
        "gate": {
            "passed": decision["passed"],
            "failed": decision["failed"],
            "rules": decision["rules"],
            "tfma_failures": decision["tfma_failures"],
            "decision_md": str(output_dir / names.DECISION_MD),
        },
        "exports": exports(pushed_path, amp.get("tflite", {})),
        "serving": _serving(decision.get("serving", {})),
        "already_in_production": already,
        "evaluation": {
            "fp32_baseline": outputs[EVALUATOR]["evaluation"].uri,
            "production": outputs[EVALUATOR_PRODUCTION]["evaluation"].uri,
        },
        "data": {
            "source": data_dict["source"],
            "rows": data_dict["rows"],
            "classes": list(data_dict["classes"]),
            "class_counts": data_dict.get("class_counts", {}),
            "missing": data_dict.get("missing", {}),
            "excluded": list(data_dict.get("excluded", [])),
            "notices": list(data_dict.get("notices", [])),
        },
        "config": config_dict,
        "output_dir": str(output_dir),
    }


def autotune_summary(report: dict | None) -> dict | None:
    """autotune's choice and the candidates' throughput (autotune.json holds the rest)."""
    if report is None:
        return None
    return {
        "winner": report["winner"],
        "scaling": report.get("scaling"),
        "rule_table": report.get("rule_table"),
        "cached": report.get("cached", False),
        "budget_s": report.get("budget_s"),
        "candidates": {
            key: {"median": r.get("median"), "spread": r.get("spread"), "dropped": r.get("dropped")}
            for key, r in report.get("candidates", {}).items()
        },
        "parity": report.get("parity", []),
    }


def readiness_summary(report: dict | None) -> dict | None:
    """The readiness check's verdict without its per-layer tables (those are in figures.json
    and readiness.json)."""
    if report is None:
        return None
    numeric = report.get("numeric") or {}
    return {
        "policy": report["policy"],
        "ok": report["ok"],
        "findings": report["findings"],
        "numeric": {k: v for k, v in numeric.items() if k not in ("layers", "output_dtypes")},
        "compile": report.get("compile"),
        "tensor_core_advice": report.get("tensor_core_advice", []),
        "float32_layers": report.get("float32_layers", []),
    }


def _newest_version(model_dir: Path) -> str | None:
    versions = [p for p in model_dir.glob("*") if p.is_dir() and p.name.isdigit()]
    return str(max(versions, key=lambda p: int(p.name))) if versions else None


def exports(pushed_path: str | None, report: dict) -> dict:
    """run_summary.json's `exports`: the pushed SavedModel and every TFLite variant.

    Variant paths point into the pushed version's tflite/ folder when the model was pushed,
    else into the trainer's output (nothing was pushed).
    """
    variants = {}
    for name, r in report.get("variants", {}).items():
        v = dict(r)
        if pushed_path and r.get("path"):
            v["path"] = str(Path(pushed_path) / "tflite" / Path(r["path"]).name)
        variants[name] = v
    return {
        "saved_model": pushed_path,
        "tflite": variants,
        "tflite_reference": report.get("reference"),
    }


def failure_summary(error: BaseException, exit_code: int, recipe: Recipe | None) -> dict:
    """What run_summary.json holds when the run stopped before a decision."""
    summary = {
        "status": {EXIT_FAILED: "failed", EXIT_BAD_INPUT: "bad_input"}.get(exit_code, "failed"),
        "exit_code": exit_code,
        "error": str(error).splitlines()[0] if str(error) else type(error).__name__,
        "exports": {"saved_model": None},
    }
    if recipe is not None:
        summary.update(
            policy=recipe.policy,
            xla=recipe.xla,
            loss_scaling=recipe.loss_scaling,
            hardware={**recipe.hardware.to_dict(), "reason": recipe.reason},
        )
    return summary


def running_summary(config) -> dict:
    """What run_summary.json says while a run is under way: never an earlier run's verdict."""
    import datetime
    import os

    return {
        "status": "running",
        "exit_code": None,
        "pid": os.getpid(),
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "exports": {"saved_model": None},
    }


def interrupted_summary(error, where: str, recipe: Recipe | None) -> dict:
    """run_summary.json of a run stopped by SIGINT/SIGTERM (`error`: pipeline.signals)."""
    summary = failure_summary(error, error.exit_code, recipe)
    summary.update(status="interrupted", signal=error.name, error=f"{error}{where}")
    return summary


def write_summary(summary: dict, output_dir: Path) -> Path:
    """Writes run_summary.json whole or not at all (a temporary file, then a rename)."""
    path = output_dir / names.RUN_SUMMARY_JSON
    staging = path.with_suffix(".json.tmp")
    staging.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    staging.replace(path)
    return path


def _serving(report: dict) -> dict:
    """The infra validation's verdict and latencies, without its configuration echo."""
    keys = ("passed", "reasons", "examples", "signatures", "latency")
    return {k: report[k] for k in keys if k in report}


def speed_lines(summary: dict) -> list[str]:
    """The speed record: the precision ratio, the recipe ratio and the memory ratio, each with
    what it was measured at, and which one the gate uses."""
    record = summary.get("speed_record")
    if not record:
        return []
    first, *rest = speed_record.lines(record)
    uses = f"  [gate: {record['gate_uses']} ratio]"
    return [f"  speed        {first}" + (uses if record["gate_uses"] == "precision" else "")] + [
        f"               {line}" + (uses if i == 0 and record["gate_uses"] == "recipe" else "")
        for i, line in enumerate(rest)
    ]


def seeds_lines(summary: dict) -> list[str]:
    """Per seed, with --seeds > 1: each twin's accuracy and the paired difference."""
    seeds = summary.get("seeds") or {}
    if len(seeds.get("pairs", [])) < 2:
        return []
    fp32 = {r["seed"]: r for r in seeds["fp32"]["per_seed"]}
    amp = {r["seed"]: r for r in seeds["amp"]["per_seed"]}
    lines = []
    for pair in seeds["pairs"]:
        s = pair["seed"]
        lines.append(
            f"  seed {s:<6} fp32 {number(fp32.get(s, {}).get('accuracy'), '.4f')}  amp "
            f"{number(amp.get(s, {}).get('accuracy'), '.4f')}  change {pair['delta']:+.4f} "
            f"({pair['b']} won, {pair['c']} lost of {pair['n']})"
        )
    d = seeds["delta"]
    lines.append(
        f"  seeds        mean change {number(d['mean'], '+.4f')} (sd {number(d['std'], '.4f')})"
        + (f", trimmed mean {d['trimmed_mean']:+.4f}" if d.get("trimmed") else "")
    )
    return lines


def readiness_lines(summary: dict) -> list[str]:
    """The readiness check in the terminal table: its verdict and each finding."""
    lines = []
    fix = summary.get("output_fix")
    if fix and fix.get("action") not in (None, "none"):
        lines.append(f"  output       {fix['detail']}")
    report = summary.get("readiness")
    if not report:
        return lines
    verdict = "ready" if report["ok"] else f"{len(report['findings'])} finding(s)"
    lines.append(f"  readiness    {verdict} under {report['policy']}")
    lines += [f"    - {finding}" for finding in report["findings"]]
    lines += [f"    tensor cores: {advice}" for advice in report.get("tensor_core_advice", [])]
    return lines


def _interval(trainer: dict, summary: dict) -> str:
    """Wilson 95% interval of an accuracy on the eval examples the gate paired."""
    from components.gate.stats import proportion_interval

    pairs = (summary.get("seeds") or {}).get("pairs") or []
    n = pairs[0]["n"] if pairs else 0
    if not n or trainer.get("accuracy") is None:
        return "n/a"
    lo, hi = proportion_interval(round(trainer["accuracy"] * n), n)
    return f"{lo:.3f}-{hi:.3f}"


def _steps(trainer: dict) -> str:
    t = trainer["step_time_ms"]
    return f"{number(t['p50'], '.1f')}/{number(t['p90'], '.1f')}"


def format_table(summary: dict) -> str:
    """The short table printed at the end of `amp-pipeline run`."""
    fp32, amp = summary["fp32"], summary["amp"]
    rows = [
        ("", "fp32", f"amp ({summary['policy']})"),
        ("accuracy (eval)", number(fp32["accuracy"], ".4f"), number(amp["accuracy"], ".4f")),
        ("  95% interval", _interval(fp32, summary), _interval(amp, summary)),
        (
            "examples/sec",
            number(fp32["examples_per_sec"], ",.0f"),
            number(amp["examples_per_sec"], ",.0f"),
        ),
        ("step p50/p90 ms", _steps(fp32), _steps(amp)),
        (
            "peak memory MB",
            number(fp32["peak_memory_mb"], ".0f"),
            number(amp["peak_memory_mb"], ".0f"),
        ),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"  {a:<{width}}  {b:>12}  {c:>24}" for a, b, c in rows]
    hw = summary["hardware"]
    gate = summary["gate"]
    verdict = "PROMOTED" if summary["status"] == "promoted" else "REJECTED"
    lines += [
        "",
        f"  hardware     {hw['device']}: {hw['name']}",
        f"  recipe       {summary['policy']}, xla={'on' if summary['xla'] else 'off'}, "
        f"loss scaling={'on' if summary['loss_scaling'] else 'off'}",
        f"  why          {hw['reason']}",
    ]
    if summary.get("xla_fallback"):
        lines.append(f"  xla          fell back to off: {summary['xla_fallback']}")
    lines += readiness_lines(summary)
    tuned = summary.get("autotune")
    if tuned:
        w = tuned["winner"]
        rule = tuned.get("rule_table") or {}
        lines.append(
            f"  autotune     {w['key']}: {w['reason']}; {tuned.get('scaling')} (rule table: "
            f"{rule.get('policy')}, xla={'on' if rule.get('xla') else 'off'})"
            + (" [cached]" if tuned.get("cached") else "")
        )
    spread = summary.get("distribution")
    if spread:
        lines.append(f"  replicas     {spread['strategy']}: {spread['note']}")
    lines += speed_lines(summary)
    slow = summary.get("why_not_faster")
    if slow:
        lines += [f"    why not faster: {reason}" for reason in slow["reasons"]]
    lines += seeds_lines(summary)
    lines += [
        f"  gate         {verdict}"
        + (f": failed {', '.join(gate['failed'])}" if gate["failed"] else ""),
    ]
    marks = {"skipped": "skip", "pass": "pass", "fail": "FAIL", "unproven": "unproven"}
    for rule in gate["rules"]:
        mark = marks.get(rule.get("outcome"), "pass" if rule["passed"] else "FAIL")
        lines.append(f"    {mark:<8} {rule['name']:<22} {rule['detail']}")
    for name, v in summary["exports"].get("tflite", {}).items():
        if v.get("converted"):
            lines.append(
                f"  tflite       {name:<13} {v['size_bytes'] / 1024:8.1f} KiB  "
                f"accuracy {v['accuracy']:.4f}  agreement {v['agreement']:.4f}  "
                f"{v['latency_ms']:.3f} ms/example"
            )
        else:
            lines.append(f"  tflite       {name:<13} FAILED: {v['error']}")
    if summary.get("already_in_production"):
        lines.append(
            f"  pushed       nothing new: this model is already in production at "
            f"{summary['exports']['saved_model']}"
        )
    elif summary["exports"]["saved_model"]:
        lines.append(f"  pushed       {summary['exports']['saved_model']}")
    else:
        lines.append("  pushed       nothing (the serving folder is unchanged)")
    if summary.get("deploy"):
        lines.append(f"  deploy       {summary['deploy']['models_config']} (+ kubernetes/)")
    return "\n".join(lines)

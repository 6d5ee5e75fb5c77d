"""run_summary.json: its contract (`CONTRACT`, documented in docs/ARCHITECTURE.md) and building
it from the run's artifacts. The table printed at the end of a run is pipeline/cli/table.py."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from amp_pipeline.components.amp.precision import Recipe
from amp_pipeline.components.gate import twins
from amp_pipeline.components.speed import record as speed_record
from amp_pipeline.core import names
from amp_pipeline.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_PROMOTED, EXIT_REJECTED
from amp_pipeline.pipeline.results import NodeOutput

NUMBER = (int, float)
OPTIONAL_NUMBER = (int, float, type(None))
TRAINER = {
    "policy": str,
    "accuracy": OPTIONAL_NUMBER,  # null for a regression label: see "metrics"
    "examples_per_sec": NUMBER,
    "step_time_ms": {"p50": NUMBER, "p90": NUMBER},
    "peak_memory_mb": NUMBER,
    "memory_method": str,
    "batch_size": int,
}
# What users' scripts and CI gates may rely on in a finished run's run_summary.json: every key
# here is present with a value of the given type(s); others may be added freely. A dict value is
# a nested contract; [x] is a list whose items follow x.
CONTRACT = {
    "status": str,  # "promoted" (a twin shipped) or "rejected" (none did)
    "shipped_precision": str,  # "amp", "float32" (the float32 twin shipped) or "none"
    "task": str,  # "classification" or "regression" (then each trainer has "metrics": mae,
    # rmse, r2 in the label's units, and "mae_change" replaces "accuracy_delta")
    "exit_code": int,  # 0 a twin shipped, 3 none did
    "policy": str,  # what the AMP trainer ran
    "xla": bool,
    "loss_scaling": bool,
    "hardware": {"device": str, "name": str, "features": list, "reason": str},
    "fp32": TRAINER,
    "amp": {**TRAINER, "loss_scale": {"final": OPTIONAL_NUMBER, "overflow_steps": int}},
    "speedup": OPTIONAL_NUMBER,  # the ratio the gate used (speedup_kind says which)
    "speedup_kind": str,  # "precision" or "recipe"
    "speed_record": {
        "precision": {"ratio": OPTIONAL_NUMBER},
        "recipe": {"ratio": OPTIONAL_NUMBER, "amp": dict, "fp32": dict},
        "memory": {"ratio": OPTIONAL_NUMBER, "kind": str},
        "gate_uses": str,
    },
    "memory_ratio": OPTIONAL_NUMBER,
    "accuracy_delta": OPTIONAL_NUMBER,
    "gate": {
        "passed": bool,  # a twin shipped
        "shipped_precision": str,
        "why": str,  # why that twin (or none) shipped
        "failed": [str],  # the shipped twin's failed rules (the AMP twin's where none shipped)
        "rules": [  # the shipped twin's rules (the AMP twin's where none shipped); "twins"
            # holds both twins' rules
            {
                "name": str,
                "value": OPTIONAL_NUMBER,
                "threshold": NUMBER,
                "passed": bool,
                "outcome": str,  # pass, fail, unproven or skipped
                "detail": str,
            }
        ],
        "decision_md": str,
    },
    "exports": {"saved_model": (str, type(None)), "tflite": dict},
    "mlflow": {"tracking_uri": str, "experiment": str, "run_id": str},
}


def contract_violations(summary: dict, contract: dict = CONTRACT, where: str = "") -> list[str]:
    """Where `summary` breaks the contract: a missing key or a value of another type."""
    out = []
    for key, want in contract.items():
        path = f"{where}{key}"
        if key not in summary:
            out.append(f"{path}: missing")
            continue
        out += _check(summary[key], want, path)
    return out


def _check(value, want, path: str) -> list[str]:
    if isinstance(want, dict):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not an object"]
        return contract_violations(value, want, f"{path}.")
    if isinstance(want, list):
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        return [v for i, item in enumerate(value) for v in _check(item, want[0], f"{path}[{i}]")]
    types = want if isinstance(want, tuple) else (want,)
    if isinstance(value, bool) and bool not in types:
        return [f"{path}: bool, not {' or '.join(t.__name__ for t in types)}"]
    if not isinstance(value, types):
        return [f"{path}: {type(value).__name__}, not {' or '.join(t.__name__ for t in types)}"]
    return []


def contract_keys(contract: dict = CONTRACT, where: str = "") -> list[str]:
    """Every key path of the contract, as docs/ARCHITECTURE.md lists them."""
    keys = []
    for key, want in contract.items():
        keys.append(f"{where}{key}")
        nested = (
            want
            if isinstance(want, dict)
            else (want[0] if isinstance(want, list) and isinstance(want[0], dict) else None)
        )
        if nested is not None:
            suffix = "[]." if isinstance(want, list) else "."
            keys += contract_keys(nested, f"{where}{key}{suffix}")
    return keys


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


def data_summary(data_dict: dict) -> dict:
    """What run_summary.json says of the input (from the DataSpec as a dict)."""
    return {
        "source": data_dict["source"],
        "rows": data_dict["rows"],
        "unlabelled_rows": data_dict.get("unlabelled_rows", 0),
        "label": data_dict["label"],
        "classes": list(data_dict["classes"]),
        "task_reason": data_dict.get("task_reason", ""),
        "label_mean": data_dict.get("label_mean"),
        "label_std": data_dict.get("label_std"),
        "text_features": list(data_dict.get("text_features", [])),
        "categorical_features": list(data_dict.get("categorical_features", [])),
        "bag_features": [list(b) for b in data_dict.get("bag_features", [])],
        "max_tokens": data_dict.get("max_tokens", 0),
        "vocab_size": data_dict.get("vocab_size", 0),
        "text_figures": data_dict.get("text_figures", {}),
        "class_counts": data_dict.get("class_counts", {}),
        "missing": data_dict.get("missing", {}),
        "excluded": list(data_dict.get("excluded", [])),
        "notices": list(data_dict.get("notices", [])),
        # With {SPAN} in --data: the spans that trained and evaluated the model.
        "spans": data_dict.get("spans") or None,
    }


def tolerated_findings(outputs: dict) -> list[dict]:
    """ExampleValidator's findings AnomalyCheck judged chance, not drift (a rare value read as
    out-of-vocabulary, missing cells in an optional column): split, feature, finding."""
    from amp_pipeline.components.data.anomaly_check import TOLERATED
    from amp_pipeline.pipeline.pipeline import ANOMALY_CHECK

    schema = outputs.get(ANOMALY_CHECK, {}).get("curated_schema")
    recorded = schema.properties.get(TOLERATED) if schema is not None else None
    return json.loads(recorded) if recorded else []


def evaluation_paths(outputs: dict) -> dict:
    """The TFMA evaluations, and each twin's served predictions on the eval split per seed (the
    gate's pairs)."""
    from amp_pipeline.pipeline.amp_half import (
        EVALUATOR,
        EVALUATOR_PRODUCTION,
        TRAINER_AMP,
        TRAINER_FP32,
    )

    return {
        "fp32_baseline": outputs[EVALUATOR]["evaluation"].uri,
        "production": outputs[EVALUATOR_PRODUCTION]["evaluation"].uri,
        "fp32_predictions": str(
            Path(outputs[TRAINER_FP32]["model_run"].uri) / names.EVAL_PREDICTIONS
        ),
        "amp_predictions": str(
            Path(outputs[TRAINER_AMP]["model_run"].uri) / names.EVAL_PREDICTIONS
        ),
    }


def pushed_model_path(pusher: dict, already_in_production: bool, serving: Path) -> str | None:
    """Where the Pusher pushed, or for a candidate already in production its version there."""
    pushed = pusher.get("pushed_model")
    path = None
    if pushed is not None and pushed.properties.get("pushed"):
        path = pushed.properties.get("pushed_destination")
    if already_in_production and not path:
        path = _newest_version(serving)
    return path


def trainer_summary(figures: dict, accuracy: float | None, regression: bool) -> dict:
    """One twin in run_summary.json: TFMA's accuracy (None for regression, whose `metrics`
    are the served model's MAE, RMSE and R²) beside the trainer's own figures."""
    d = {k: figures[k] for k in TRAINER_KEYS if k in figures}
    d["accuracy"] = None if regression else accuracy
    d["trainer_accuracy"] = figures["accuracy"]
    if regression:
        d["metrics"] = figures.get("metrics")
    return d


def reference_summary(fp32: dict, amp: dict, shipped: str) -> dict | None:
    """A regression label's reference baseline (components/training/reference.py) beside the
    model: its kind, how it was fitted, its errors on the same eval examples, and the RMSE
    gain of the model that shipped (the AMP twin where none did) over it."""
    reference = fp32.get("reference") or amp.get("reference")
    if not reference or not reference.get("metrics"):
        return None
    model = (fp32 if shipped == "float32" else amp).get("metrics") or {}
    ours, theirs = model.get("rmse"), reference["metrics"]["rmse"]
    return {
        **reference,
        "model": "float32 twin" if shipped == "float32" else "AMP twin",
        "rmse_gain": None if ours is None or not theirs else 1 - ours / theirs,
    }


def mark_tflite_outcomes(tflite: dict, rules: list[dict]) -> None:
    """Each TFLite variant's record gets its gate rule's outcome."""
    by_name = {r["name"]: r for r in rules}
    for name, variant in tflite.get("variants", {}).items():
        rule = by_name.get(f"tflite_{name}")
        if rule:
            variant["passed"], variant["outcome"] = rule["passed"], rule["outcome"]
            variant["shipped"] = rule["passed"] and rule["outcome"] != "not shipped"


def build_summary(
    outputs: dict[str, dict[str, NodeOutput]],
    recipe: Recipe,
    config_dict: dict,
    data_dict: dict,
    output_dir: Path,
) -> dict:
    """Assembles run_summary.json from the run's artifacts, and copies the gate's decision files
    next to it."""
    # Here, not at the top: the readiness rules load Keras, which a run that stops on bad input
    # (failure_summary) never needs.
    from amp_pipeline.components.amp import readiness
    from amp_pipeline.components.amp.diagnosis import why_not_faster
    from amp_pipeline.pipeline.amp_half import GATE, PUSHER, TRAINER_AMP, TRAINER_FP32
    from amp_pipeline.pipeline.results import trainer_figures

    fp32 = trainer_figures(outputs[TRAINER_FP32]["model_run"])
    amp = trainer_figures(outputs[TRAINER_AMP]["model_run"])
    decision_dir = Path(outputs[GATE]["decision"].uri)
    decision = json.loads((decision_dir / names.DECISION_JSON).read_text())
    for name in (names.DECISION_JSON, names.DECISION_MD):
        shutil.copyfile(decision_dir / name, output_dir / name)
    measured = decision["measurements"]
    already = decision.get("already_in_production", False)
    pushed_path = pushed_model_path(
        outputs.get(PUSHER, {}), already, output_dir / "serving" / config_dict["model_name"]
    )
    status = "promoted" if decision["passed"] and pushed_path else "rejected"
    shipped = decision.get("shipped_precision", "amp") if status == "promoted" else "none"
    regression = decision.get("task") == "regression"

    def trainer(figures: dict, accuracy: float) -> dict:
        return trainer_summary(figures, accuracy, regression)

    amp_rules = (decision.get("twins") or {}).get("amp", decision)["rules"]
    parities = [r for r in amp_rules if r["name"] in ("accuracy_parity", "error_parity")]
    parity_rule: dict[str, Any] = parities[0] if parities else {}
    amp_out = trainer(amp, measured["amp_accuracy"])
    amp_out["loss_scale"] = {k: v for k, v in amp.get("loss_scale", {}).items() if k != "history"}
    amp_out["dtype_warnings"] = amp.get("dtype_warnings", [])
    trainers_speedup = _ratio(amp["examples_per_sec"], fp32["examples_per_sec"])
    speed = decision.get("speed") or {}
    record = decision.get("speed_record") or speed_record.build(fp32, amp, speed)
    # The gate's figure: the precision ratio where it was measured, else the recipe ratio.
    speedup = record[record["gate_uses"]]["ratio"]
    # The TFLite variants of the twin that shipped (the AMP twin's where none did).
    twin = "float32" if shipped == "float32" else "amp"
    measured_on_device = (decision.get("tflite") or {}).get(twin)
    edge = measured_on_device or (fp32 if shipped == "float32" else amp).get("tflite", {})
    mark_tflite_outcomes(edge, decision["rules"])
    return {
        "status": status,
        "shipped_precision": shipped,
        "shipped_policy": "float32" if shipped == "float32" else amp.get("policy", recipe.policy),
        "task": decision.get("task", "classification"),
        "exit_code": EXIT_PROMOTED if status == "promoted" else EXIT_REJECTED,
        # What the AMP trainer ran (it may have fallen back from XLA), not what was asked.
        "policy": amp.get("policy", recipe.policy),
        "xla": amp.get("xla", recipe.xla),
        "xla_fallback": amp.get("xla_fallback"),
        "loss_scaling": amp.get("loss_scaling", recipe.loss_scaling),
        "model": amp.get("model"),
        "model_module": amp.get("model_module"),
        "output_fix": amp.get("output_fix"),
        "readiness": readiness.summary(amp.get("readiness")),
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
        # The float32 twin's matmuls: strict, tf32, or not applicable (no TF32 here).
        "fp32_math": (fp32.get("fp32_math") or {}).get("effective", "not recorded"),
        "fp32_math_record": fp32.get("fp32_math"),
        "warnings": list(recipe.warnings),
        "fp32": trainer(fp32, measured["fp32_accuracy"]),
        "amp": amp_out,
        "production": {
            "accuracy": None if regression else measured["production_accuracy"],
            "mae": (decision.get("regression") or {}).get("production_mae"),
        },
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
        "accuracy_delta": None
        if regression
        else measured["amp_accuracy"] - measured["fp32_accuracy"],
        # Regression: AMP's MAE change as a share of float32's (the error_parity estimate).
        "mae_change": parity_rule.get("value") if regression else None,
        "gate": {
            "passed": decision["passed"],
            "shipped_precision": decision.get("shipped_precision", "amp"),
            "why": decision.get("why", ""),
            "headline": twins.headline(decision),
            "require_amp": decision.get("require_amp", False),
            "failed": decision["failed"],
            "rules": decision["rules"],
            "twins": decision.get("twins"),
            # TFMA's Evaluators judge the AMP twin (against float32, against production),
            # whichever twin ships; the gate's own rules judge each twin (`twins`).
            "tfma_twin": "amp",
            "tfma_failures": decision["tfma_failures"],
            # TFMA's reading of a large eval split is a sample (components/gate/evaluator.py).
            "tfma_sample": decision.get("tfma_sample"),
            "decision_md": str(output_dir / names.DECISION_MD),
        },
        "reference": reference_summary(fp32, amp, shipped),
        # Where each twin started (components/training/warm_start.py), and each trainer's
        # phases in seconds (components/training/phases.py).
        "warm_start": {"fp32": fp32.get("warm_start"), "amp": amp.get("warm_start")},
        "trainer_phases_s": {"fp32": fp32.get("phases"), "amp": amp.get("phases")},
        "categories": fp32.get("categories") or {},
        "exports": exports(pushed_path, edge),
        **serving_summary(decision),
        "already_in_production": already,
        "evaluation": evaluation_paths(outputs),
        "data": {**data_summary(data_dict), "tolerated": tolerated_findings(outputs)},
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
        if pushed_path and r.get("path") and r.get("shipped") is not False:
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
    """run_summary.json of a run stopped by SIGINT/SIGTERM (`error`:
    amp_pipeline.pipeline.signals)."""
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


def _serving(report: dict | None) -> dict:
    """The infra validation's verdict and latencies, without its configuration echo."""
    keys = ("passed", "reasons", "examples", "signatures", "latency", "skipped")
    return {k: report[k] for k in keys if k in report} if report else {}


def serving_summary(decision: dict) -> dict:
    """`serving`: the infra validation of the twin that shipped (of the AMP twin when neither
    did), named in its `twin`; `serving_by_twin`: each twin's, under its name (the float32
    twin is served only when it may ship)."""
    by_twin = {
        twins.AMP: _serving(decision.get("serving")),
        twins.FLOAT32: _serving(decision.get("fp32_serving")),
    }
    twin = twins.FLOAT32 if decision.get("shipped_precision") == twins.FLOAT32 else twins.AMP
    return {"serving": {"twin": twin, **by_twin[twin]}, "serving_by_twin": by_twin}

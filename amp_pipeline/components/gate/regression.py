"""The promotion gate's rules for a regression label: absolute errors, paired per example.

- `error_parity`: the AMP model's mean absolute error (MAE) may be at most `error_tolerance` (a
  share of float32's MAE, 2% by default) above its float32 twin's, on the per-example paired
  errors of every seed (components/gate/error_stats.py::error_parity);
- `beats_mean`: the AMP model's MAE must be below that of always answering the label's mean
  over the train split (Transform's, as the trainers read it back): a model no better than
  that is useless however close to its twin it is;
- `production_regression`: at most `error_tolerance` above the production model's MAE;
- `min_speedup`, `serving_infra` and the tokenizer rule as for classes (components/gate/rules.py);
- one rule per TFLite variant: its MAE at most a share of the SavedModel's above it, the shares
  being the classification thresholds read for errors (float32/float16: 1 - min_agreement,
  0.5%; int8: max_int8_accuracy_drop, 1%).
"""

from __future__ import annotations

import math

from amp_pipeline.components.gate import error_stats
from amp_pipeline.components.gate.device_rules import unmeasured_rule, variant_rule
from amp_pipeline.components.gate.rules import (
    GateConfig,
    Measurements,
    Rule,
    decision_of,
    from_evidence,
    min_speedup,
)


def error_parity(pairs: error_stats.ErrorPairs, cfg: GateConfig) -> Rule:
    evidence = error_stats.error_parity(pairs, cfg.error_tolerance, cfg.strict, "AMP")
    return from_evidence("error_parity", evidence, cfg.error_tolerance)


def beats_mean(pairs: error_stats.ErrorPairs | None, mean: float, candidate: str = "AMP") -> Rule:
    """The point estimate decides (the candidate's MAE strictly below the baseline's); the
    interval is reported."""
    if pairs is None or pairs.n == 0:
        return Rule("beats_mean", None, 0.0, False, "no eval predictions to compare")
    lo, hi = error_stats.error_interval(pairs)
    scale = pairs.reference_mae if pairs.reference_mae > 0 else math.nan
    passed = math.isfinite(pairs.diff_mean) and pairs.diff_mean < 0
    return Rule(
        "beats_mean",
        pairs.relative,
        0.0,
        passed,
        f"{candidate} mean absolute error {pairs.candidate_mae:.4g} vs "
        f"{pairs.reference_mae:.4g} for always predicting the mean ({mean:.4g}): "
        f"{pairs.relative:+.2%}; a model must do better than that",
        interval=(lo / scale, hi / scale),
        n=pairs.n,
        seeds=pairs.seeds,
        test=pairs.test,
    )


def beats_reference(
    pairs: error_stats.ErrorPairs | None, cfg: GateConfig, candidate: str = "AMP"
) -> tuple[Rule, ...]:
    """With `--min-gain-over-baseline G`: the candidate's MAE at least G below the reference
    baseline's (the point estimate decides, as beats_mean; the interval is reported). Without
    it, no rule: the baseline is a figure in the report."""
    gain = cfg.min_gain_over_baseline
    if gain is None:
        return ()
    if pairs is None or pairs.n == 0:
        return (Rule("beats_reference", None, -gain, False, "no reference baseline to compare"),)
    lo, hi = error_stats.error_interval(pairs)
    scale = pairs.reference_mae if pairs.reference_mae > 0 else math.nan
    passed = math.isfinite(pairs.relative) and pairs.relative <= -gain
    return (
        Rule(
            "beats_reference",
            pairs.relative,
            -gain,
            passed,
            f"{candidate} mean absolute error {pairs.candidate_mae:.4g} vs "
            f"{pairs.reference_mae:.4g} for the reference baseline: {pairs.relative:+.2%}; "
            "--min-gain-over-baseline asks "
            f"for at least {gain:.2%} lower",
            interval=(lo / scale, hi / scale),
            n=pairs.n,
            seeds=pairs.seeds,
            test=pairs.test,
        ),
    )


def production_regression(
    pairs: error_stats.ErrorPairs | None, cfg: GateConfig, candidate: str = "AMP"
) -> Rule:
    if pairs is None:
        return Rule(
            "production_regression",
            None,
            cfg.error_tolerance,
            True,
            "no model in production yet (first push): nothing to regress against",
            skipped=True,
        )
    evidence = error_stats.error_parity(
        pairs, cfg.error_tolerance, cfg.strict, f"{candidate} vs production"
    )
    return from_evidence("production_regression", evidence, cfg.error_tolerance)


def tflite_rules(report: dict, strict: bool = False) -> tuple[Rule, ...]:
    """One rule per TFLite variant: its absolute errors paired with the SavedModel's, on raw
    eval rows through LiteRT (an int8 variant that misses its tolerance is not shipped)."""
    thresholds = report.get("thresholds", {})
    rules = []
    for variant, r in report.get("variants", {}).items():
        int8 = variant in ("int8", "dynamic_int8")
        tolerance = (
            thresholds.get("max_int8_accuracy_drop", 0.01)
            if int8
            else 1.0 - thresholds.get("min_agreement", 0.995)
        )
        name = f"tflite_{variant}"
        missing = unmeasured_rule(name, r, tolerance)
        if missing is not None:
            rules.append(variant_rule(name, variant, r, missing))
            continue
        pairs = error_stats.ErrorPairs(
            n=r["n"],
            seeds=1,
            reference_mae=r["reference_mae"],
            diff_mean=r["error_diff_mean"],
            diff_sd=r["error_diff_sd"],
        )
        evidence = error_stats.error_parity(pairs, tolerance, strict, f"{variant} TFLite")
        evidence["reason"] += (
            f"; predictions differ from the SavedModel's by at most {r['max_abs_diff']:.4g} "
            f"({r['max_rel_diff']:.2%}); within 1% of the label's std on "
            f"{r.get('within_1pct_std', float('nan')):.2%} of the rows"
        )
        rules.append(variant_rule(name, variant, r, from_evidence(name, evidence, tolerance)))
    return tuple(rules)


def decide(
    parity: error_stats.ErrorPairs,
    baseline: error_stats.ErrorPairs | None,
    label_mean: float,
    production: error_stats.ErrorPairs | None,
    speed: Measurements,
    cfg: GateConfig,
    extra: tuple[Rule, ...] = (),
    reference: error_stats.ErrorPairs | None = None,
) -> dict:
    """Every rule's outcome and the decision: promoted only if every rule passed. `speed` is
    read by min_speedup only (throughputs, policy, side-by-side result)."""
    return decision_of(
        [
            error_parity(parity, cfg),
            beats_mean(baseline, label_mean),
            *beats_reference(reference, cfg),
            production_regression(production, cfg),
            min_speedup(speed, cfg),
            *extra,
        ]
    )


def decide_float32(
    baseline: error_stats.ErrorPairs | None,
    label_mean: float,
    production: error_stats.ErrorPairs | None,
    cfg: GateConfig,
    extra: tuple[Rule, ...] = (),
    reference: error_stats.ErrorPairs | None = None,
) -> dict:
    """The float32 twin's own decision on the rules that do not compare the twins: it beats
    the mean, it is no worse than production, and its `extra` (serving, tokenizer, TFLite)."""
    name = "float32 twin"
    return decision_of(
        [
            beats_mean(baseline, label_mean, name),
            *beats_reference(reference, cfg, name),
            production_regression(production, cfg, name),
            *extra,
        ]
    )

"""The promotion gate's rules as pure functions: measured values in, one decision with reasons out.

Boundaries are inclusive: a value exactly at its threshold passes.
"""

from __future__ import annotations

import dataclasses
import math

from amp_pipeline.components.gate import stats as gate_stats

# Regression: the AMP model's mean absolute error may be at most 2% above float32's (and a new
# model's at most 2% above production's). The one place this default is written.


# Regression: the AMP model's mean absolute error may be at most 2% above float32's (and a new
# model's at most 2% above production's). The one place this default is written.
ERROR_TOLERANCE = 0.02


# The rare class (components/gate/class_metrics.py): the largest drop of a class's recall (and of
# the macro-averaged recall), and of ROC and PR AUC, that still promotes.
RECALL_TOLERANCE = 0.05


AUC_TOLERANCE = 0.01


@dataclasses.dataclass(frozen=True)
class GateConfig:
    """Thresholds of the promotion gate.

    Attributes:
        accuracy_tolerance: largest accuracy drop allowed, vs float32 and vs production.
        min_accuracy: smallest absolute accuracy of the AMP model.
        min_speedup: smallest AMP/float32 examples-per-second ratio (1.0: not slower).
        error_tolerance: regression: largest rise of the mean absolute error allowed, as a share
            of the reference's (float32's, production's), vs float32 and vs production.
        recall_tolerance: largest drop of a rare class's recall (and of the macro-averaged
            recall), AMP vs float32 (`--recall-tolerance`).
        auc_tolerance: largest drop of ROC AUC and PR AUC for a binary label (`--auc-tolerance`).
        class_metrics: `rare` (recall rules for classes under 10% of the eval examples) or
            `all` (for every class).
        min_gain_over_baseline: regression: when set, the shipped twin's MAE must be at least
            this share below the reference baseline's (components/training/reference.py;
            `--min-gain-over-baseline`); None: the baseline is a figure, not a rule.
        strict: `--parity strict`: a rule whose estimate is within its threshold but whose
            interval is not (unproven) rejects; by default it promotes with that headline. An
            estimate beyond a threshold rejects either way.
    """

    accuracy_tolerance: float = 0.005
    min_accuracy: float = 0.0
    min_speedup: float = 1.0
    strict: bool = False
    error_tolerance: float = ERROR_TOLERANCE
    recall_tolerance: float = RECALL_TOLERANCE
    auc_tolerance: float = AUC_TOLERANCE
    class_metrics: str = "rare"
    min_gain_over_baseline: float | None = None

    def __post_init__(self) -> None:
        if self.class_metrics not in ("rare", "all"):
            raise ValueError(
                "Invalid value for argument class_metrics: expected one of rare, all. "
                f"Received: class_metrics={self.class_metrics!r}"
            )
        for name in ("accuracy_tolerance", "min_accuracy", "recall_tolerance", "auc_tolerance"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(
                    f"Invalid value for argument {name}: must be in [0, 1]. "
                    f"Received: {name}={value!r}"
                )
        if self.min_gain_over_baseline is not None and not 0.0 <= self.min_gain_over_baseline < 1:
            raise ValueError(
                "Invalid value for argument min_gain_over_baseline: must be in [0, 1). "
                f"Received: min_gain_over_baseline={self.min_gain_over_baseline!r}"
            )
        if not self.error_tolerance >= 0.0:
            raise ValueError(
                "Invalid value for argument error_tolerance: must be >= 0. "
                f"Received: error_tolerance={self.error_tolerance!r}"
            )
        if not self.min_speedup >= 0.0:
            raise ValueError(
                "Invalid value for argument min_speedup: must be >= 0. "
                f"Received: min_speedup={self.min_speedup!r}"
            )


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule's outcome. `skipped` rules pass and say why they did not apply."""

    name: str
    value: float | None
    threshold: float
    passed: bool
    detail: str
    skipped: bool = False
    interval: tuple[float, float] | None = None
    n: int | None = None  # distinct examples (evidence rules)
    seeds: int | None = None  # seeds each example was scored under (accuracy parity)
    discordant: dict | None = None  # paired rules: outcomes only one of the two models got right
    test: str = "point estimate"
    outcome: str = ""  # pass, fail, unproven or skipped; derived when empty

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["interval"] = list(self.interval) if self.interval is not None else None
        if not d["outcome"]:
            d["outcome"] = "skipped" if self.skipped else ("pass" if self.passed else "fail")
        return d


def from_evidence(name: str, evidence: dict, threshold: float) -> Rule:
    """A rule whose outcome components/gate/stats.py decided (pass, fail or unproven: only
    fail rejects; `--parity strict` has already turned unproven into fail)."""
    return Rule(
        name,
        evidence["estimate"],
        threshold,
        evidence["outcome"] != "fail",
        evidence["reason"],
        interval=tuple(evidence["interval"]),
        n=evidence["n"],
        seeds=evidence.get("seeds"),
        discordant=evidence.get("discordant"),
        test=evidence["test"],
        outcome=evidence["outcome"],
    )


@dataclasses.dataclass(frozen=True)
class Measurements:
    """What the gate decides on.

    Attributes:
        fp32_accuracy: float32 baseline accuracy on the eval split (the shipped seed's
            predictions on every eval example).
        amp_accuracy: AMP candidate accuracy on the eval split (likewise).
        production_accuracy: accuracy of the model in production on the same split, or None
            when nothing has been pushed yet.
        fp32_examples_per_sec: float32 trainer throughput.
        amp_examples_per_sec: AMP trainer throughput.
        amp_policy: the AMP trainer's dtype policy (float32 where the hardware has no faster
            precision).
        majority_share: the share of the most common class in the data: the accuracy of a
            "model" that always predicts it. None: unknown (the rule is skipped).
        majority_class: that class.
        parity: the paired evidence of AMP vs float32 (None: decide on the point estimates).
        production_pairs: the paired evidence of AMP vs production.
        speed: the side-by-side speed measurement (None: the trainers' own throughputs).
        production_classes: how the candidate's classes differ from production's (added,
            dropped) and how many eval examples were compared (evidence.production_pairs).
        candidate: who `amp_accuracy` and `production_pairs` belong to, as the reasons name
            it: "AMP", or "float32 twin" where the float32 twin is judged on the rules that do
            not compare the twins (components/gate/twins.py).
    """

    fp32_accuracy: float | None  # None for a regression label (its rules read errors)
    amp_accuracy: float | None
    production_accuracy: float | None
    fp32_examples_per_sec: float
    amp_examples_per_sec: float
    amp_policy: str
    majority_share: float | None = None
    majority_class: str = ""
    parity: gate_stats.Paired | None = None  # AMP vs float32 on the eval split (seeds pooled)
    production_pairs: gate_stats.Paired | None = None  # AMP vs production, same examples
    speed: dict | None = None  # components/speed/measurement.py's result
    candidate: str = "AMP"
    production_classes: dict | None = None  # evidence.production_pairs' class change record


EPSILON = 1e-9  # accuracies are ratios of counts: 0.94 - 0.95 must equal -0.01 here


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _at_least(value: float | None, threshold: float) -> bool:
    """value >= threshold, inclusive, forgiving float rounding; NaN and None never pass."""
    return value is not None and _finite(value) and value >= threshold - EPSILON


def _accuracy(value: float | None) -> float:
    """A classification label's accuracy: the trainers measure it (a regression label has none,
    and its rules read errors instead)."""
    if value is None:
        raise ValueError("an accuracy rule ran on measurements without accuracies (regression)")
    return value


def accuracy_parity(m: Measurements, cfg: GateConfig) -> Rule:
    if m.parity is not None:
        evidence = gate_stats.parity(m.parity, cfg.accuracy_tolerance, cfg.strict, "AMP")
        return from_evidence("accuracy_parity", evidence, -cfg.accuracy_tolerance)
    delta = _accuracy(m.amp_accuracy) - _accuracy(m.fp32_accuracy)
    passed = _at_least(delta, -cfg.accuracy_tolerance)
    return Rule(
        "accuracy_parity",
        delta,
        -cfg.accuracy_tolerance,
        passed,
        f"AMP accuracy {m.amp_accuracy:.4f} vs float32 {m.fp32_accuracy:.4f}: "
        f"change {delta:+.4f}, allowed down to {-cfg.accuracy_tolerance:+.4f}",
    )


def min_accuracy(m: Measurements, cfg: GateConfig) -> Rule:
    passed = _at_least(m.amp_accuracy, cfg.min_accuracy)
    return Rule(
        "min_accuracy",
        m.amp_accuracy,
        cfg.min_accuracy,
        passed,
        f"{m.candidate} accuracy {m.amp_accuracy:.4f}, at least {cfg.min_accuracy:.4f} required",
    )


def class_change_text(classes: dict | None) -> str:
    """'classes changed since production: added 'x'; dropped 'y'; compared on the N eval
    examples of the classes both models know (k left out): ' or '' when none changed."""
    if not classes or not (classes.get("added") or classes.get("dropped")):
        return ""
    parts = [
        f"{kind} {', '.join(repr(c) for c in classes[kind])}"
        for kind in ("added", "dropped")
        if classes.get(kind)
    ]
    return (
        f"classes changed since production: {'; '.join(parts)}; compared by class name on the "
        f"{classes.get('compared', 0):,} eval examples of the classes both models know "
        f"({classes.get('left_out', 0):,} left out): "
    )


def production_regression(m: Measurements, cfg: GateConfig) -> Rule:
    if m.production_accuracy is None:
        return Rule(
            "production_regression",
            None,
            -cfg.accuracy_tolerance,
            True,
            "no model in production yet (first push): nothing to regress against",
            skipped=True,
        )
    if m.production_pairs is not None:
        change = class_change_text(m.production_classes)
        if m.production_pairs.n == 0:
            return Rule(
                "production_regression",
                None,
                -cfg.accuracy_tolerance,
                True,
                f"{change}no eval example of a class both models know: nothing to compare",
                skipped=True,
            )
        evidence = gate_stats.parity(
            m.production_pairs, cfg.accuracy_tolerance, cfg.strict, f"{m.candidate} vs production"
        )
        evidence["reason"] = change + evidence["reason"]
        return from_evidence("production_regression", evidence, -cfg.accuracy_tolerance)
    delta = _accuracy(m.amp_accuracy) - _accuracy(m.production_accuracy)
    return Rule(
        "production_regression",
        delta,
        -cfg.accuracy_tolerance,
        _at_least(delta, -cfg.accuracy_tolerance),
        f"{m.candidate} accuracy {m.amp_accuracy:.4f} vs production {m.production_accuracy:.4f}: "
        f"change {delta:+.4f}, allowed down to {-cfg.accuracy_tolerance:+.4f}",
    )


def min_speedup(m: Measurements, cfg: GateConfig) -> Rule:
    if m.amp_policy == "float32":
        why = (m.speed or {}).get("skipped") or (
            "the AMP trainer ran float32: both trainers are the same program"
        )
        return Rule(
            "min_speedup",
            None,
            cfg.min_speedup,
            True,
            f"{why}; no precision ratio to judge",
            skipped=True,
        )
    if m.speed and m.speed.get("ratio", {}).get("median") is not None:
        return side_by_side_speedup(m.speed, cfg)
    ok = _finite(m.amp_examples_per_sec) and _finite(m.fp32_examples_per_sec)
    speedup = m.amp_examples_per_sec / m.fp32_examples_per_sec if ok else float("nan")
    passed = _at_least(speedup, cfg.min_speedup)
    return Rule(
        "min_speedup",
        speedup,
        cfg.min_speedup,
        passed,
        f"recipe ratio (the trainers as they ran; not measured side by side): AMP "
        f"{m.amp_examples_per_sec:,.0f} vs float32 {m.fp32_examples_per_sec:,.0f} "
        f"examples/sec: {speedup:.2f}x, "
        + ("at least" if passed else "below")
        + f" {cfg.min_speedup:.2f}x",
        test="recipe ratio: the trainers' own throughputs",
    )


def beats_majority(m: Measurements, cfg: GateConfig) -> Rule:
    """A model no better than always answering the most common class is useless, however close
    to its float32 twin it is (0.0 vs 0.0 passes parity)."""
    if m.majority_share is None:
        return Rule(
            "beats_majority",
            None,
            0.0,
            True,
            "class shares unknown: no majority-class baseline to beat",
            skipped=True,
        )
    passed = (
        m.amp_accuracy is not None
        and _finite(m.amp_accuracy)
        and m.amp_accuracy > m.majority_share + EPSILON
    )
    return Rule(
        "beats_majority",
        m.amp_accuracy,
        m.majority_share,
        passed,
        f"{m.candidate} accuracy {m.amp_accuracy:.4f} vs {m.majority_share:.4f} for always "
        "predicting the "
        f"most common class ({m.majority_class!r}): a model must do better than that",
    )


def recipe_label(figures: dict) -> str:
    """'batch 64, xla off, threads default': what a speed figure was measured at."""
    threads = figures.get("threads") or figures.get("intra_op_threads") or 0
    xla = "on" if figures.get("xla") else "off"
    return f"batch {figures.get('batch_size', '?')}, xla {xla}, threads {threads or 'default'}"


def side_by_side_speedup(speed: dict, cfg: GateConfig) -> Rule:
    """min_speedup on the precision ratio (both twins at the AMP trainer's batch, XLA setting
    and threads, in alternating rounds): the median decides, as a point estimate must; the
    quartiles are shown, never used to pass a median below the minimum."""
    ratio = speed["ratio"]
    median, lo, hi = ratio["median"], ratio["min"], ratio["max"]
    rounds = f"{ratio['n']} side-by-side rounds of {speed['steps_per_burst']} steps"
    at = recipe_label(speed)
    spread = f"median {median:.2f}x, rounds {lo:.2f}x to {hi:.2f}x"
    passed = _at_least(median, cfg.min_speedup)
    detail = (
        f"precision ratio ({speed.get('policy', 'AMP')} vs float32, both at {at}): {spread} "
        f"over {rounds}: " + ("at least" if passed else "below") + f" {cfg.min_speedup:.2f}x"
    )
    return Rule(
        "min_speedup",
        median,
        cfg.min_speedup,
        passed,
        detail,
        interval=(ratio["q1"], ratio["q3"]),
        n=ratio["n"],
        test="precision ratio: median of alternating rounds (interval: quartiles)",
        outcome="pass" if passed else "fail",
    )


RULES = (accuracy_parity, min_accuracy, beats_majority, production_regression, min_speedup)


# The float32 twin is the reference the twin rules compare against: it is judged on the rest.
FLOAT32_RULES = (min_accuracy, beats_majority, production_regression)


def serving_rule(report: dict) -> Rule:
    """The InfraValidator's verdict: served answers equal in-process ones, latency in budget.

    `report` is amp_pipeline.serving.validation.validate's result.
    """
    if report.get("skipped"):
        return Rule("serving_infra", None, 0.0, True, report["skipped"], skipped=True)
    budget = report.get("config", {}).get("latency_budget_ms", float("nan"))
    latency = report.get("latency", {})
    p99 = max((latency[p]["p99_ms"] for p in ("grpc", "rest") if p in latency), default=None)
    if report.get("passed"):
        detail = (
            f"local server on loopback: gRPC and REST answers equal in process on "
            f"{report.get('examples', 0)} eval examples; p99 {p99:.1f} ms "
            f"(budget {budget:g} ms)"
        )
    else:
        detail = "; ".join(report.get("reasons") or ["no report"])
    return Rule("serving_infra", p99, budget, bool(report.get("passed")), detail)


def decide(m: Measurements, cfg: GateConfig, extra: tuple[Rule, ...] = ()) -> dict:
    """Every rule's outcome and the decision: promoted only if every rule passed."""
    return decision_of([rule(m, cfg) for rule in RULES] + list(extra))


def decide_float32(m: Measurements, cfg: GateConfig, extra: tuple[Rule, ...] = ()) -> dict:
    """The float32 twin's own decision: `m` holds its accuracy (as `amp_accuracy`, with
    `candidate` naming it) and its pairs against production; `extra` its serving, tokenizer
    and TFLite rules."""
    return decision_of([rule(m, cfg) for rule in FLOAT32_RULES] + list(extra))


def decision_of(rules: list[Rule]) -> dict:
    """Promoted only if every rule passed; the failed rules, and every rule's record."""
    passed = all(r.passed for r in rules)
    return {
        "passed": passed,
        "decision": "promoted" if passed else "rejected",
        "failed": [r.name for r in rules if not r.passed],
        "rules": [r.to_dict() for r in rules],
    }


HOW_IT_DECIDES = (
    "How it decides: an estimate beyond its threshold rejects (as TFMA's change threshold "
    "would); an estimate within it whose 95% interval also clears it passes; an estimate within "
    "it whose interval does not is *not proven*: promoted by default with that headline, "
    "rejected with `--parity strict`. The speed rule compares the median ratio with "
    "`--min-speedup`."
)

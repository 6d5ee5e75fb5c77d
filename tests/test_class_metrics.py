"""The rare class's rules (components/gate/class_metrics.py): what accuracy does not see."""

import numpy as np
import pytest

from amp_pipeline.components.gate import class_metrics
from amp_pipeline.components.gate import rules as gate_rules
from amp_pipeline.components.gate.stats import Paired

N, RARE = 2000, 66  # 3.3% defaults, as in ISLR's Default


def default_like(amp_rare_right: int, rng) -> class_metrics.ClassEvidence:
    """float32 finds 60 of the 66 defaulters and misses 40 of the others; AMP finds
    `amp_rare_right` and misses as many others as keep its accuracy equal to float32's."""
    labels = np.zeros(N, np.int64)
    labels[:RARE] = 1
    fp32 = labels.copy()
    fp32[60:RARE] = 0  # 6 defaulters missed
    fp32[RARE : RARE + 40] = 1  # 40 false alarms
    amp = labels.copy()
    amp[amp_rare_right:RARE] = 0
    lost = 60 - amp_rare_right
    amp[RARE : RARE + 40 - lost] = 1  # fewer false alarms: the same accuracy

    def scores(pred):
        return np.clip(pred * 0.6 + rng.normal(0.2, 0.15, N), 0, 1).astype(np.float32)

    return class_metrics.ClassEvidence(
        labels=labels,
        amp=amp[None],
        fp32=fp32[None],
        classes=("No", "Yes"),
        amp_scores=scores(amp)[None],
        fp32_scores=scores(fp32)[None],
    )


def decide(e: class_metrics.ClassEvidence) -> dict:
    cfg = gate_rules.GateConfig()
    m = gate_rules.Measurements(
        fp32_accuracy=float(np.mean(e.fp32[0] == e.labels)),
        amp_accuracy=float(np.mean(e.amp[0] == e.labels)),
        production_accuracy=None,
        fp32_examples_per_sec=1.0,
        amp_examples_per_sec=1.0,
        amp_policy="float32",
        majority_share=1 - RARE / N,
        parity=Paired.from_correct(e.amp[0] == e.labels, e.fp32[0] == e.labels),
    )
    rare = class_metrics.class_rules(e, cfg.recall_tolerance, cfg.auc_tolerance, cfg.strict)
    return gate_rules.decide(m, cfg, extra=tuple(rare))


def test_same_accuracy_but_half_the_rare_recall_is_rejected_at_the_defaults():
    e = default_like(amp_rare_right=30, rng=np.random.default_rng(0))
    assert np.mean(e.amp[0] == e.labels) == np.mean(e.fp32[0] == e.labels)
    decision = decide(e)
    rules = {r["name"]: r for r in decision["rules"]}
    assert rules["accuracy_parity"]["outcome"] != "fail"  # accuracy sees nothing
    recall = rules["recall[Yes]"]
    assert recall["outcome"] == "fail" and "recall[Yes]" in decision["failed"]
    assert recall["value"] == pytest.approx(-30 / 66)
    assert recall["n"] == RARE and recall["interval"][1] < 0
    assert "class 'Yes', 66 of 2,000 eval examples (3.3%)" in recall["detail"]
    # The scores rank the missed defaulters low: the AUCs fall too, with paired intervals.
    for name in ("roc_auc", "pr_auc"):
        assert rules[name]["value"] < -0.01 and rules[name]["outcome"] == "fail", rules[name]
        lo, hi = rules[name]["interval"]
        assert lo <= rules[name]["value"] <= hi


def test_the_same_rare_recall_passes_or_is_unproven_never_fails():
    e = default_like(amp_rare_right=60, rng=np.random.default_rng(1))
    decision = decide(e)
    rules = {r["name"]: r for r in decision["rules"]}
    assert rules["recall[Yes]"]["outcome"] in ("pass", "unproven")
    assert "recall[No]" not in rules  # 96.7% of the examples: not a rare class


def test_every_class_with_class_metrics_all_and_macro_recall_for_many_classes():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 4, 800)
    predicted = np.where(rng.random(800) < 0.9, labels, (labels + 1) % 4)
    e = class_metrics.ClassEvidence(
        labels=labels, amp=predicted[None], fp32=predicted[None], classes=("a", "b", "c", "d")
    )
    rules = class_metrics.class_rules(e, 0.05, 0.01, False, which="all")
    names = [r.name for r in rules]
    assert names == ["recall[a]", "recall[b]", "recall[c]", "recall[d]", "macro_recall"]
    macro = rules[-1]
    assert macro.value == pytest.approx(0.0) and macro.outcome in ("pass", "unproven")


def test_pr_auc_is_read_for_the_rare_class_when_it_is_class_0():
    """A string label whose rare class sorts first ('churned', 5%, id 0): AMP scrambles its
    scores. Class 1's PR AUC barely moves (0.995+ either way); the rare class's collapses,
    and that is what the rule reads and names."""
    rng = np.random.default_rng(3)
    n, rare = 2000, 100
    labels = np.ones(n, np.int64)
    labels[:rare] = 0
    p1_fp32 = np.where(labels == 1, rng.uniform(0.45, 1, n), rng.uniform(0, 0.5, n))
    p1_amp = p1_fp32.copy()
    p1_amp[:rare] = rng.uniform(0.3, 0.7, rare)  # the rare class no longer separates
    e = class_metrics.ClassEvidence(
        labels=labels,
        amp=(p1_amp > 0.5).astype(np.int64)[None],
        fp32=(p1_fp32 > 0.5).astype(np.int64)[None],
        classes=("churned", "stayed"),
        amp_scores=p1_amp[None].astype(np.float32),
        fp32_scores=p1_fp32[None].astype(np.float32),
    )
    (pr,) = [r for r in class_metrics.class_rules(e, 0.05, 0.01, False) if r.name == "pr_auc"]
    assert "positive class 'churned', the rarer" in pr.detail
    assert pr.value < -0.2 and pr.outcome == "fail"
    class_1 = class_metrics._weighted_average_precision
    ones = np.ones((1, n))
    moved = class_1(p1_fp32, labels == 1, ones)[0] - class_1(p1_amp, labels == 1, ones)[0]
    assert abs(moved) < 0.01  # inside the tolerance: class 1's area would have passed


def _three_classes(n: int, rng, seeds: int = 1) -> class_metrics.ClassEvidence:
    """Three classes (50/30/20%); each twin right with a class's own probability, the twins'
    rights correlated (AMP copies float32's answer 70% of the time)."""
    labels = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    fp32_right = rng.random((seeds, n)) < np.array([0.8, 0.7, 0.6])[labels]
    amp_right = np.where(
        rng.random((seeds, n)) < 0.7,
        fp32_right,
        rng.random((seeds, n)) < np.array([0.78, 0.7, 0.5])[labels],
    )
    wrong = (labels + 1) % 3
    return class_metrics.ClassEvidence(
        labels=labels,
        amp=np.where(amp_right, labels, wrong),
        fp32=np.where(fp32_right, labels, wrong),
        classes=("a", "b", "c"),
    )


def test_the_bootstrap_over_distinct_examples_is_the_bootstrap_over_examples():
    """macro_recall resamples the distinct (label, answers) rows with their counts: the same
    estimate as over every example, and the interval of the same distribution (within the
    resampling noise of 1,000 draws)."""
    e = _three_classes(20_000, np.random.default_rng(3), seeds=2)
    (fast,) = class_metrics.class_rules(e, 0.05, 0.01, False)
    k = len(e.classes)
    slow = class_metrics._bootstrap_rule(
        "macro_recall", "macro-averaged recall",
        lambda predicted, weights: class_metrics._macro_recall(e.labels, predicted, k, weights),
        e, e.amp, e.fp32, 0.05, False,
    )  # fmt: skip
    assert fast.value == pytest.approx(slow.value, abs=1e-12)
    width = slow.interval[1] - slow.interval[0]
    assert abs(fast.interval[0] - slow.interval[0]) < 0.1 * width
    assert abs(fast.interval[1] - slow.interval[1]) < 0.1 * width
    labels, amp, _, counts = class_metrics.distinct_examples(e.labels, e.amp, e.fp32)
    assert counts.sum() == e.labels.size and len(counts) <= 3 * 4 * 4  # 3 classes x 2 seeds


def test_the_macro_recall_interval_covers_the_true_difference_95_times_in_100():
    """The true difference of the simulation: mean over classes of AMP's minus float32's
    probability of being right (0.7*p + 0.3*q - p)."""
    p, q = np.array([0.8, 0.7, 0.6]), np.array([0.78, 0.7, 0.5])
    truth = float(np.mean(0.7 * p + 0.3 * q - p))
    rng = np.random.default_rng(11)
    covered = 0
    runs = 200
    for _ in range(runs):
        (rule,) = class_metrics.class_rules(_three_classes(600, rng), 0.05, 0.01, False)
        covered += rule.interval[0] <= truth <= rule.interval[1]
    # 95% nominal; 200 runs put the share within about 0.03 of it.
    assert covered / runs >= 0.90, covered / runs

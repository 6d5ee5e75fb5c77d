"""The rare class's rules: what accuracy does not see on an imbalanced label.

Where 97% of the examples are one class, always answering it scores 97%, and a model may lose
half its recall on the rare class while its accuracy moves by a fraction of a point. So, AMP
against its float32 twin, on the same eval examples (seeds pooled per example):

- `recall[<class>]`: the recall of each rare class (under `RARE_SHARE` of the eval examples
  and under half of an even share, 1 / (2 x classes); every class with `--class-metrics all`),
  paired on that class's examples exactly as
  `accuracy_parity` pairs all of them (components/gate/stats.py::parity);
- `roc_auc` and `pr_auc` for a binary label, read for its rarer class (the one the recall rules
  name; class 1 on a tie): the difference of the twins' areas (each the mean over seeds), its
  95% interval a paired bootstrap over examples (an example's seeds and both
  twins' scores together);
- `macro_recall` for more than two classes: the mean of the per-class recalls, likewise.

Each uses the never-laxer logic of every rule: an estimate beyond its tolerance fails, one
whose interval clears it passes, the rest is unproven (`--parity strict` rejects it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from amp_pipeline.components.gate import stats as gate_stats
from amp_pipeline.components.gate.rules import Rule, from_evidence

RARE_SHARE = 0.10
RESAMPLES = 1000
CLASS_METRICS = ("rare", "all")
BOOTSTRAP_TEST = (
    "paired bootstrap over examples (1000 resamples; an example's seeds and both twins' "
    "scores together)"
)


@dataclasses.dataclass(frozen=True)
class ClassEvidence:
    """Both twins' answers on the same eval examples.

    Attributes:
        labels: (n,) class ids.
        amp, fp32: (seeds, n) predicted class ids.
        amp_scores, fp32_scores: (seeds, n) the positive class's probability (binary labels),
            or None.
        classes: the class names, by id.
    """

    labels: np.ndarray
    amp: np.ndarray
    fp32: np.ndarray
    classes: tuple[str, ...]
    amp_scores: np.ndarray | None = None
    fp32_scores: np.ndarray | None = None


def recall_rules(
    e: ClassEvidence, tolerance: float, strict: bool, which: str = "rare"
) -> list[Rule]:
    """One paired recall rule per rare class (or per class, `which="all"`)."""
    rules = []
    n = e.labels.size
    for cls, name in enumerate(e.classes):
        mine = e.labels == cls
        count = int(mine.sum())
        # Rare: under 10% of the examples and under half an even share (with 10 balanced
        # classes each holds about 10%, and none is rare; macro_recall watches them all).
        rare = count < RARE_SHARE * n and count < 0.5 * n / len(e.classes)
        if count == 0 or (which == "rare" and not rare):
            continue
        pairs = gate_stats.Paired.from_correct(e.amp[:, mine] == cls, e.fp32[:, mine] == cls)
        evidence = gate_stats.parity(pairs, tolerance, strict, f"AMP's recall of {name!r}")
        evidence["reason"] = (
            f"class {name!r}, {count:,} of {n:,} eval examples ({count / n:.1%}): "
            + evidence["reason"]
            .replace("changes accuracy", "changes")
            .replace("% accuracy (", "% (")
            .replace("eval examples needed", f"examples of {name!r} needed")
        )
        rules.append(from_evidence(f"recall[{name}]", evidence, -tolerance))
    return rules


def _weighted_roc_auc(scores: np.ndarray, positive: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ROC AUC of `scores` (n,) for each row of example weights (B, n): the weighted
    Mann-Whitney statistic (ties count half)."""
    order = np.argsort(scores, kind="stable")
    s, pos, w = scores[order], positive[order], weights[:, order]
    w_pos, w_neg = w * pos, w * ~pos
    # Per distinct score: negatives strictly below, and tied negatives (half).
    _, first, counts = np.unique(s, return_index=True, return_counts=True)
    group = np.repeat(np.arange(first.size), counts)
    neg_by_group = np.add.reduceat(w_neg, first, axis=1)
    below = np.cumsum(neg_by_group, axis=1) - neg_by_group
    credit = below[:, group] + 0.5 * neg_by_group[:, group]
    total = w_pos.sum(axis=1) * w_neg.sum(axis=1)
    return (w_pos * credit).sum(axis=1) / np.where(total > 0, total, np.nan)


def _weighted_average_precision(
    scores: np.ndarray, positive: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """Average precision (scikit-learn's step-wise area under the precision-recall curve, one
    threshold per distinct score) for each row of example weights (B, n)."""
    order = np.argsort(-scores, kind="stable")
    s, pos, w = scores[order], positive[order], weights[:, order]
    _, first = np.unique(-s, return_index=True)
    last = np.append(first[1:], s.size) - 1  # each threshold's last example
    tp = np.cumsum(w * pos, axis=1)[:, last]
    seen = np.cumsum(w, axis=1)[:, last]
    precision = tp / np.where(seen > 0, seen, np.nan)
    gained = np.diff(tp, axis=1, prepend=0.0)
    total = tp[:, -1]
    return np.nansum(precision * gained, axis=1) / np.where(total > 0, total, np.nan)


def _macro_recall(labels: np.ndarray, predicted: np.ndarray, classes: int, weights) -> np.ndarray:
    """Mean over classes of the weighted recall, for each row of weights (B, n)."""
    recalls = []
    for cls in range(classes):
        mine = labels == cls
        if not mine.any():
            continue
        w = weights[:, mine]
        recalls.append((w * (predicted[mine] == cls)).sum(axis=1) / w.sum(axis=1))
    return np.nanmean(np.stack(recalls), axis=0)


def _bootstrap_rule(
    name: str,
    what: str,
    metric,
    e: ClassEvidence,
    amp,
    fp32,
    tolerance: float,
    strict: bool,
    multiplicity: np.ndarray | None = None,
) -> Rule:
    """A rule on the difference AMP - float32 of `metric(values, weights)` averaged over seeds,
    its 95% interval a paired bootstrap over examples. With `multiplicity`, the values are the
    distinct examples (distinct_examples) and each one's count: a resample of the n examples
    is then a multinomial draw of counts over the distinct ones, the same distribution at the
    cost of a few dozen cells instead of n (17 s -> well under 1 s for 200,000 examples)."""
    n = e.labels.size
    rng = np.random.default_rng(gate_stats.SEED)
    base = np.ones(n) if multiplicity is None else np.asarray(multiplicity, np.float64)
    ones = base[None, :]
    cells = base.size

    def difference(weights: np.ndarray) -> np.ndarray:
        per_seed = [metric(a, weights) - metric(f, weights) for a, f in zip(amp, fp32, strict=True)]
        return np.mean(per_seed, axis=0)

    estimate = float(difference(ones)[0])
    draws = []
    chunk = max(1, min(100, 2_000_000 // cells))  # weights of at most 16 MB on large splits
    for start in range(0, RESAMPLES, chunk):
        size = min(chunk, RESAMPLES - start)
        draws.append(difference(rng.multinomial(n, base / n, size=size)))
    lo, hi = np.nanquantile(np.concatenate(draws), [0.025, 0.975])
    lo, hi = float(min(lo, estimate)), float(max(hi, estimate))
    if lo == hi == estimate == 0.0:
        # The twins answered every example alike: no resample can differ, yet n examples do
        # not prove the models equal. As accuracy_parity does, the exact bound on the rate at
        # which they could differ, here over the smallest class (the metric's weakest part).
        smallest = int(min(np.bincount(e.labels.astype(np.int64))[np.unique(e.labels)]))
        bound = gate_stats.exact_discordance_bound(smallest)
        lo, hi = -bound, bound
    ci = f"95% CI {lo:+.4f} to {hi:+.4f}"
    on = f"n={n:,} examples" + (f" x {len(amp)} seeds" if len(amp) > 1 else "")
    eps = 1e-12
    if not np.isfinite(estimate):
        outcome, reason = gate_stats.FAIL, f"{what} could not be measured ({on})"
    elif estimate < -tolerance - eps:
        outcome = gate_stats.FAIL
        proven = "a proven regression" if hi < -tolerance - eps else "the estimate itself"
        reason = (
            f"AMP's {what} is {-estimate:.4f} lower ({ci}, {on}): beyond the {tolerance:.4f} "
            f"tolerance ({proven})"
        )
    elif lo >= -tolerance - eps:
        outcome = gate_stats.PASS
        reason = f"AMP changes {what} by {estimate:+.4f} ({ci}, {on}): within {tolerance:.4f}"
    else:
        outcome = gate_stats.FAIL if strict else gate_stats.UNPROVEN
        reason = (
            f"parity not proven at n={n:,}: AMP changes {what} by {estimate:+.4f} ({ci}), within "
            f"the {tolerance:.4f} tolerance, but the interval reaches past it"
            + (" (--parity strict: rejected)" if strict else " (not a rejection)")
        )
    return from_evidence(
        name,
        {
            "estimate": estimate,
            "interval": [lo, hi],
            "n": n,
            "seeds": len(amp),
            "test": BOOTSTRAP_TEST,
            "outcome": outcome,
            "reason": reason,
        },
        -tolerance,
    )


def class_rules(
    e: ClassEvidence,
    recall_tolerance: float,
    auc_tolerance: float,
    strict: bool,
    which: str = "rare",
) -> list[Rule]:
    """Every rule of the rare class for this label (see the module docstring)."""
    rules = recall_rules(e, recall_tolerance, strict, which)
    if len(e.classes) == 2 and e.amp_scores is not None and e.fp32_scores is not None:
        # The areas are read for the rarer class (class 1 on a tie), the one the recall rules
        # watch: PR AUC is not symmetric, and a string label's class 1 is merely the second
        # name in order. The scores are class 1's probability: class 0's is 1 - p.
        cls = 0 if np.sum(e.labels == 0) < np.sum(e.labels == 1) else 1
        positive = e.labels == cls
        amp_scores, fp32_scores = (
            (e.amp_scores, e.fp32_scores) if cls == 1 else (1 - e.amp_scores, 1 - e.fp32_scores)
        )
        name = e.classes[cls]
        for rule, what, fn in (
            ("roc_auc", f"ROC AUC (positive class {name!r}, the rarer)", _weighted_roc_auc),
            ("pr_auc", f"PR AUC (positive class {name!r}, the rarer)", _weighted_average_precision),
        ):
            metric = lambda scores, weights, fn=fn: fn(scores, positive, weights)  # noqa: E731
            rules.append(
                _bootstrap_rule(
                    rule, what, metric, e, amp_scores, fp32_scores, auc_tolerance, strict
                )
            )
    elif len(e.classes) > 2:
        k = len(e.classes)
        labels, amp, fp32, counts = distinct_examples(e.labels, e.amp, e.fp32)

        def metric(predicted, weights, labels=labels):  # the same signature as the AUCs'
            return _macro_recall(labels, predicted, k, weights)

        rules.append(
            _bootstrap_rule(
                "macro_recall",
                "macro-averaged recall",
                metric,
                e,
                amp,
                fp32,
                recall_tolerance,
                strict,
                multiplicity=counts,
            )  # fmt: skip
        )
    return rules


def distinct_examples(labels: np.ndarray, amp: np.ndarray, fp32: np.ndarray) -> tuple:
    """(labels, AMP's (seeds, m), float32's (seeds, m), counts (m)) of the distinct examples:
    an example is its label and both twins' answers per seed, so examples alike are
    interchangeable in any metric of labels and answers, and resampling n examples is drawing
    counts over the m distinct ones."""
    seeds = amp.shape[0]
    rows = np.concatenate([labels[None, :], amp, fp32]).T.astype(np.int64)
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    return distinct[:, 0], distinct[:, 1 : 1 + seeds].T, distinct[:, 1 + seeds :].T, counts

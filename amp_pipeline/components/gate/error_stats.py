"""The paired evidence for a regression label: each eval example's absolute error under both models
(ErrorPairs), the interval on the mean change in error (Student's t, widened by a tail allowance
where the errors are heavy-tailed), and its parity verdict."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from amp_pipeline.components.gate.stats import ALPHA, FAIL, PASS, SEED, UNPROVEN

ERROR_TEST = (
    "paired per-example absolute errors (seeds averaged per example): studentized bootstrap "
    "(bootstrap-t) 95% interval of their mean difference over examples, widened by the tail "
    "the sample may have under-drawn"
)


ERROR_TEST_SUMMARY = (
    "paired per-example absolute errors: Student-t 95% interval of their mean difference "
    "(only their mean and spread were recorded)"
)


TAIL_FENCE = 1.5  # Tukey's inner fence: values beyond Q3 + 1.5 IQR (or Q1 - 1.5 IQR) are tail


@dataclasses.dataclass(frozen=True)
class ErrorPairs:
    """Two regression models' absolute errors on the same n examples, over one seed or several.

    Each example's outcome is the mean over seeds of |candidate error| - |reference error|; the
    examples are the independent units (n distinct examples, never seeds x n).

    Attributes:
        n: distinct examples.
        seeds: seeds each example was scored under.
        reference_mae: the reference's mean absolute error (in the label's units).
        diff_mean: the mean per-example difference: candidate MAE minus reference MAE.
        diff_sd: the per-example differences' standard deviation (ddof 1).
    """

    n: int
    seeds: int
    reference_mae: float
    diff_mean: float
    diff_sd: float
    # The per-example differences themselves (for the bootstrap); None where only the
    # summaries were recorded (the TFLite variants' parity: Student-t then).
    diffs: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)

    @classmethod
    def from_errors(cls, candidate: np.ndarray, reference: np.ndarray) -> ErrorPairs:
        """From absolute errors: shape (n,) for one seed, (seeds, n) for several."""
        candidate = np.atleast_2d(np.asarray(candidate, np.float64))
        reference = np.atleast_2d(np.asarray(reference, np.float64))
        if candidate.shape != reference.shape:
            raise ValueError(
                "Invalid value for argument candidate: both models must be judged on the same "
                f"examples. Received: {candidate.shape} vs {reference.shape}"
            )
        per_example = (candidate - reference).mean(axis=0)
        n = per_example.size
        return cls(
            n=int(n),
            seeds=int(candidate.shape[0]),
            reference_mae=float(reference.mean()) if n else math.nan,
            diff_mean=float(per_example.mean()) if n else math.nan,
            diff_sd=float(per_example.std(ddof=1)) if n > 1 else 0.0,
            diffs=per_example.astype(np.float32),
        )

    @property
    def candidate_mae(self) -> float:
        return self.reference_mae + self.diff_mean

    @property
    def relative(self) -> float:
        """The MAE change as a share of the reference's MAE (+0.02: 2% worse)."""
        return self.diff_mean / self.reference_mae if self.reference_mae > 0 else math.inf

    @property
    def test(self) -> str:
        return ERROR_TEST if self.diffs is not None else ERROR_TEST_SUMMARY

    def to_dict(self) -> dict:
        d = {k: v for k, v in dataclasses.asdict(self).items() if k != "diffs"}
        return {**d, "candidate_mae": self.candidate_mae}


def student_t_half_width(sd: float, n: int, level: float = 1 - ALPHA) -> float:
    """Half the width of a `level` Student-t interval of a mean over n values of spread `sd`
    (NaN: n < 2)."""
    if n < 2:
        return math.nan
    from scipy.stats import t

    return float(t.ppf(1 - (1 - level) / 2, n - 1)) * sd / math.sqrt(n)


def student_t_interval(p: ErrorPairs, level: float = 1 - ALPHA) -> tuple[float, float]:
    """A `level` Student-t interval of the mean difference, from its mean and spread alone."""
    if p.n < 2:
        return (math.nan, math.nan)
    half = student_t_half_width(p.diff_sd, p.n, level)
    return (p.diff_mean - half, p.diff_mean + half)


def tail_allowance(d: np.ndarray, level: float = 1 - ALPHA) -> tuple[float, float]:
    """How far each bound moves for the tail a sample may have under-drawn: (down, up).

    A few large errors decide whether AMP fails, and a sample of n examples may hold fewer of
    them than the population: the bootstrap resamples only the tail it saw. For the values
    beyond Tukey's inner fence on each side (k of them), the (1 + level) / 2 Poisson upper
    bound on how many such values n examples could hold (Garwood) says how many more there
    might be; each would move the mean by its excess over the median, at their mean excess.
    """
    from scipy.stats import chi2

    n = d.size
    q1, median, q3 = np.quantile(d, [0.25, 0.5, 0.75])
    spread = q3 - q1
    moves = []
    for side in (d[d < q1 - TAIL_FENCE * spread], d[d > q3 + TAIL_FENCE * spread]):
        k = side.size
        if k == 0:
            moves.append(0.0)
            continue
        more = chi2.ppf(1 - (1 - level) / 2, 2 * (k + 1)) / 2 - k
        moves.append(float(more / n * abs(side.mean() - median)))
    return moves[0], moves[1]


def error_interval(
    p: ErrorPairs, level: float = 1 - ALPHA, resamples: int = 999
) -> tuple[float, float]:
    """A `level` interval of the mean absolute error difference (label units).

    With the per-example differences: a studentized bootstrap over examples (an example's
    seeds together, already averaged in its difference): t* = (mean* - mean) / se* over
    `resamples` resamples, bounds mean - t*_(1-a/2) se and mean - t*_(a/2) se, each then moved
    out by `tail_allowance`. Per-example error differences are right-skewed (AMP fails by a few
    large errors), and the Student-t upper bound misses the true mean far more often than it
    claims there (tests/test_regression.py measures both). Without them (TFLite summaries):
    Student-t.
    """
    if p.diffs is None:
        return student_t_interval(p, level)
    d = np.asarray(p.diffs, np.float64)
    n = d.size
    if n < 2:
        return (math.nan, math.nan)
    mean, se = float(d.mean()), float(d.std(ddof=1)) / math.sqrt(n)
    if se == 0:
        return (mean, mean)
    rng = np.random.default_rng(SEED)
    ts = []
    chunk = max(1, min(resamples, 20_000_000 // n))  # bounded memory on large eval splits
    for start in range(0, resamples, chunk):
        x = d[rng.integers(0, n, size=(min(chunk, resamples - start), n))]
        se_star = np.maximum(x.std(axis=1, ddof=1) / math.sqrt(n), 1e-300)
        ts.append((x.mean(axis=1) - mean) / se_star)
    t_lo, t_hi = np.quantile(np.concatenate(ts), [(1 - level) / 2, 1 - (1 - level) / 2])
    down, up = tail_allowance(d, level)
    return (mean - float(t_hi) * se - down, mean - float(t_lo) * se + up)


def error_parity(p: ErrorPairs, tolerance: float, strict: bool = False, what: str = "AMP") -> dict:
    """The outcome of "the candidate's mean absolute error is at most `tolerance` (a share of
    the reference's MAE) above the reference's".

    The estimate and interval are given as shares of the reference's MAE (the interval is the
    label-unit interval divided by that measured MAE, taken as fixed).
    - fail: the estimate is beyond +tolerance; a proven regression when the whole interval is;
    - pass: the estimate is within it and the interval's upper bound is too;
    - unproven otherwise; `strict` turns it into fail.
    """
    lo, hi = error_interval(p)
    scale = p.reference_mae if p.reference_mae > 0 else math.nan
    rel, rel_lo, rel_hi = p.relative, lo / scale, hi / scale
    eps = 1e-12
    on = f"n={p.n:,} examples" + (f" x {p.seeds} seeds" if p.seeds > 1 else "")
    ci = f"95% CI {rel_lo:+.2%} to {rel_hi:+.2%}"
    maes = f"MAE {p.candidate_mae:.4g} vs {p.reference_mae:.4g}"
    if p.n < 2 or not math.isfinite(rel):
        outcome = FAIL
        reason = f"no evidence: {what} errors measured on {p.n} examples ({maes})"
    elif rel > tolerance + eps:
        outcome = FAIL
        proven = "a proven regression" if rel_lo > tolerance + eps else "the estimate itself"
        reason = (
            f"{what} raises the mean absolute error by {rel:+.2%} ({maes}, {ci}, {on}): beyond "
            f"the {tolerance:.2%} tolerance ({proven})"
        )
    elif rel_hi <= tolerance + eps:
        outcome = PASS
        reason = (
            f"{what} changes the mean absolute error by {rel:+.2%} ({maes}, {ci}, {on}): within "
            f"the {tolerance:.2%} tolerance"
        )
    else:
        outcome = FAIL if strict else UNPROVEN
        reason = (
            f"parity not proven at n={p.n:,}: {what} changes the mean absolute error by "
            f"{rel:+.2%} ({maes}, {ci}), within the {tolerance:.2%} tolerance, but the interval "
            "reaches past it"
            + (
                " (--parity strict: rejected)"
                if strict
                else " (promoted by default; --parity strict rejects)"
            )
        )
    return {
        "estimate": rel,
        "interval": [rel_lo, rel_hi],
        "n": p.n,
        "seeds": p.seeds,
        "test": p.test,
        "outcome": outcome,
        "reason": reason,
        "mae": {"candidate": p.candidate_mae, "reference": p.reference_mae},
    }

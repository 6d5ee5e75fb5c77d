"""The statistics behind the gate: decisions that hold when a run is repeated.

Two models that predict the same eval examples are compared pair by pair. Only the examples
one got right and the other wrong (the discordant pairs, `b` and `c`) carry information about
their accuracy difference `(b - c) / n`:

- `mcnemar_p`: exact McNemar test (two-sided binomial test of b out of b + c at 1/2);
- `paired_interval`: a 95% confidence interval of the difference, by paired bootstrap over
  examples (deterministic: fixed seed);
- `parity`: the outcome against a tolerance: pass (the interval's lower bound clears
  -tolerance), fail (the whole interval is below -tolerance, or a significant loss whose
  estimate is beyond it), or inconclusive (the data cannot tell), with the eval size that would
  resolve it.

`proportion_interval` (Wilson) does the same for one rate against a floor (TFLite agreement).
Everything here is pure: counts in, numbers out.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

Z95 = 1.959963984540054
BOOTSTRAP = 4000
SEED = 20261202

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclasses.dataclass(frozen=True)
class Paired:
    """Two models' correctness on the same n examples.

    Attributes:
        n: examples.
        b: examples the candidate got right and the reference wrong.
        c: examples the candidate got wrong and the reference right.
        both: examples both got right.
    """

    n: int
    b: int
    c: int
    both: int = 0

    @classmethod
    def from_correct(cls, candidate: np.ndarray, reference: np.ndarray) -> Paired:
        candidate = np.asarray(candidate, bool)
        reference = np.asarray(reference, bool)
        if candidate.shape != reference.shape:
            raise ValueError(
                "Invalid value for argument candidate: both models must be judged on the same "
                f"examples. Received: {candidate.shape} vs {reference.shape}"
            )
        return cls(
            n=int(candidate.size),
            b=int(np.sum(candidate & ~reference)),
            c=int(np.sum(~candidate & reference)),
            both=int(np.sum(candidate & reference)),
        )

    @property
    def difference(self) -> float:
        return (self.b - self.c) / self.n if self.n else 0.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: P(|X - m/2| >= |b - m/2|), X ~ Binomial(m = b + c, 1/2)."""
    m = b + c
    if m == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(m, i) for i in range(k + 1)) / 2**m
    return min(1.0, 2 * tail)


def paired_interval(p: Paired, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of (b - c)/n from a paired bootstrap over the n examples.

    Resampling examples with replacement draws each pair's kind (b, c, or concordant) from its
    observed share: a multinomial, sampled directly. With no discordant pair the interval is
    [0, 0]: nothing separates the two models on these examples.
    """
    if p.n == 0:
        return (math.nan, math.nan)
    if p.b == p.c == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(SEED)
    shares = [p.b / p.n, p.c / p.n, 1 - (p.b + p.c) / p.n]
    draws = rng.multinomial(p.n, shares, size=BOOTSTRAP)
    diffs = (draws[:, 0] - draws[:, 1]) / p.n
    alpha = (1 - level) / 2
    lo, hi = np.quantile(diffs, [alpha, 1 - alpha])
    return (float(lo), float(hi))


def eval_size_needed(p: Paired, tolerance: float) -> int | None:
    """Examples at which the 95% interval's half-width would be the tolerance, at the observed
    discordance: n = z^2 * (d - delta^2) / tolerance^2 (None without discordant pairs)."""
    if p.n == 0 or tolerance <= 0 or p.b + p.c == 0:
        return None
    d = (p.b + p.c) / p.n
    variance = max(d - p.difference**2, 1e-12)
    return math.ceil(Z95**2 * variance / tolerance**2)


def parity(p: Paired, tolerance: float, strict: bool = False, what: str = "AMP") -> dict:
    """The outcome of "the candidate is at most `tolerance` less accurate than the reference".

    - fail: the whole interval lies below -tolerance, or the loss is significant (McNemar
      p < 0.05) and its estimate is beyond the tolerance;
    - pass: the interval's lower bound is at or above -tolerance;
    - inconclusive otherwise (the data cannot tell); `strict` turns it into fail.
    """
    lo, hi = paired_interval(p)
    pvalue = mcnemar_p(p.b, p.c)
    delta = p.difference
    needed = eval_size_needed(p, tolerance)
    eps = 1e-12
    if hi < -tolerance - eps or (pvalue < 0.05 and delta < -tolerance - eps):
        outcome = FAIL
        reason = (
            f"{what} loses {-delta:.2%} accuracy (95% CI {lo:+.2%} to {hi:+.2%}, McNemar p="
            f"{pvalue:.3g}): a real regression beyond the {tolerance:.2%} tolerance"
        )
    elif lo >= -tolerance - eps:
        outcome = PASS
        reason = (
            f"{what} changes accuracy by {delta:+.2%} (95% CI {lo:+.2%} to {hi:+.2%}): within "
            f"the {tolerance:.2%} tolerance"
        )
    else:
        outcome = FAIL if strict else INCONCLUSIVE
        more = f"; about {needed:,} eval examples would resolve it" if needed else ""
        reason = (
            f"{what} changes accuracy by {delta:+.2%} (95% CI {lo:+.2%} to {hi:+.2%}, McNemar "
            f"p={pvalue:.3g}) on {p.n:,} examples: the data cannot tell whether it is within "
            f"the {tolerance:.2%} tolerance{more}"
            + (" (--parity strict: not shown to be within it, so rejected)" if strict else "")
        )
    return {
        "estimate": delta,
        "interval": [lo, hi],
        "n": p.n,
        "discordant": {"candidate_only": p.b, "reference_only": p.c},
        "test": "paired bootstrap 95% CI (4000 resamples) + exact McNemar",
        "p_value": pvalue,
        "eval_size_needed": needed,
        "outcome": outcome,
        "reason": reason,
    }


def proportion_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a rate (well-behaved at 0 and 1 and for small n)."""
    if n == 0:
        return (math.nan, math.nan)
    z = Z95 if level == 0.95 else _z(level)
    phat = successes / n
    denominator = 1 + z * z / n
    centre = (phat + z * z / (2 * n)) / denominator
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def _z(level: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def rate_at_least(
    successes: int, n: int, floor: float, strict: bool = False, what: str = "agreement"
) -> dict:
    """The outcome of "the rate is at least `floor`".

    - fail: the whole interval is below the floor;
    - pass: the lower bound clears it, or (unless `strict`) the estimate reaches it: a rate of
      1.0 on 360 examples cannot prove 0.995 (Wilson's lower bound is 0.989), and a measurement
      the data cannot tell from the floor is never rejected by default;
    - inconclusive: the estimate is below the floor but the interval reaches it (`strict`: fail).
    """
    lo, hi = proportion_interval(successes, n)
    rate = successes / n if n else math.nan
    eps = 1e-12
    if n == 0:
        outcome, reason = FAIL, f"no examples to measure {what}"
    elif hi < floor - eps:
        outcome = FAIL
        reason = (
            f"{what} {rate:.2%} (95% CI {lo:.2%} to {hi:.2%}, n={n:,}): surely below {floor:.2%}"
        )
    elif lo >= floor - eps:
        outcome = PASS
        reason = f"{what} {rate:.2%} (95% CI {lo:.2%} to {hi:.2%}, n={n:,}): at least {floor:.2%}"
    elif rate >= floor - eps and not strict:
        outcome = PASS
        reason = (
            f"{what} {rate:.2%} (95% CI {lo:.2%} to {hi:.2%}, n={n:,}) reaches {floor:.2%}; "
            f"{n:,} examples cannot prove more"
        )
    else:
        outcome = FAIL if strict else INCONCLUSIVE
        reason = (
            f"{what} {rate:.2%} (95% CI {lo:.2%} to {hi:.2%}, n={n:,}): the data cannot tell "
            f"whether it is at least {floor:.2%}"
        )
    return {
        "estimate": rate,
        "interval": [lo, hi],
        "n": n,
        "test": "Wilson 95% interval",
        "outcome": outcome,
        "reason": reason,
    }


def median_and_spread(values: list[float]) -> dict:
    """Median, quartiles, min and max of repeated measurements."""
    a = np.asarray([v for v in values if v is not None and math.isfinite(v)], float)
    if a.size == 0:
        return {"median": None, "q1": None, "q3": None, "min": None, "max": None, "n": 0}
    q1, med, q3 = np.quantile(a, [0.25, 0.5, 0.75])
    return {
        "median": float(med),
        "q1": float(q1),
        "q3": float(q3),
        "min": float(a.min()),
        "max": float(a.max()),
        "n": int(a.size),
    }


def trimmed(values: list[float]) -> list[float]:
    """MLPerf's rule with five or more seeds: drop the best and the worst."""
    if len(values) < 5:
        return list(values)
    ordered = sorted(values)
    return ordered[1:-1]

"""The statistics behind the gate: decisions that hold when a run is repeated.

Two models that predict the same eval examples are compared example by example. With K seeds,
each example's outcome is the mean over seeds of (candidate right) - (reference right), a value
in [-1, 1]; the examples are the independent units, so n is the number of distinct examples,
never K x n (every seed is scored on the same examples).

- `paired_interval`: a 95% interval of the accuracy difference by a bootstrap that resamples
  examples (all of an example's seeds together), with one pseudo-example each way (+1 and -1,
  Agresti and Min's adjustment for paired proportions) so that few discordant pairs do not give
  a falsely narrow interval; with no discordant example at all, the exact bound on the
  discordant rate (Clopper-Pearson, 97.5% one-sided each way: 1 - 0.025^(1/n)). Coverage is
  checked by simulation in tests/test_gate_stats.py (at least 93% for one seed and several).
- `mcnemar_p`: exact McNemar test (two-sided binomial test of b out of b + c at 1/2), on
  examples: with several seeds an example counts once, won or lost by the sign of its summed
  difference over the seeds (`Paired.example_discordance`), never once per seed.
- `parity`: the outcome against a tolerance, never laxer than TFMA's change threshold on the
  point estimate:
  - fail: the estimate is beyond the tolerance (a proven regression when the whole interval is);
  - pass: the estimate is within it and the interval's lower bound clears it;
  - unproven: the estimate is within it but the interval reaches past it ("parity not
    proven"); it does not reject unless `strict`, and says how many eval examples would prove it.

`proportion_interval` (Wilson) and `rate_at_least` do the same for one rate against a floor
(TFLite agreement). Everything here is pure: counts in, numbers out.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

Z95 = 1.959963984540054


BOOTSTRAP = 4000


SEED = 20261202


ALPHA = 0.05


PASS, FAIL, UNPROVEN = "pass", "fail", "unproven"


TEST = (
    "bootstrap over examples (seeds kept together, 4000 resamples, +1/-1 pseudo-examples; "
    "Clopper-Pearson when nothing differs) + exact McNemar over examples (an example's seeds "
    "combined by the sign of their summed difference)"
)


@dataclasses.dataclass(frozen=True)
class Paired:
    """Two models' correctness on the same n examples, over one seed or several.

    Attributes:
        n: distinct examples (the independent units, whatever the number of seeds).
        b: (example, seed) outcomes the candidate got right and the reference wrong.
        c: (example, seed) outcomes the candidate got wrong and the reference right.
        both: (example, seed) outcomes both got right.
        seeds: how many seeds each example was scored under.
        levels: the per-example mean difference over seeds as (value, examples) pairs; empty
            for one seed, where b and c say it all.
    """

    n: int
    b: int
    c: int
    both: int = 0
    seeds: int = 1
    levels: tuple[tuple[float, int], ...] = ()

    @classmethod
    def from_correct(cls, candidate: np.ndarray, reference: np.ndarray) -> Paired:
        """From per-example correctness: shape (n,) for one seed, (seeds, n) for several."""
        candidate = np.atleast_2d(np.asarray(candidate, bool))
        reference = np.atleast_2d(np.asarray(reference, bool))
        if candidate.shape != reference.shape:
            raise ValueError(
                "Invalid value for argument candidate: both models must be judged on the same "
                f"examples. Received: {candidate.shape} vs {reference.shape}"
            )
        seeds, n = candidate.shape
        levels: tuple = ()
        if seeds > 1:
            # Each example's difference summed over seeds: small integers, 2 bytes each (the
            # gate's streamed comparisons hold a few bytes per eval example, not 8 per seed).
            per_example = (candidate.astype(np.int16) - reference).sum(axis=0, dtype=np.int16)
            values, counts = np.unique(per_example, return_counts=True)
            levels = tuple((float(v) / seeds, int(k)) for v, k in zip(values, counts, strict=True))
        return cls(
            n=int(n),
            b=int(np.count_nonzero(candidate & ~reference)),
            c=int(np.count_nonzero(~candidate & reference)),
            both=int(np.count_nonzero(candidate & reference)),
            seeds=int(seeds),
            levels=levels,
        )

    def example_discordance(self) -> tuple[int, int]:
        """(examples the candidate won, examples it lost), an example's seeds combined by the
        sign of their summed difference (a majority vote of the seeds' outcomes): the counts
        McNemar's test reads, one per independent unit. K identical seeds give one seed's."""
        if not self.levels:
            return self.b, self.c
        won = sum(k for v, k in self.levels if v > 0)
        lost = sum(k for v, k in self.levels if v < 0)
        return won, lost

    def accuracies(self) -> tuple[float, float]:
        """(candidate, reference) accuracy over every (example, seed) outcome."""
        total = self.n * self.seeds
        if not total:
            return math.nan, math.nan
        return (self.b + self.both) / total, (self.c + self.both) / total

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, counts) of the per-example mean difference."""
        if self.levels:
            values, counts = zip(*self.levels, strict=True)
            return np.asarray(values, float), np.asarray(counts, np.int64)
        return (
            np.array([1.0, -1.0, 0.0]),
            np.array([self.b, self.c, self.n - self.b - self.c], np.int64),
        )

    @property
    def difference(self) -> float:
        """The accuracy difference, candidate minus reference, averaged over seeds."""
        if not self.n:
            return 0.0
        return (self.b - self.c) / (self.n * self.seeds)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["levels"] = [list(level) for level in self.levels]
        return d


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: P(|X - m/2| >= |b - m/2|), X ~ Binomial(m = b + c, 1/2)."""
    m = b + c
    if m == 0:
        return 1.0
    from scipy.stats import binom

    # The binomial CDF (a regularised incomplete beta), not a sum of exact binomial
    # coefficients: that sum takes minutes in big integers at the 10^4-10^5 discordant pairs
    # of a million-row eval split (measured: the gate ran > 3 min at 200k eval examples).
    return min(1.0, 2 * float(binom.cdf(min(b, c), m, 0.5)))


def exact_discordance_bound(n: int, level: float = 1 - ALPHA) -> float:
    """Clopper-Pearson upper bound on a rate observed 0 times in n (one-sided (1+level)/2).

    With no discordant example, the accuracy difference lies within +/- this bound: |delta| is
    at most the rate of examples on which the models differ.
    """
    return 1.0 - ((1 - level) / 2) ** (1.0 / n)


def paired_interval(p: Paired, level: float = 1 - ALPHA) -> tuple[float, float]:
    """A `level` interval of the accuracy difference (see the module docstring).

    The bootstrap resamples examples: for one seed, the kind of each pair (won, lost, same);
    for several, each example's mean difference over the seeds, all seeds together.
    """
    if p.n == 0:
        return (math.nan, math.nan)
    values, counts = p.histogram()
    if p.b + p.c == 0:
        bound = exact_discordance_bound(p.n, level)
        return (-bound, bound)
    values = np.concatenate([values, [1.0, -1.0]])
    counts = np.concatenate([counts, [1, 1]])
    total = int(counts.sum())
    rng = np.random.default_rng(SEED)
    draws = rng.multinomial(total, counts / total, size=BOOTSTRAP)
    means = draws @ values / total
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return (float(min(lo, p.difference)), float(max(hi, p.difference)))


def eval_size_needed(p: Paired, tolerance: float) -> int | None:
    """About how many eval examples would let the interval's lower bound clear -tolerance at
    the observed estimate and per-example spread (None where no size would: the estimate is
    at or beyond the tolerance, or nothing was measured)."""
    margin = p.difference + tolerance
    if p.n == 0 or tolerance <= 0 or margin <= 0:
        return None
    if p.b + p.c == 0:  # the exact bound 1 - 0.025^(1/n) must come within the tolerance
        return math.ceil(math.log(ALPHA / 2) / math.log(1 - min(tolerance, 0.999999)))
    values, counts = p.histogram()
    variance = max(float(counts @ (values - p.difference) ** 2) / p.n, 1e-12)
    return max(p.n + 1, math.ceil(Z95**2 * variance / margin**2))


def parity(p: Paired, tolerance: float, strict: bool = False, what: str = "AMP") -> dict:
    """The outcome of "the candidate is at most `tolerance` less accurate than the reference".

    - fail: the estimate is beyond -tolerance (never laxer than TFMA's change threshold); a
      proven regression when the whole interval is;
    - pass: the estimate is within it and the interval's lower bound clears -tolerance;
    - unproven otherwise: parity not proven at this n; `strict` turns it into fail.
    """
    lo, hi = paired_interval(p)
    pvalue = mcnemar_p(*p.example_discordance())
    delta = p.difference
    needed = eval_size_needed(p, tolerance)
    eps = 1e-12
    ci = f"95% CI {lo:+.2%} to {hi:+.2%}"
    on = f"n={p.n:,} examples" + (f" x {p.seeds} seeds" if p.seeds > 1 else "")
    if delta < -tolerance - eps:
        outcome = FAIL
        proven = "a proven regression" if hi < -tolerance - eps else "the estimate itself"
        reason = (
            f"{what} loses {-delta:.2%} accuracy ({ci}, McNemar p={pvalue:.3g}, {on}): "
            f"beyond the {tolerance:.2%} tolerance ({proven})"
        )
    elif lo >= -tolerance - eps:
        outcome = PASS
        reason = (
            f"{what} changes accuracy by {delta:+.2%} ({ci}, {on}): within the "
            f"{tolerance:.2%} tolerance"
        )
    else:
        outcome = FAIL if strict else UNPROVEN
        more = f", about {needed:,} eval examples needed" if needed else ""
        reason = (
            f"parity not proven at n={p.n:,}{more}: {what} changes accuracy by {delta:+.2%} "
            f"({ci}), within the {tolerance:.2%} tolerance, but the interval reaches past it"
            + (
                " (--parity strict: rejected)"
                if strict
                else " (promoted by default; --parity strict rejects)"
            )
        )
    return {
        "estimate": delta,
        "interval": [lo, hi],
        "n": p.n,
        "seeds": p.seeds,
        "discordant": {"candidate_only": p.b, "reference_only": p.c},
        "test": TEST,
        "p_value": pvalue,
        "eval_size_needed": needed,
        "outcome": outcome,
        "reason": reason,
    }


def proportion_interval(successes: int, n: int, level: float = 1 - ALPHA) -> tuple[float, float]:
    """Wilson score interval of a rate (well-behaved at 0 and 1 and for small n)."""
    if n == 0:
        return (math.nan, math.nan)
    z = Z95 if level == 1 - ALPHA else _z(level)
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
    """The outcome of "the rate is at least `floor`", never laxer than the point estimate.

    - fail: the estimate is below the floor (surely below when the whole interval is);
    - pass: the lower bound clears it;
    - unproven: the estimate reaches the floor but the interval does not clear it (a rate of
      1.0 on 360 examples cannot prove 0.995: Wilson's lower bound is 0.989); `strict`: fail.
    """
    lo, hi = proportion_interval(successes, n)
    rate = successes / n if n else math.nan
    eps = 1e-12
    shown = f"{what} {rate:.2%} (95% CI {lo:.2%} to {hi:.2%}, n={n:,})"
    if n == 0:
        outcome, reason = FAIL, f"no examples to measure {what}"
    elif rate < floor - eps:
        outcome = FAIL
        surely = "surely " if hi < floor - eps else ""
        reason = f"{shown}: {surely}below {floor:.2%}"
    elif lo >= floor - eps:
        outcome = PASS
        reason = f"{shown}: at least {floor:.2%}"
    else:
        outcome = FAIL if strict else UNPROVEN
        reason = f"{shown} reaches {floor:.2%}, but {n:,} examples cannot prove it" + (
            " (--parity strict: rejected)" if strict else " (not a rejection)"
        )
    return {
        "estimate": rate,
        "interval": [lo, hi],
        "n": n,
        "test": "Wilson 95% interval",
        "outcome": outcome,
        "reason": reason,
    }


def trimmed(values: list[float]) -> list[float]:
    """MLPerf's rule with five or more seeds: drop the best and the worst (reported only; the
    gate pools every seed, since choosing seeds by their outcome would bias its interval)."""
    if len(values) < 5:
        return list(values)
    ordered = sorted(values)
    return ordered[1:-1]

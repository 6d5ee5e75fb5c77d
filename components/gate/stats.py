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
    """MLPerf's rule with five or more seeds: drop the best and the worst (reported only; the
    gate pools every seed, since choosing seeds by their outcome would bias its interval)."""
    if len(values) < 5:
        return list(values)
    ordered = sorted(values)
    return ordered[1:-1]


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


def student_t_interval(p: ErrorPairs, level: float = 1 - ALPHA) -> tuple[float, float]:
    """A `level` Student-t interval of the mean difference, from its mean and spread alone."""
    if p.n < 2:
        return (math.nan, math.nan)
    from scipy.stats import t

    half = float(t.ppf(1 - (1 - level) / 2, p.n - 1)) * p.diff_sd / math.sqrt(p.n)
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

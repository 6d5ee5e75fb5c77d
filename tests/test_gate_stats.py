"""The gate's statistics: cases checked by hand, and interval coverage checked by simulation."""

import math
import zlib

import numpy as np
import pytest

from amp_pipeline.components.amp.perf import median_and_spread
from amp_pipeline.components.gate.stats import (
    FAIL,
    PASS,
    UNPROVEN,
    Paired,
    eval_size_needed,
    exact_discordance_bound,
    mcnemar_p,
    paired_interval,
    parity,
    proportion_interval,
    rate_at_least,
    trimmed,
)

TOLERANCE = 0.005


def test_pairs_are_counted_from_per_example_correctness():
    amp = np.array([1, 1, 0, 0, 1, 1], bool)
    fp32 = np.array([1, 0, 1, 0, 1, 0], bool)
    p = Paired.from_correct(amp, fp32)
    assert (p.n, p.b, p.c, p.both, p.seeds) == (6, 2, 1, 2, 1)
    assert p.difference == pytest.approx(1 / 6)
    with pytest.raises(ValueError, match="same examples"):
        Paired.from_correct(amp, fp32[:3])


def test_identical_predictions_get_the_exact_interval_not_zero_width():
    # 348 examples (the digits eval split), nothing differs: the rule of three says a
    # difference of about 0.9 points cannot be ruled out; Clopper-Pearson gives 1.05 points.
    result = parity(Paired(n=348, b=0, c=0, both=340), TOLERANCE)
    lo, hi = result["interval"]
    assert result["estimate"] == 0.0
    assert hi == pytest.approx(1 - 0.025 ** (1 / 348)) and lo == -hi
    assert 3 / 348 < hi < 0.011
    # So 348 identical answers cannot prove a 0.5-point tolerance: promoted, not proven.
    assert result["outcome"] == UNPROVEN and result["reason"].startswith("parity not proven")
    needed = result["eval_size_needed"]
    assert exact_discordance_bound(needed) <= TOLERANCE < exact_discordance_bound(needed - 1)
    # With enough examples, identical answers do prove it.
    assert parity(Paired(n=needed, b=0, c=0), TOLERANCE)["outcome"] == PASS


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),
        (0, 5, 2 / 32),  # 5 losses and no win: still p = 0.0625, not significant
        (0, 6, 2 / 64),  # one more: p = 0.03125
        (3, 4, 1.0),  # 2 * (1 + 7 + 21 + 35) / 128
        (1, 9, 2 * (1 + 10) / 1024),
    ],
)
def test_exact_mcnemar_p_values(b, c, p):
    assert mcnemar_p(b, c) == pytest.approx(p)
    assert mcnemar_p(c, b) == pytest.approx(p)  # two-sided


def test_a_clear_regression_fails_as_proven():
    p = Paired(n=1000, b=0, c=30)
    result = parity(p, TOLERANCE)
    assert result["estimate"] == pytest.approx(-0.03)
    lo, hi = result["interval"]
    assert lo < -0.03 < hi < -TOLERANCE  # the whole interval is beyond the tolerance
    assert result["p_value"] == pytest.approx(2 / 2**30)
    assert result["outcome"] == FAIL and "a proven regression" in result["reason"]


def test_an_estimate_beyond_the_tolerance_fails_even_when_the_interval_reaches_zero():
    # The review's case (benchmarks/results/gate_noise.json, seed 2): 3 more losses than wins
    # on 348 examples, -0.86 points against a 0.5-point tolerance. TFMA's change threshold on
    # the point estimate rejects it; so does the gate, never laxer.
    p = Paired(n=348, b=2, c=5)
    result = parity(p, TOLERANCE)
    assert result["estimate"] == pytest.approx(-3 / 348)
    assert result["interval"][1] > 0  # the data cannot prove the loss...
    assert result["outcome"] == FAIL  # ...but the estimate itself is beyond the tolerance
    assert "beyond the 0.50% tolerance (the estimate itself)" in result["reason"]


def test_an_estimate_within_the_tolerance_with_a_wide_interval_is_not_proven():
    # 360 examples, 3 wins and 4 losses for AMP: -0.28 points, within 0.5, interval wider.
    p = Paired(n=360, b=3, c=4)
    result = parity(p, TOLERANCE)
    lo, hi = result["interval"]
    assert lo < -TOLERANCE and hi > 0
    assert result["outcome"] == UNPROVEN
    needed = result["eval_size_needed"]
    # n = z^2 * var / (delta + tolerance)^2, var the per-example variance of the difference
    d, delta = 7 / 360, -1 / 360
    assert needed == math.ceil(1.959963984540054**2 * (d - delta**2) / (delta + TOLERANCE) ** 2)
    assert result["reason"].startswith(f"parity not proven at n=360, about {needed:,} eval")
    assert "promoted by default; --parity strict rejects" in result["reason"]
    assert parity(p, TOLERANCE, strict=True)["outcome"] == FAIL


def test_boundaries_are_inclusive_and_significance_is_not_the_rule():
    # 5 losses in 1000 = exactly the tolerance: not beyond it, so not a fail (not proven).
    at = parity(Paired(n=1000, b=0, c=5), TOLERANCE)
    assert at["estimate"] == pytest.approx(-TOLERANCE) and at["outcome"] == UNPROVEN
    assert at["eval_size_needed"] is None  # no eval size proves an estimate at the bound
    # 6 losses: beyond it.
    assert parity(Paired(n=1000, b=0, c=6), TOLERANCE)["outcome"] == FAIL
    # Significant but well within the tolerance passes: 60 losses in 100,000 examples.
    small = parity(Paired(n=100_000, b=0, c=60), TOLERANCE)
    assert small["p_value"] < 1e-10 and small["outcome"] == PASS


def test_the_interval_is_deterministic_and_brackets_the_estimate():
    p = Paired(n=500, b=12, c=20)
    assert paired_interval(p) == paired_interval(p)
    lo, hi = paired_interval(p)
    assert lo < p.difference < hi
    # Close to the normal approximation at moderate counts (the pseudo-examples widen it a bit).
    se = math.sqrt((p.b + p.c) / p.n - p.difference**2) / math.sqrt(p.n)
    assert lo == pytest.approx(p.difference - 1.96 * se, abs=0.005)
    assert hi == pytest.approx(p.difference + 1.96 * se, abs=0.005)


def test_seeds_scored_on_the_same_examples_are_not_independent_data():
    rng = np.random.default_rng(0)
    amp = rng.random(348) < 0.97
    fp32 = rng.random(348) < 0.97
    one = Paired.from_correct(amp, fp32)
    # Three seeds that answered alike carry no more evidence than one: same n, same interval.
    three = Paired.from_correct(np.stack([amp] * 3), np.stack([fp32] * 3))
    assert three.n == 348 and three.seeds == 3 and three.b == 3 * one.b
    assert three.difference == pytest.approx(one.difference)
    assert paired_interval(three) == pytest.approx(paired_interval(one))
    # Counting the 3 x 348 outcomes as independent pairs (the old pooling) is about sqrt(3)
    # too narrow.
    naive = Paired(n=3 * 348, b=three.b, c=three.c)
    ratio = np.ptp(paired_interval(one)) / np.ptp(paired_interval(naive))
    assert 1.5 < ratio < 2.0


# --- coverage by simulation ----------------------------------------------------------------


def simulate(interval, n, seeds, kinds, replications, rng):
    """Share of `replications` synthetic paired samples whose interval covers the true difference.

    `kinds`: (weight, P(candidate right), P(reference right)) per kind of example; an example's
    kind is drawn once and each seed draws both models' outcomes from it, so seeds are
    correlated through the examples as real seeds are.
    """
    weights = np.array([k[0] for k in kinds])
    cand = np.array([k[1] for k in kinds])
    ref = np.array([k[2] for k in kinds])
    truth = float(weights @ (cand - ref))
    covered = 0
    for _ in range(replications):
        kind = rng.choice(len(kinds), size=n, p=weights)
        a = rng.random((seeds, n)) < cand[kind]
        f = rng.random((seeds, n)) < ref[kind]
        lo, hi = interval(Paired.from_correct(a, f))
        covered += lo - 1e-12 <= truth <= hi + 1e-12
    return covered / replications


SCENARIOS = {
    # AMP wrong on 1% of examples float32 gets right: the digits split's size.
    "one-sided loss": (348, [(0.99, 1, 1), (0.01, 0, 1)]),
    "rare loss, tiny split": (100, [(0.995, 1, 1), (0.005, 0, 1)]),
    "few discordant pairs": (348, [(0.98, 1, 1), (0.005, 1, 0), (0.015, 0, 1)]),
    "no difference": (348, [(0.98, 1, 1), (0.01, 0, 1), (0.01, 1, 0)]),
    "many discordant pairs": (1000, [(0.95, 1, 1), (0.02, 1, 0), (0.03, 0, 1)]),
    "hard examples, noisy per seed": (
        348,
        [(0.97, 0.99, 0.99), (0.02, 0.3, 0.7), (0.01, 0.8, 0.5)],
    ),
}


@pytest.mark.parametrize("seeds", [1, 3, 5])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_95_interval_covers_the_true_difference_at_least_93_percent(scenario, seeds):
    n, kinds = SCENARIOS[scenario]
    rng = np.random.default_rng(zlib.crc32(f"{scenario}/{seeds}".encode()))
    coverage = simulate(paired_interval, n, seeds, kinds, 400, rng)
    assert coverage >= 0.93, f"{scenario}, {seeds} seeds: coverage {coverage:.3f}"


def test_the_coverage_check_catches_an_interval_that_is_too_narrow():
    """The plain percentile bootstrap (what the gate used before) undercovers with few
    discordant pairs: the simulation must say so, or it could not fail."""

    def plain_bootstrap(p):
        values, counts = p.histogram()
        draws = np.random.default_rng(1).multinomial(p.n, counts / p.n, size=2000)
        return tuple(np.quantile(draws @ values / p.n, [0.025, 0.975]))

    n, kinds = SCENARIOS["one-sided loss"]
    rng = np.random.default_rng(7)
    assert simulate(plain_bootstrap, n, 1, kinds, 400, rng) < 0.9


def test_wilson_interval_and_rates_against_a_floor():
    lo, hi = proportion_interval(360, 360)
    assert hi == pytest.approx(1.0) and lo == pytest.approx(360 / (360 + 1.959963984540054**2))
    # 360 of 360 cannot prove 0.995: not proven, so promoted by default, rejected when strict.
    assert rate_at_least(360, 360, 0.995)["outcome"] == UNPROVEN
    assert rate_at_least(360, 360, 0.995, strict=True)["outcome"] == FAIL
    # 199 of 200 = the floor exactly: not below it (inclusive), not proven either.
    assert rate_at_least(199, 200, 0.995)["outcome"] == UNPROVEN
    # 198 of 200 is below the floor: the estimate says worse, so it fails.
    below = rate_at_least(198, 200, 0.995)
    assert below["outcome"] == FAIL and below["interval"][1] > 0.995
    assert "surely" not in below["reason"]
    assert "surely below" in rate_at_least(900, 1000, 0.995)["reason"]
    assert rate_at_least(10_000, 10_000, 0.995)["outcome"] == PASS


def test_repeats_give_median_spread_and_trimming():
    s = median_and_spread([1.2, 1.4, 1.3, None, float("nan")])
    assert (s["median"], s["min"], s["max"], s["n"]) == (1.3, 1.2, 1.4, 3)
    assert trimmed([5, 1, 3, 2, 4]) == [2, 3, 4]
    assert trimmed([1, 2, 3, 4]) == [1, 2, 3, 4]  # fewer than five seeds: all kept
    assert eval_size_needed(Paired(n=0, b=0, c=0), TOLERANCE) is None


def test_mcnemar_counts_examples_not_seeds():
    """K identical copies of one seed are one seed's evidence: the p-value does not shrink."""
    rng = np.random.default_rng(3)
    reference = rng.random(400) < 0.8
    candidate = reference.copy()
    flip = rng.choice(400, 40, replace=False)
    candidate[flip] = ~candidate[flip]
    one = parity(Paired.from_correct(candidate, reference), 0.005)
    three = parity(Paired.from_correct(np.stack([candidate] * 3), np.stack([reference] * 3)), 0.005)
    assert three["p_value"] == pytest.approx(one["p_value"])
    b, c = Paired.from_correct(candidate, reference).example_discordance()
    assert one["p_value"] == pytest.approx(mcnemar_p(b, c))
    # Seeds that disagree on an example: it counts once, by the sign of its summed difference.
    split = Paired.from_correct(
        np.array([[True, True, False], [True, False, False]]),
        np.array([[False, False, True], [False, True, True]]),
    )
    assert split.example_discordance() == (1, 1)  # example 1 ties (+1 - 1): neither

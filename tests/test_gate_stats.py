"""The gate's statistics on cases that can be checked by hand."""

import math

import numpy as np
import pytest

from components.gate_stats import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Paired,
    eval_size_needed,
    mcnemar_p,
    median_and_spread,
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
    assert (p.n, p.b, p.c, p.both) == (6, 2, 1, 2)
    assert p.difference == pytest.approx(1 / 6)
    with pytest.raises(ValueError, match="same examples"):
        Paired.from_correct(amp, fp32[:3])


def test_identical_predictions_pass_with_a_zero_width_interval():
    result = parity(Paired(n=360, b=0, c=0, both=350), TOLERANCE)
    assert result["estimate"] == 0.0 and result["interval"] == [0.0, 0.0]
    assert result["p_value"] == 1.0 and result["outcome"] == PASS
    assert result["eval_size_needed"] is None


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


def test_a_clear_regression_fails():
    p = Paired(n=1000, b=0, c=30)
    result = parity(p, TOLERANCE)
    assert result["estimate"] == pytest.approx(-0.03)
    lo, hi = result["interval"]
    assert lo < -0.03 < hi < -TOLERANCE  # the whole interval is beyond the tolerance
    assert result["p_value"] == pytest.approx(2 / 2**30)
    assert result["outcome"] == FAIL and "real regression" in result["reason"]


def test_a_difference_inside_the_noise_is_inconclusive_not_a_rejection():
    # The digits eval split: 360 examples, 3 wins and 4 losses for AMP.
    p = Paired(n=360, b=3, c=4)
    result = parity(p, TOLERANCE)
    assert result["estimate"] == pytest.approx(-1 / 360)
    lo, hi = result["interval"]
    assert lo < -TOLERANCE and hi > 0
    assert result["outcome"] == INCONCLUSIVE
    # n = z^2 * (d - delta^2) / tol^2 with d = 7/360, delta = -1/360
    d, delta = 7 / 360, -1 / 360
    assert result["eval_size_needed"] == math.ceil(1.959963984540054**2 * (d - delta**2) / 0.005**2)
    assert "2,987 eval examples would resolve it" in result["reason"]
    assert parity(p, TOLERANCE, strict=True)["outcome"] == FAIL


def test_one_example_of_a_tiny_split_does_not_reject():
    # 37 eval examples: one disagreement is 2.7 points, and proves nothing.
    result = parity(Paired(n=37, b=0, c=1), 0.01, what="int8 TFLite")
    assert result["estimate"] == pytest.approx(-1 / 37)
    assert result["p_value"] == 1.0 and result["outcome"] == INCONCLUSIVE


def test_boundaries_of_significance_and_tolerance():
    # 5 losses in 1000 = exactly the tolerance, and not significant (p = 0.0625): not a fail.
    at = parity(Paired(n=1000, b=0, c=5), TOLERANCE)
    assert at["estimate"] == pytest.approx(-TOLERANCE) and at["outcome"] == INCONCLUSIVE
    # 6 losses: significant (p = 0.031) and beyond the tolerance: fail.
    beyond = parity(Paired(n=1000, b=0, c=6), TOLERANCE)
    assert beyond["outcome"] == FAIL
    # Significant but within the tolerance is not a fail: 60 losses in 100,000 examples.
    small = parity(Paired(n=100_000, b=0, c=60), TOLERANCE)
    assert small["p_value"] < 1e-10 and small["outcome"] == PASS


def test_the_bootstrap_interval_is_deterministic_and_brackets_the_estimate():
    p = Paired(n=500, b=12, c=20)
    assert paired_interval(p) == paired_interval(p)
    lo, hi = paired_interval(p)
    assert lo < p.difference < hi
    # Normal approximation of the same interval: within a couple of resampling steps.
    se = math.sqrt((p.b + p.c) / p.n - p.difference**2) / math.sqrt(p.n)
    assert lo == pytest.approx(p.difference - 1.96 * se, abs=0.004)
    assert hi == pytest.approx(p.difference + 1.96 * se, abs=0.004)
    assert eval_size_needed(Paired(n=10, b=0, c=0), TOLERANCE) is None


def test_wilson_interval_and_rates_against_a_floor():
    lo, hi = proportion_interval(360, 360)
    assert hi == pytest.approx(1.0) and lo == pytest.approx(360 / (360 + 1.959963984540054**2))
    # 360 of 360 cannot prove 0.995, but never rejects: pass on the estimate.
    assert rate_at_least(360, 360, 0.995)["outcome"] == PASS
    assert rate_at_least(360, 360, 0.995, strict=True)["outcome"] == FAIL
    # 199 of 200 = the floor exactly: pass (inclusive).
    assert rate_at_least(199, 200, 0.995)["outcome"] == PASS
    # 198 of 200 is below the floor, but the interval reaches it: inconclusive.
    below = rate_at_least(198, 200, 0.995)
    assert below["outcome"] == INCONCLUSIVE and below["interval"][1] > 0.995
    # 900 of 1000 is surely below 0.995.
    assert rate_at_least(900, 1000, 0.995)["outcome"] == FAIL


def test_repeats_give_median_spread_and_trimming():
    s = median_and_spread([1.2, 1.4, 1.3, None, float("nan")])
    assert (s["median"], s["min"], s["max"], s["n"]) == (1.3, 1.2, 1.4, 3)
    assert trimmed([5, 1, 3, 2, 4]) == [2, 3, 4]
    assert trimmed([1, 2, 3, 4]) == [1, 2, 3, 4]  # fewer than five seeds: all kept

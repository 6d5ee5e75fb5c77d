"""The reference baseline of a regression label (components/training/reference.py): the bias
model recovers per-ID offsets and matches a hand-written ALS; ridge fits a linear target."""

from __future__ import annotations

import numpy as np

from amp_pipeline.components.training.reference import Reference, fit_bias, predict_bias


def _ratings(n: int = 20_000, users: int = 300, items: int = 120, seed: int = 0):
    rng = np.random.default_rng(seed)
    b_user, b_item = rng.normal(0, 0.5, users), rng.normal(0, 0.8, items)
    u, i = rng.integers(1, users, n), rng.integers(1, items, n)  # id 0: a missing cell
    y = 3.2 + b_user[u] + b_item[i] + rng.normal(0, 0.6, n)
    return u, i, y, b_user, b_item


def test_the_bias_model_beats_the_mean_and_recovers_the_offsets():
    u, i, y, b_user, b_item = _ratings()
    x = np.column_stack([rng_noise(len(y)), u, i]).astype(np.float32)  # a number, then 2 IDs
    cut = 16_000
    reference = Reference([1, 2], []).fit(x[:cut], y[:cut])
    assert reference.kind == "bias" and "2 ID column(s)" in reference.describe()
    predicted = reference.predict(x[cut:])
    rmse = np.sqrt(np.mean((predicted - y[cut:]) ** 2))
    mean_rmse = np.sqrt(np.mean((y[:cut].mean() - y[cut:]) ** 2))
    assert rmse < 0.7 < mean_rmse  # the noise is 0.6; the offsets explain the rest
    mean, (users, items) = reference.params
    assert np.corrcoef(items[1:], b_item[1:])[0, 1] > 0.95
    # An ID the train split never had, or a missing cell: the mean and the other offset.
    unseen = predict_bias(mean, [users, items], np.array([[10_000, 0]]))
    assert unseen[0] == mean


def rng_noise(n: int) -> np.ndarray:
    return np.random.default_rng(9).normal(size=n)


def test_one_round_of_the_bias_model_is_the_shrunk_mean_of_the_residuals():
    ids = np.array([[1], [1], [2]])
    y = np.array([4.0, 5.0, 1.0])
    mean, (offsets,) = fit_bias(ids, y, rounds=1)
    assert mean == np.mean(y)
    np.testing.assert_allclose(offsets[1:], [(4 + 5 - 2 * mean) / (2 + 10), (1 - mean) / (1 + 10)])


def test_ridge_on_the_numeric_columns_fits_a_linear_target_and_ignores_id_columns():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5000, 4)).astype(np.float32)
    x[:, 3] = rng.integers(0, 1000, 5000)  # token ids of a text: excluded by the caller
    y = 1.5 * x[:, 0] - 2.0 * x[:, 1] + 0.3 + rng.normal(0, 0.1, 5000)
    reference = Reference([], [0, 1, 2]).fit(x[:4000], y[:4000])
    assert reference.kind == "ridge"
    np.testing.assert_allclose(reference.params[0], [1.5, -2.0, 0.0, 0.3], atol=0.02)
    assert np.sqrt(np.mean((reference.predict(x[4000:]) - y[4000:]) ** 2)) < 0.12


def test_numbers_and_ids_together_get_ridge_then_offsets_on_its_residuals():
    """A target of a number and two IDs: ridge alone misses the IDs, the bias model alone the
    number; together they reach the noise."""
    u, i, y_ids, _, _ = _ratings()
    number = np.random.default_rng(4).normal(size=len(u))
    y = y_ids + 1.5 * number
    x = np.column_stack([number, u, i]).astype(np.float32)
    cut = 16_000

    def rmse(ref):
        return np.sqrt(np.mean((ref.fit(x[:cut], y[:cut]).predict(x[cut:]) - y[cut:]) ** 2))

    both = Reference([1, 2], [0])
    assert both.kind == "ridge + bias"
    assert rmse(both) < 0.7 < min(rmse(Reference([], [0])), rmse(Reference([1, 2], [])))
    assert "on its residuals" in both.describe()


def test_min_gain_over_baseline_is_a_rule_only_when_asked_and_the_estimate_decides():
    from amp_pipeline.components.gate import regression
    from amp_pipeline.components.gate.error_stats import ErrorPairs
    from amp_pipeline.components.gate.rules import GateConfig

    rng = np.random.default_rng(0)
    reference = np.abs(rng.normal(0, 1.0, (1, 2000)))
    better = reference * 0.9  # 10% lower mean absolute error, every example
    pairs = ErrorPairs.from_errors(better, reference)
    assert regression.beats_reference(pairs, GateConfig()) == ()  # a figure, not a rule
    (asked,) = regression.beats_reference(pairs, GateConfig(min_gain_over_baseline=0.05))
    assert (
        asked.passed and asked.value == np.float64(-0.1).round(6) or abs(asked.value + 0.1) < 1e-9
    )
    (too_much,) = regression.beats_reference(pairs, GateConfig(min_gain_over_baseline=0.15))
    assert not too_much.passed and "at least 15.00% lower" in too_much.detail
    (none,) = regression.beats_reference(None, GateConfig(min_gain_over_baseline=0.0))
    assert not none.passed  # asked for, and no baseline to compare: fails closed

"""The reference baseline of a regression label: a simple model fitted on the train split and
scored on the same eval examples as the network, so that a user sees at once whether the network
earned its keep.

- **The columns of `x` that are numbers** (the standardised numbers and the one-hot strings,
  not ids): ridge regression (RIDGE_ALPHA).
- **ID columns** (categories), on what ridge left: the bias model of recommender practice
  (Koren, Bell and Volinsky 2009), `mean + b_1[id_1] + b_2[id_2] + ...`, fitted by BIAS_ROUNDS
  rounds of alternating least squares, each offset shrunk towards 0 by BIAS_SHRINKAGE
  pseudo-counts; an id the train split did not have (or a missing cell) gets no offset.

A table of IDs alone gets the bias model, one of numbers alone ridge, one with both ridge and
then the offsets on its residuals (on nycflights13, whose delays the numbers explain, the bias
model of the tail numbers and destinations alone had R² 0.015). Predictions are clipped to the
train labels' range.

Both are fitted on the standardised label as Transform wrote it; the figures are in the label's
units. It is a figure beside `beats_mean`, not a rule, unless `--min-gain-over-baseline` asks for
one (components/gate/regression.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

BIAS_ROUNDS = 10
BIAS_SHRINKAGE = 10.0
RIDGE_ALPHA = 1.0


def fit_bias(ids: np.ndarray, y: np.ndarray, rounds: int = BIAS_ROUNDS) -> tuple[float, list]:
    """(mean, [offsets per id column]) of the bias model on integer `ids` [n, k] and `y`."""
    mean = float(y.mean())
    offsets = [np.zeros(int(ids[:, j].max()) + 1) for j in range(ids.shape[1])]
    for _ in range(rounds):
        for j in range(ids.shape[1]):
            others = sum(
                (offsets[k][ids[:, k]] for k in range(ids.shape[1]) if k != j),
                np.zeros_like(y),
            )
            residual = y - mean - others
            sums = np.bincount(ids[:, j], weights=residual, minlength=len(offsets[j]))
            counts = np.bincount(ids[:, j], minlength=len(offsets[j]))
            offsets[j] = sums / (counts + BIAS_SHRINKAGE)
            offsets[j][0] = 0.0  # a missing cell: no offset
    return mean, offsets


def predict_bias(mean: float, offsets: list, ids: np.ndarray) -> np.ndarray:
    out = np.full(len(ids), mean)
    for j, table in enumerate(offsets):
        column = ids[:, j]
        known = column < len(table)  # an id past the train split's: no offset
        out[known] += table[column[known]]
    return out


def fit_ridge(x: np.ndarray, y: np.ndarray, alpha: float = RIDGE_ALPHA) -> np.ndarray:
    """Weights (intercept last) of ridge regression on `x`, the intercept not penalised."""
    design = np.hstack([x, np.ones((len(x), 1))])
    penalty = alpha * np.eye(design.shape[1])
    penalty[-1, -1] = 0.0
    return np.linalg.solve(design.T @ design + penalty, design.T @ y)


def predict_ridge(weights: np.ndarray, x: np.ndarray) -> np.ndarray:
    return x @ weights[:-1] + weights[-1]


class Reference:
    """The fitted baseline: `predict(x)` in standardised units, and what it is."""

    def __init__(self, id_columns: list[int], dense_columns: list[int]):
        self.id_columns, self.dense_columns = id_columns, dense_columns
        parts = (["ridge"] if dense_columns else []) + (["bias"] if id_columns else [])
        self.kind = " + ".join(parts) or "mean"
        self.ridge: np.ndarray | None = None
        self.bias: tuple[float, list[Any]] | None = None
        self.low = self.high = 0.0
        self.rows = 0

    def _ridge_part(self, x: np.ndarray) -> np.ndarray:
        if self.ridge is None:
            return np.zeros(len(x))
        return predict_ridge(self.ridge, x[:, self.dense_columns].astype(np.float64))

    def fit(self, x: np.ndarray, y: np.ndarray) -> Reference:
        y = np.asarray(y, np.float64)
        self.rows = len(y)
        self.low, self.high = float(y.min()), float(y.max())
        if self.dense_columns:
            self.ridge = fit_ridge(x[:, self.dense_columns].astype(np.float64), y)
        residual = y - self._ridge_part(x)
        ids = np.rint(x[:, self.id_columns]).astype(np.int64)
        self.bias = fit_bias(ids, residual) if self.id_columns else (float(residual.mean()), [])
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        assert self.bias is not None, "predict before fit"
        ids = np.rint(x[:, self.id_columns]).astype(np.int64)
        out = self._ridge_part(x) + predict_bias(*self.bias, ids)
        return np.clip(out, self.low, self.high)

    @property
    def params(self) -> tuple:
        """(mean, offsets) of the bias model on ID columns alone; (ridge weights,) on numbers
        alone; (ridge weights, (mean, offsets)) on both."""
        if self.kind == "bias":
            assert self.bias is not None, "params before fit"
            return self.bias
        if self.kind == "ridge":
            return (self.ridge,)
        return (self.ridge, self.bias)

    def describe(self) -> str:
        ridge = (
            f"ridge regression (alpha {RIDGE_ALPHA:g}) on the {len(self.dense_columns)} numeric "
            "and one-hot columns"
        )
        bias = (
            f"a shrunk offset per ID value ({len(self.id_columns)} ID column(s), {BIAS_ROUNDS} "
            f"rounds of alternating least squares, shrinkage {BIAS_SHRINKAGE:g})"
        )
        what = {
            "ridge": ridge,
            "bias": f"bias model: train mean + {bias}",
            "ridge + bias": f"{ridge}, then {bias} on its residuals",
        }.get(self.kind, "the train mean")
        return f"{what}, fitted on {self.rows:,} train rows"

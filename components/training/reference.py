"""The reference baseline of a regression label: a simple model fitted on the train split and
scored on the same eval examples as the network, so that a user sees at once whether the network
earned its keep.

- **A table with ID columns** (categories): the bias model of recommender practice (Koren,
  Bell and Volinsky 2009), `mean + b_1[id_1] + b_2[id_2] + ...`, fitted by BIAS_ROUNDS rounds
  of alternating least squares, each offset shrunk towards 0 by BIAS_SHRINKAGE pseudo-counts;
  an id the train split did not have (or a missing cell) gets no offset. Predictions are
  clipped to the train labels' range.
- **Otherwise**: ridge regression (RIDGE_ALPHA) on the columns of `x` that are numbers (the
  standardised numbers and the one-hot strings), not ids.

Both are fitted on the standardised label as Transform wrote it; the figures are in the label's
units. It is a figure beside `beats_mean`, not a rule, unless `--min-gain-over-baseline` asks for
one (components/gate/regression.py).
"""

from __future__ import annotations

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
        self.kind = "bias" if id_columns else "ridge"
        self.params: tuple = ()
        self.low = self.high = 0.0
        self.rows = 0

    def fit(self, x: np.ndarray, y: np.ndarray) -> Reference:
        self.rows = len(y)
        self.low, self.high = float(y.min()), float(y.max())
        if self.kind == "bias":
            ids = np.rint(x[:, self.id_columns]).astype(np.int64)
            self.params = fit_bias(ids, y.astype(np.float64))
        else:
            self.params = (fit_ridge(x[:, self.dense_columns].astype(np.float64), y),)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "bias":
            ids = np.rint(x[:, self.id_columns]).astype(np.int64)
            return np.clip(predict_bias(*self.params, ids), self.low, self.high)
        return predict_ridge(self.params[0], x[:, self.dense_columns].astype(np.float64))

    def describe(self) -> str:
        if self.kind == "bias":
            return (
                f"bias model: train mean + a shrunk offset per ID value ({len(self.id_columns)} "
                f"ID column(s), {BIAS_ROUNDS} rounds of alternating least squares, shrinkage "
                f"{BIAS_SHRINKAGE:g}), fitted on {self.rows:,} train rows"
            )
        return (
            f"ridge regression (alpha {RIDGE_ALPHA:g}) on the {len(self.dense_columns)} numeric "
            f"and one-hot columns, fitted on {self.rows:,} train rows"
        )

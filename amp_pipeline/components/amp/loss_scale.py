"""Loss-scale monitor: the scale at every step, overflow steps, and collapse detection.

Keras 3's LossScaleOptimizer halves its dynamic scale at every step whose gradients are not
finite and skips that step's update. A scale that keeps falling to nothing, or a loss that stays
NaN, means training is producing garbage: the monitor stops it with a diagnosis instead.
"""

from __future__ import annotations

import math

import keras


class LossScaleCollapse(RuntimeError):
    """Training stopped: the loss scale collapsed or the loss stayed NaN."""


def diagnosis(reason: str, learning_rate: float, overflow_steps: int, steps: int) -> str:
    return (
        f"training stopped: {reason} ({overflow_steps} of {steps} steps overflowed). "
        f"Likely causes: a learning rate too high (now {learning_rate:g}: try 10x lower); "
        "an initialisation whose activations exceed float16's range (65504); "
        "NaN/inf or unscaled values in the data."
    )


class LossScaleMonitor(keras.callbacks.Callback):
    """Records the loss scale per step, counts overflow steps, stops on a collapse.

    Args:
        floor: a scale at or below this is "at its floor".
        patience: consecutive steps at the floor, or with a NaN loss, that mean a collapse.
        learning_rate: quoted in the diagnosis.
    """

    def __init__(self, floor: float = 1.0, patience: int = 20, learning_rate: float = 0.0):
        super().__init__()
        if patience < 1:
            raise ValueError(
                f"Invalid value for argument patience: must be >= 1. Received: patience={patience}"
            )
        self.floor = floor
        self.patience = patience
        self.learning_rate = learning_rate
        self.scales: list[float | None] = []
        self.losses: list[float] = []
        self.accuracies: list[float] = []
        self.overflow_steps = 0
        self.collapse: str | None = None
        self._at_floor = 0
        self._nan = 0

    def _scale(self) -> float | None:
        optimizer = self.model.optimizer
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            return float(keras.ops.convert_to_numpy(optimizer.dynamic_scale))
        return None

    def on_train_batch_end(self, batch, logs=None):
        scale = self._scale()
        loss = float((logs or {}).get("loss", float("nan")))
        previous = self.scales[-1] if self.scales else None
        if scale is not None and previous is not None and scale < previous:
            self.overflow_steps += 1
        self.scales.append(scale)
        self.losses.append(loss)
        self.accuracies.append(float((logs or {}).get("accuracy", float("nan"))))
        self._at_floor = self._at_floor + 1 if scale is not None and scale <= self.floor else 0
        self._nan = self._nan + 1 if not math.isfinite(loss) else 0
        reason = None
        if self._at_floor >= self.patience:
            reason = f"the loss scale stayed at or below {self.floor:g} for {self.patience} steps"
        elif self._nan >= self.patience:
            reason = f"the loss was NaN/inf for {self.patience} steps in a row"
        if reason and self.collapse is None:
            self.collapse = diagnosis(
                reason, self.learning_rate, self.overflow_steps, len(self.scales)
            )
            self.model.stop_training = True

    def summary(self) -> dict:
        finite = [s for s in self.scales if s is not None]
        return {
            "final": finite[-1] if finite else None,
            "min": min(finite) if finite else None,
            "overflow_steps": self.overflow_steps,
            "history": self.scales if finite else [],
            "collapsed": self.collapse is not None,
        }

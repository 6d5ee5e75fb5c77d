"""Data-parallel training for real, on this CPU: two MultiWorkerMirroredStrategy workers on
loopback against one worker at the same global batch. (MirroredStrategy over two logical CPU
devices trains and exports in tests/test_pipeline_e2e.py, on the digits run's Transform output.)"""

from __future__ import annotations

import numpy as np
import pytest

from amp_pipeline.benchmarks.speed.bench import run_one
from amp_pipeline.benchmarks.speed.configs import BenchConfig

pytestmark = pytest.mark.e2e

# Two workers each see half of every global batch and average their gradients: in exact
# arithmetic the same update as one worker on the whole batch. What differs is the order of the
# float sums (float32) and, under mixed_bfloat16, the bfloat16 rounding of the two half-batch
# activations (20 steps of the mlp, Adam 1e-3 x replicas). The tolerances are on the largest
# weight difference, and the assertion prints the measured one when it fails.
TOLERANCE = {"float32": 1e-4, "mixed_bfloat16": 3e-2}


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_two_loopback_workers_train_the_model_one_worker_trains(policy, tmp_path):
    def weights(config: BenchConfig, name: str):
        path = tmp_path / f"{name}.npz"
        figures = run_one(config, timeout=300, weights_out=str(path))
        with np.load(path) as f:
            return figures, [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]

    base = dict(model="mlp", policy=policy, steps=15, warmup_steps=2)
    # One worker at the global batch and the learning rate the two workers scale to.
    one, w1 = weights(BenchConfig(**base, batch_size=64, learning_rate=2e-3), "one")
    two, w2 = weights(BenchConfig(**base, batch_size=32, replicas=2), "two")
    assert two["replicas"] == 2 and one["replicas"] == 1
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(w1, w2, strict=True))
    assert gap < TOLERANCE[policy], f"{policy}: weights differ by {gap:.2e}"
    assert two["final_loss"] == pytest.approx(one["final_loss"], rel=0.02)
    # ...and the check can fail: a different global batch trains a different model.
    _, w_other = weights(BenchConfig(**base, batch_size=32, learning_rate=2e-3), "other")
    other_gap = max(float(np.max(np.abs(a - b))) for a, b in zip(w1, w_other, strict=True))
    assert other_gap > 2 * gap, f"{policy}: a different batch is only {other_gap:.2e} away"

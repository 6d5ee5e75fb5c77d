"""Where a DLRM-style training step spends its time, float32 vs mixed_bfloat16: the forward and
backward pass (embedding gathers, MLPs, dot interaction) against the optimizer's update, and
that update with 100,000-row tables against 1,000-row ones.

    python -m amp_pipeline.benchmarks.speed.dlrm_parts --batch-size 2048 --calls 15

The model is the pipeline's `dlrm` (components/models/builtin.py) over 13 dense features and 8
tables of `--rows` x 64 (benchmarks/configs.py's shape). Each measurement is a compiled
tf.function (no XLA), one warm-up call, the median of `--calls`; both precisions and both
table sizes are measured in one process, alternating, so that a busy machine slows all alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def measure(policy: str, rows: int, batch: int, calls: int) -> dict[str, float]:
    import keras
    import numpy as np
    import tensorflow as tf

    from amp_pipeline.benchmarks.speed.configs import DLRM_DENSE, DLRM_DIM, DLRM_TABLES
    from amp_pipeline.components.models.builtin import build_dlrm

    keras.mixed_precision.set_global_policy(policy)
    categorical = tuple(
        (f"table{i}", DLRM_DENSE + i, DLRM_DENSE + i + 1, rows) for i in range(DLRM_TABLES)
    )
    model = build_dlrm(DLRM_DENSE + DLRM_TABLES, 2, categorical=categorical, dim=DLRM_DIM)
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [rng.random((batch, DLRM_DENSE)), rng.integers(0, rows, (batch, DLRM_TABLES))], axis=1
    ).astype("float32")
    y = rng.integers(0, 2, batch)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    @tf.function
    def step():
        optimizer.apply(gradients(), model.trainable_variables)

    out = {}
    for name, fn in (("forward_backward", gradients), ("train_step", step)):
        fn()
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            result = fn()
            if result is not None:
                [g.numpy() if hasattr(g, "numpy") else g for g in result[:1]]
            times.append((time.perf_counter() - t0) * 1000)
        out[name] = statistics.median(times)
    out["optimizer_update"] = out["train_step"] - out["forward_backward"]
    keras.mixed_precision.set_global_policy("float32")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=2048)
    p.add_argument("--calls", type=int, default=15)
    p.add_argument("--rows", type=int, default=100_000)
    args = p.parse_args()
    results = {}
    for rows in (args.rows, 1_000):
        for policy in ("float32", "mixed_bfloat16"):
            results[f"{policy}/rows={rows}"] = measure(policy, rows, args.batch_size, args.calls)
    print(
        json.dumps(
            {"machine": platform.processor() or platform.machine(), "batch": args.batch_size,
             "ms": results},
            indent=2,
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()

"""Where bfloat16 helps on this CPU, op by op: ResNet-shaped convolutions (forward + backward)
and an elementwise chain, float32 vs bfloat16, batch 64, mean of 10 (50) calls after one warm-up.

    python -m amp_pipeline.benchmarks.speed.op_speedups

A one-off diagnostic for benchmarks/RESULTS.md, not part of `amp-pipeline bench`.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402 - after the log level

# (spatial side, kernel, in channels, out channels): ResNet50 stages at 96x96 input.
CONVS = ((24, 3, 64, 64), (24, 1, 256, 64), (12, 3, 128, 128), (6, 3, 256, 256), (3, 3, 512, 512))


def conv_ms(dtype: tf.DType, side: int, k: int, cin: int, cout: int, calls: int = 10) -> float:
    x = tf.cast(tf.random.normal((64, side, side, cin)), dtype)
    w = tf.cast(tf.random.normal((k, k, cin, cout)), dtype)

    @tf.function
    def step(x, w):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            loss = tf.reduce_sum(tf.cast(tf.nn.conv2d(x, w, 1, "SAME"), tf.float32))
        return tape.gradient(loss, [x, w])

    step(x, w)
    start = time.perf_counter()
    for _ in range(calls):
        step(x, w)[0].numpy()
    return (time.perf_counter() - start) / calls * 1000


def elementwise_ms(dtype: tf.DType, calls: int = 50) -> float:
    x = tf.cast(tf.random.normal((64, 24, 24, 256)), dtype)

    @tf.function
    def chain(x):
        return tf.nn.relu(x * 1.01 + 0.5)

    chain(x)
    start = time.perf_counter()
    for _ in range(calls):
        chain(x).numpy()
    return (time.perf_counter() - start) / calls * 1000


def main() -> None:
    print("| op (batch 64; convolutions forward + backward) | float32 ms | bfloat16 ms | speedup |")
    print("|---|---:|---:|---:|")
    for side, k, cin, cout in CONVS:
        f = conv_ms(tf.float32, side, k, cin, cout)
        b = conv_ms(tf.bfloat16, side, k, cin, cout)
        print(f"| conv {k}x{k} {cin}->{cout} at {side}x{side} | {f:.1f} | {b:.1f} | {f / b:.2f}x |")
    f, b = elementwise_ms(tf.float32), elementwise_ms(tf.bfloat16)
    print(f"| relu(x * a + b), 64x24x24x256 | {f:.2f} | {b:.2f} | {f / b:.2f}x |")


if __name__ == "__main__":
    main()

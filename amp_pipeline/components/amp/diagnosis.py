"""Why AMP was not faster: measurements taken in the AMP trainer, and the reasons they support.

Measured in the AMP trainer's process, after training (none of it counts in the figures):
- the time of a trivial training step (one small Dense layer, same batch, same `fit` loop):
  Keras' and TensorFlow's per-step overhead;
- the time to read one batch from the input pipeline alone;
- the reduced-precision matmul gain of this hardware, at 1024x1024 and at the model's own
  widest layer.

`why_not_faster` turns them into reasons. Each reason quotes the figures it rests on; a cause
with no measurement behind it is never given.
"""

from __future__ import annotations

import logging
import time

import numpy as np

logger = logging.getLogger(__name__)

SLOW_SPEEDUP = 1.2  # below this, the summary explains why
INPUT_BOUND_SHARE = 0.8  # reading a batch takes at least this share of a step
OVERHEAD_SHARE = 0.5  # an empty step takes at least this share of the AMP step
HARDWARE_GAIN = 1.3  # a large matmul gains at least this much: the hardware has fast units
SMALL_GAIN = 1.2  # a matmul at the model's size gains less than this: too small to profit


def trivial_step_ms(batch_size: int, width: int, num_classes: int, steps: int = 30) -> float:
    """Median time of a training step of a one-Dense-layer model in `fit` (per-step overhead)."""
    import keras
    import tensorflow as tf

    from amp_pipeline.components.amp.perf import StepTimer

    inputs = keras.Input((width,))
    model = keras.Model(inputs, keras.layers.Dense(num_classes, dtype="float32")(inputs))
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(True))
    x = np.zeros((batch_size, width), "float32")
    y = np.zeros((batch_size,), "int64")
    ds = tf.data.Dataset.from_tensors((x, y)).repeat()
    timer = StepTimer(batch_size, warmup_steps=5)
    model.fit(ds, steps_per_epoch=steps + 5, epochs=1, callbacks=[timer], verbose=0)
    return timer.summary()["step_time_ms"]["p50"]


def input_ms_per_batch(dataset, batches: int = 30) -> float:
    """Mean time to produce one batch from `dataset` alone (after 3 warm-up batches)."""
    iterator = iter(dataset)
    for _ in range(3):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return (time.perf_counter() - start) * 1000.0 / batches


def _matmul_ms(m: int, k: int, n: int, dtype: str, reps: int) -> float:
    import tensorflow as tf

    a = tf.cast(tf.random.normal((m, k), seed=1), dtype)
    b = tf.cast(tf.random.normal((k, n), seed=2), dtype)
    matmul = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.matmul(a, b)[:1, :1], "float32")))
    matmul(a, b).numpy()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        matmul(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return best * 1000.0


def matmul_gain(reduced: str, m: int, k: int, n: int, reps: int = 5) -> dict:
    """Float32 vs `reduced` ("bfloat16"/"float16") matmul time, best of `reps`, interleaved."""
    f32 = _matmul_ms(m, k, n, "float32", reps)
    low = _matmul_ms(m, k, n, reduced, reps)
    f32 = min(f32, _matmul_ms(m, k, n, "float32", reps))
    return {
        "shape": [m, k, n],
        "dtype": reduced,
        "float32_ms": f32,
        "reduced_ms": low,
        "gain": f32 / low if low > 0 else None,
    }


def widest_layer(model) -> int:
    """The largest `units` or `filters` of any layer in `model` (at least 1)."""
    from amp_pipeline.components.amp.rules import layers_of

    sizes = [getattr(layer, a, 0) for layer in layers_of(model) for a in ("units", "filters")]
    return max([s for s in sizes if isinstance(s, int)] + [1])


MAX_PROBE_FLOPS = 2e9  # the header's probe stays well under a second


def largest_gemm(model, batch_size: int) -> tuple[int, int, int] | None:
    """The largest matrix product one training step of `model` runs at `batch_size`, as
    (m, k, n): a Dense layer's (batch x positions, inputs, units), a convolution's (batch x
    output positions, kernel area x input channels, filters). None where no layer's shapes
    are known (a model not yet built)."""
    import math

    from amp_pipeline.components.amp.rules import layers_of

    best, best_flops = None, 0
    for layer in layers_of(model):
        kernel = getattr(layer, "kernel", None)
        if kernel is None or len(kernel.shape) < 2:
            continue
        try:
            out_shape = tuple(layer.output.shape)
        except (AttributeError, ValueError):
            continue
        shape = tuple(int(d) for d in kernel.shape)
        positions = math.prod(int(d) for d in out_shape[1:-1] if d is not None)
        m, k, n = batch_size * positions, math.prod(shape[:-1]), shape[-1]
        if m * k * n > best_flops:
            best, best_flops = (m, k, n), m * k * n
    if best is None:
        return None
    m, k, n = best
    return max(1, min(m, int(MAX_PROBE_FLOPS // max(k * n, 1)))), k, n


def recipe_probe(model, policy: str, batch_size: int) -> dict | None:
    """Before training: does this model's largest matmul gain in the AMP policy's precision on
    this hardware? {"shape", "gain", ..., "no_gain"}; None for float32 or an unbuilt model."""
    if policy not in ("mixed_bfloat16", "mixed_float16") or model is None:
        return None
    shape = largest_gemm(model, batch_size)
    if shape is None:
        return None
    reduced = "float16" if policy == "mixed_float16" else "bfloat16"
    result = matmul_gain(reduced, *shape, reps=10)
    result["no_gain"] = result["gain"] is not None and result["gain"] < SMALL_GAIN
    return result


def probe_text(probe: dict) -> str:
    """The header's line on the probe."""
    m, k, n = probe["shape"]
    said = (
        f"this model's largest matmul ({m}x{k}x{n}) gains {probe['gain']:.2f}x in "
        f"{probe['dtype']} here"
    )
    if probe["no_gain"]:
        return (
            f"{said}, under {SMALL_GAIN:.1f}x: AMP is unlikely to be faster; both twins still "
            "train, and the float32 twin ships if AMP is not faster"
        )
    return said


def measure(model, dataset, policy: str, batch_size: int, width: int, num_classes: int) -> dict:
    """Every measurement `why_not_faster` may need, taken once in the AMP trainer."""
    reduced = "float16" if policy == "mixed_float16" else "bfloat16"
    size = widest_layer(model)
    out = {
        "trivial_step_ms": trivial_step_ms(batch_size, width, num_classes),
        "input_ms_per_batch": input_ms_per_batch(dataset),
        "matmul_large": matmul_gain(reduced, 1024, 1024, 1024),
        "matmul_model": matmul_gain(reduced, batch_size, size, size, reps=20),
        "widest_layer": size,
    }
    logger.info("AMP diagnostics: %s", out)
    return out


def why_not_faster(
    speedup: float | None,
    policy: str,
    hardware_reason: str,
    fp32: dict,
    amp: dict,
    diagnostics: dict | None,
) -> dict | None:
    """The measured reasons AMP gained less than SLOW_SPEEDUP, or None when it gained enough.

    Args:
        speedup: AMP/float32 throughput ratio the gate used.
        policy: the AMP trainer's policy.
        hardware_reason: why that policy was chosen (the recipe's reason).
        fp32, amp: the trainers' figures (`step_time_ms`).
        diagnostics: `measure`'s result from the AMP trainer (None where not measured).
    """
    if speedup is not None and speedup >= SLOW_SPEEDUP:
        return None
    reasons = []
    if policy == "float32":
        reasons.append(f"no reduced-precision hardware: {hardware_reason}")
    d = diagnostics or {}
    amp_step = amp.get("step_time_ms", {}).get("p50")
    fp32_step = fp32.get("step_time_ms", {}).get("p50")
    large = d.get("matmul_large") or {}
    if policy != "float32" and large.get("gain") is not None and large["gain"] < HARDWARE_GAIN:
        reasons.append(
            f"no fast {large['dtype']} units: a 1024x1024 {large['dtype']} matmul here takes "
            f"{large['reduced_ms']:.2f} ms against {large['float32_ms']:.2f} ms in float32 "
            f"({large['gain']:.2f}x)"
        )
    if amp_step and d.get("input_ms_per_batch") is not None:
        if d["input_ms_per_batch"] >= INPUT_BOUND_SHARE * amp_step:
            reasons.append(
                f"input-bound: reading one batch takes {d['input_ms_per_batch']:.1f} ms, a whole "
                f"AMP training step {amp_step:.1f} ms (float32: {fp32_step:.1f} ms)"
            )
    if amp_step and d.get("trivial_step_ms") is not None:
        if d["trivial_step_ms"] >= OVERHEAD_SHARE * amp_step:
            reasons.append(
                f"per-step overhead dominates: a trivial training step (one small Dense layer, "
                f"same batch) takes {d['trivial_step_ms']:.1f} ms of the {amp_step:.1f} ms AMP "
                "step"
            )
    small = d.get("matmul_model") or {}
    if (
        policy != "float32"
        and large.get("gain") is not None
        and large["gain"] >= HARDWARE_GAIN
        and small.get("gain") is not None
        and small["gain"] < SMALL_GAIN
    ):
        m, k, n = small["shape"]
        reasons.append(
            f"the model is too small for the hardware: a {m}x{k}x{n} matmul (batch x its widest "
            f"layer, {d.get('widest_layer')}) gains {small['gain']:.2f}x in {small['dtype']}, "
            f"a 1024x1024 one {large['gain']:.2f}x"
        )
    if not reasons:
        reasons.append(
            "none of the measured causes applies (hardware, input, per-step overhead, size); "
            f"steps: float32 {fp32_step} ms, AMP {amp_step} ms"
        )
    return {"speedup": speedup, "threshold": SLOW_SPEEDUP, "reasons": reasons}

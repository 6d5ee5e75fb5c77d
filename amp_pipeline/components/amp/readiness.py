"""The AMP readiness check: does this model survive mixed precision, before training on it?

- Numeric probe: one forward and backward pass on a real batch under the mixed policy and under
  float32, with the same weights. It reports the first layer whose outputs become non-finite,
  or whose relative error against float32 exceeds a bound, and suggests `dtype="float32"` for it.
- Compile probe: where XLA is on, one compiled train step; a failure means the trainer falls
  back to no XLA (and says why) instead of dying.
- Tensor-core advice (the GPU recipe, mixed_float16): Dense units, Conv channels and the batch
  size that are not multiples of 8.

Every function takes a `build(policy) -> keras.Model` callable that builds the same
architecture with the same seed under a policy, so the probe never touches the model that is
trained.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from amp_pipeline.components.amp import rules as amp_rules

if TYPE_CHECKING:
    import keras

logger = logging.getLogger(__name__)

# Largest relative error (L2, against float32) of a layer's output before the probe flags it.
# A well-behaved layer stays far below: on a batch of 32 at initialisation, the largest over every
# layer of the built-in models (cnn, mlp, transformer, resnet50) was 0.010 under mixed_bfloat16
# (8-bit mantissa) and 0.0013 under mixed_float16 (11-bit mantissa).
RELATIVE_ERROR_BOUND = {"mixed_bfloat16": 0.1, "mixed_float16": 0.02}
TENSOR_CORE_MULTIPLE = 8

Builder = Callable[[str], "keras.Model"]  # Keras ships no type information: Any


@dataclasses.dataclass(frozen=True)
class LayerTrace:
    """One layer call seen in a forward pass."""

    path: str
    name: str
    cls: str
    dtype: str
    value: np.ndarray


def record_forward(model, x: np.ndarray) -> list[LayerTrace]:
    """Calls `model(x)` eagerly and records every layer's output, in the order calls finish.

    Nested layers finish before the layer that contains them, so the first bad entry is the
    innermost layer that made it.
    """
    import keras

    traces: list[LayerTrace] = []
    patched = []
    for layer in amp_rules.layers_of(model):
        if isinstance(layer, keras.Model) or layer.name == amp_rules.FLOAT32_OUTPUT:
            continue  # containers repeat their last layer; the float32 wrapper only casts
        original = layer.call

        @functools.wraps(original)
        def recorded(*args, _original=original, _layer=layer, **kwargs):
            out = _original(*args, **kwargs)
            first = out[0] if isinstance(out, list | tuple) else out
            if hasattr(first, "dtype") and hasattr(first, "shape"):
                traces.append(
                    LayerTrace(
                        getattr(_layer, "path", None) or _layer.name,
                        _layer.name,
                        type(_layer).__name__,
                        keras.backend.standardize_dtype(first.dtype),
                        np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(first, "float32"))),
                    )
                )
            return out

        layer.call = recorded
        patched.append(layer)
    try:
        model(x, training=False)
    finally:
        for layer in patched:
            del layer.call  # back to the class's method
    return traces


def relative_error(reference: np.ndarray, value: np.ndarray) -> float:
    """||value - reference|| / ||reference|| (L2); 0 for two zero tensors."""
    if reference.shape != value.shape:
        return math.nan
    ref = reference.astype(np.float64).ravel()
    diff = value.astype(np.float64).ravel() - ref
    norm = float(np.linalg.norm(ref))
    if norm == 0.0:
        return 0.0 if not np.any(diff) else math.inf
    return float(np.linalg.norm(diff) / norm)


def _grads(model, loss_fn, x, y) -> list[tuple[str, np.ndarray]]:
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    out = []
    for v, g in zip(variables, grads, strict=True):
        if g is not None:
            out.append((v.path, np.asarray(tf.cast(tf.convert_to_tensor(g), tf.float32))))
    return out


def _suggestion(trace: LayerTrace, policy: str) -> str:
    return (
        f"construct layer {trace.name!r} ({trace.cls}) with dtype='float32' so that it computes "
        f"in float32 under {policy}; loss scaling cannot fix a value the forward pass makes"
    )


def numeric_probe(build: Builder, x: np.ndarray, y: np.ndarray, policy: str, loss_fn) -> dict:
    """Forward and backward pass under `policy` and float32 with the same weights.

    Returns a dict: `ok`, `first_bad_layer` (or None), `reason`, `suggestion`, per-layer
    `layers` (path, output dtype, relative error, finite), `bound`, and the gradients'
    agreement (`gradient_cosine`, `non_finite_gradients`).
    """
    bound = RELATIVE_ERROR_BOUND.get(policy, 0.1)
    reference = build("float32")
    candidate = build(policy)
    candidate.set_weights(reference.get_weights())
    ref_traces = record_forward(reference, x)
    traces = record_forward(candidate, x)
    aligned = len(ref_traces) == len(traces) and all(
        a.cls == b.cls for a, b in zip(ref_traces, traces, strict=True)
    )
    if not aligned:  # data-dependent structure: match by path instead of by order
        by_path = {t.path: t for t in ref_traces}
        pairs = [(by_path.get(t.path), t) for t in traces]
    else:
        pairs = list(zip(ref_traces, traces, strict=True))
    layers, bad = [], None
    for ref, got in pairs:
        finite = bool(np.all(np.isfinite(got.value)))
        ref_finite = ref is not None and bool(np.all(np.isfinite(ref.value)))
        error = relative_error(ref.value, got.value) if ref is not None and finite else None
        if error is not None and math.isnan(error):
            error, ref = None, None  # not the same tensor after all: nothing to compare
        row = {
            "path": got.path,
            "class": got.cls,
            "output_dtype": got.dtype,
            "finite": finite,
            "relative_error": error,
        }
        layers.append(row)
        if bad is not None or ref is None:
            continue
        if not finite and ref_finite:
            worst = float(np.max(np.abs(ref.value)))
            why = (
                "a value inside it leaves float16's range (|x| > 65504)"
                if policy == "mixed_float16"
                else "a value inside it overflows"
            )
            bad = (
                got,
                f"layer {got.name!r} ({got.cls}) outputs non-finite values under {policy} but "
                f"finite ones in float32 (largest |output| {worst:.3g}): {why}",
            )
        elif error is not None and error > bound:
            bad = (
                got,
                f"layer {got.name!r} ({got.cls}) differs from float32 by {error:.2f} (relative "
                f"L2 error; bound {bound:g} under {policy})",
            )
    ref_grads = dict(_grads(reference, loss_fn, x, y))
    grads = _grads(candidate, loss_fn, x, y)
    non_finite = [path for path, g in grads if not np.all(np.isfinite(g))]
    a = np.concatenate([ref_grads[p].ravel() for p, _ in grads if p in ref_grads] or [np.zeros(1)])
    b = np.concatenate([g.ravel() for p, g in grads if p in ref_grads] or [np.zeros(1)])
    denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
    cosine = float(np.dot(a, b) / denominator) if denominator and np.isfinite(b).all() else None
    result = {
        "policy": policy,
        "batch": int(len(x)),
        "bound": bound,
        "ok": bad is None and not non_finite,
        "first_bad_layer": bad[0].name if bad else None,
        "first_bad_path": bad[0].path if bad else None,
        "reason": bad[1] if bad else None,
        "suggestion": _suggestion(bad[0], policy) if bad else None,
        "non_finite_gradients": non_finite[:10],
        "gradient_cosine": cosine,
        "output_dtypes": {t.path: t.dtype for t in traces},
        "layers": layers,
    }
    if bad is None and non_finite:
        result["reason"] = (
            f"gradients of {non_finite[0]} are non-finite under {policy} without loss scaling"
        )
    return result


def compile_error(error: BaseException) -> str:
    """One line from an XLA compile failure: the unsupported operations when it names them."""
    text = str(error)
    ops = re.findall(r"on XLA_\w+: (\w+) \(No registered", text)
    if ops:
        return f"unsupported operation {', '.join(dict.fromkeys(ops))} (no XLA kernel)"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(error).__name__}: {first[:300]}"


def compile_probe(build: Builder, policy: str, compile_model, x, y) -> dict:
    """One XLA-compiled train step on a throwaway model: does the compile work?

    `compile_model(model, jit_compile)` compiles a model the way the trainer does.
    Returns `{"ok": bool, "seconds": float, "error": str | None}`.
    """
    model = build(policy)
    compile_model(model, True)
    start = time.perf_counter()
    try:
        model.train_on_batch(x, y)
    except Exception as e:  # noqa: BLE001 - any compile failure means: train without XLA
        error = compile_error(e)
        logger.warning("XLA compile of one train step failed under %s: %s", policy, error)
        return {"ok": False, "seconds": time.perf_counter() - start, "error": error}
    return {"ok": True, "seconds": time.perf_counter() - start, "error": None}


def tensor_core_advice(model, batch_size: int, num_classes: int) -> list[str]:
    """Sizes that keep float16 matmuls and convolutions off the tensor cores (not multiples of
    8), for the GPU recipe: Dense units and inputs, Conv channels, the batch size. The output
    layer's width is the class count and is not listed, nor are a convolution's input
    channels (an image has 1 or 3)."""
    import keras

    final = amp_rules._final_layer(model)
    advice = []
    if batch_size % TENSOR_CORE_MULTIPLE:
        advice.append(f"batch size {batch_size} is not a multiple of 8")
    for layer in amp_rules.layers_of(model):
        if layer is final or getattr(layer, "units", None) == num_classes:
            continue
        for attr, what in (("units", "units"), ("filters", "channels")):
            value = getattr(layer, attr, None)
            if isinstance(value, int) and value % TENSOR_CORE_MULTIPLE:
                advice.append(
                    f"{type(layer).__name__} {layer.name!r} has {value} {what}: use a multiple of 8"
                )
        kernel = getattr(layer, "kernel", None)
        if isinstance(layer, keras.layers.Dense) and kernel is not None:
            fan_in = int(kernel.shape[-2])
            if fan_in % TENSOR_CORE_MULTIPLE:
                advice.append(
                    f"{type(layer).__name__} {layer.name!r} reads {fan_in} input features: pad "
                    "its input to a multiple of 8"
                )
    return advice


def readiness_report(
    build: Builder,
    compile_model,
    x: np.ndarray,
    y: np.ndarray,
    policy: str,
    xla: bool,
    gpu_recipe: bool,
    batch_size: int,
    num_classes: int,
    loss_fn,
) -> dict:
    """Everything the readiness check says about one model under one policy.

    `findings` lists one line per problem; `ok` is True when there is none. Advice
    (tensor cores) is not a problem.
    """
    numeric: dict[str, Any]
    if policy == "float32":
        numeric = {
            "ok": True,
            "skipped": "the policy is float32: no reduced precision to compare against",
        }
    else:
        numeric = numeric_probe(build, x, y, policy, loss_fn)
    compiled = compile_probe(build, policy, compile_model, x, y) if xla else None
    model = build(policy)
    advice = tensor_core_advice(model, batch_size, num_classes) if gpu_recipe else []
    observed = numeric.get("output_dtypes")
    dtypes = amp_rules.dtype_report(model, policy, observed)
    findings = []
    if not numeric["ok"]:
        findings.append(f"{numeric['reason']}. Suggested fix: {numeric['suggestion']}")
    if compiled is not None and not compiled["ok"]:
        findings.append(f"XLA cannot compile a train step: {compiled['error']}")
    findings += amp_rules.variable_dtype_warnings(model, policy)
    for row in dtypes:
        if "casts_output" in row["flags"]:
            findings.append(
                f"layer {row['layer']!r} ({row['class']}) computes in {row['compute_dtype']} but "
                f"returns {row['output_dtype']}: a hard-coded cast ignores the policy"
            )
    ignoring = [r["layer"] for r in dtypes if "float32_under_mixed" in r["flags"]]
    return {
        "policy": policy,
        "ok": not findings,
        "findings": findings,
        "numeric": numeric,
        "compile": compiled,
        "tensor_core_advice": advice,
        "float32_layers": ignoring,
        "dtype_report": dtypes,
    }


def summary(report: dict | None) -> dict | None:
    """The readiness check's verdict without its per-layer tables (those are in figures.json
    and readiness.json)."""
    if report is None:
        return None
    numeric = report.get("numeric") or {}
    return {
        "policy": report["policy"],
        "ok": report["ok"],
        "findings": report["findings"],
        "numeric": {k: v for k, v in numeric.items() if k not in ("layers", "output_dtypes")},
        "compile": report.get("compile"),
        "tensor_core_advice": report.get("tensor_core_advice", []),
        "float32_layers": report.get("float32_layers", []),
    }

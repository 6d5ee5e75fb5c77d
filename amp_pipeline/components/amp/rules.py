"""The mixed-precision rules, applied to any Keras model (built-in or the user's).

- The output is float32: a final softmax computed in bfloat16/float16 loses the small
  probabilities and the loss that reads them. `float32_output` moves the final layer to float32
  where it can, or wraps the output in a float32 layer, and says which it did.
- Variables stay float32: `variable_dtype_warnings` names every layer whose variables are not.
- `dtype_report` lists every layer, nested ones included, with its compute and variable dtype,
  and flags the layers that ignore the policy.
"""

from __future__ import annotations

import dataclasses
import logging

import keras

from amp_pipeline.components.models.user_module import ModelModuleError
from amp_pipeline.core import names

logger = logging.getLogger(__name__)

FLOAT32_OUTPUT = "float32_output"
REDUCED = ("float16", "bfloat16")


@dataclasses.dataclass(frozen=True)
class OutputFix:
    """What `float32_output` did to the model's output, for the summary.

    Attributes:
        action: "none" (already float32), "final_layer_float32" (the final layer now computes
            in float32) or "wrapped" (a float32 layer was added after the output).
        layer: the final layer's name.
        detail: one sentence for people.
    """

    action: str
    layer: str
    detail: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def layers_of(model) -> list:
    """Every layer inside `model`, nested ones included, in tracking order."""
    return list(model._flatten_layers(include_self=False, recursive=True))


def _dtype_name(dtype) -> str:
    return keras.backend.standardize_dtype(dtype)


def _final_layer(model):
    """The layer whose output is the model's output (functional models), else None."""
    outputs = getattr(model, "outputs", None)
    if not outputs or len(outputs) != 1:
        return None
    history = getattr(outputs[0], "_keras_history", None)
    return history.operation if history else None


def _uses(layer) -> int:
    """How many times `layer` is called in the functional graphs it belongs to."""
    return len(getattr(layer, "_inbound_nodes", None) or [])


def float32_output(model, width: int, policy: str) -> tuple[keras.Model, OutputFix]:
    """Makes the model's output float32 under a mixed `policy`, and says how.

    Functional models whose final layer computes in reduced precision get that layer switched
    to float32 (its variables are float32 already, so nothing else changes); a final layer
    shared with other parts of the graph, or a subclassed model, gets its output wrapped in a
    float32 linear layer instead.

    Raises:
        ModelModuleError: the model has several outputs (no single output to make float32).
    """
    import numpy as np

    probe = model(np.zeros((1, width), "float32"), training=False)
    if isinstance(probe, list | tuple | dict):
        raise ModelModuleError(
            f"model {model.name!r} has {len(probe)} outputs; the float32-output rule needs one "
            "tensor of class probabilities"
        )
    dtype = _dtype_name(probe.dtype)
    final = _final_layer(model)
    name = final.name if final is not None else model.name
    if dtype == "float32":
        return model, OutputFix("none", name, f"the output of {name!r} is float32 already")
    if final is not None and isinstance(final, keras.layers.Layer) and _uses(final) <= 1:
        final.dtype_policy = "float32"
        out = model(np.zeros((1, width), "float32"), training=False)
        if _dtype_name(out.dtype) == "float32":
            detail = (
                f"final layer {name!r} ({type(final).__name__}) computed in {dtype} under "
                f"{policy}; it now computes in float32 (its variables were float32 already)"
            )
            logger.warning("%s", detail)
            return model, OutputFix("final_layer_float32", name, detail)
        final.dtype_policy = policy  # it casts internally: wrap instead
    inputs = keras.Input((width,), name="x")
    outputs = keras.layers.Activation("linear", dtype="float32", name=FLOAT32_OUTPUT)(model(inputs))
    wrapped = keras.Model(inputs, outputs, name=model.name)
    detail = (
        f"the output of {name!r} was {dtype} under {policy}; wrapped in a float32 layer "
        f"({FLOAT32_OUTPUT!r}). A softmax inside the model still computes in {dtype}: give "
        "that layer dtype='float32' to compute it in float32"
    )
    logger.warning("%s", detail)
    return wrapped, OutputFix("wrapped", name, detail)


def variable_dtype_warnings(model, policy: str) -> list[str]:
    """Names every layer, nested ones included, with non-float32 variables under a mixed policy.

    Their small updates are lost in reduced precision.
    """
    if policy == "float32":
        return []
    warnings = []
    for layer in layers_of(model):
        own = getattr(layer, "_trainable_variables", []) + getattr(
            layer, "_non_trainable_variables", []
        )
        odd = sorted({_dtype_name(v.dtype) for v in own} - {"float32"})
        if odd:
            warnings.append(
                f"layer {layer.name!r} has {', '.join(odd)} variables under {policy} "
                f"({type(layer).__name__}): small updates are lost in low precision; keep "
                "variables float32"
            )
    for w in warnings:
        logger.warning(w)
    return warnings


def dtype_report(model, policy: str, observed: dict[str, str] | None = None) -> list[dict]:
    """Per layer (nested ones included): compute dtype, variable dtype, and flags.

    Args:
        model: the model as trained.
        policy: the global policy it was built under.
        observed: {layer path: dtype of its output} seen in a forward pass (the readiness
            probe); a layer whose output dtype differs from its compute dtype casts by itself.

    Flags: `float32_under_mixed` (the layer computes in float32 under a mixed policy: pinned,
    or it ignores the policy; no AMP speedup there), `casts_output` (a hard-coded cast),
    `non_float32_variables`.
    """
    mixed = policy != "float32"
    final = _final_layer(model)
    rows = []
    for layer in layers_of(model):
        path = getattr(layer, "path", None) or layer.name
        compute = _dtype_name(layer.compute_dtype) if layer.compute_dtype else None
        own = getattr(layer, "_trainable_variables", []) + getattr(
            layer, "_non_trainable_variables", []
        )
        variable_dtypes = sorted({_dtype_name(v.dtype) for v in own})
        flags = []
        by_design = layer is final or layer.name in (FLOAT32_OUTPUT, "logits", names.PROBABILITIES)
        if mixed and compute == "float32" and not by_design and own:
            flags.append("float32_under_mixed")
        seen = (observed or {}).get(path)
        # An integer or boolean output (token ids, a padding mask) is an index or a mask, not a
        # precision the layer chose: only a float output of another float dtype is a cast.
        floating = seen is not None and seen.startswith(("float", "bfloat"))
        if floating and compute and seen != compute and not by_design:
            flags.append("casts_output")
        if mixed and set(variable_dtypes) - {"float32"}:
            flags.append("non_float32_variables")
        rows.append(
            {
                "layer": layer.name,
                "path": path,
                "class": type(layer).__name__,
                "compute_dtype": compute,
                "variable_dtype": _dtype_name(layer.variable_dtype) if own else None,
                "output_dtype": seen,
                "flags": flags,
            }
        )
    return rows

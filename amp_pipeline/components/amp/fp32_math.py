"""What a float32 matmul means on this device: strict IEEE float32, or TF32.

TensorFlow runs float32 matmuls and convolutions as TF32 (a 10-bit mantissa) on NVIDIA Ampere
and later GPUs by default (`tf.config.experimental.enable_tensor_float_32_execution`), and
NVIDIA's published AMP speed-ups on the A100 are against TF32. A float32 twin trained that way
is not the FP32 the gate names, and AMP's ratio against it is AMP/TF32. `--fp32-math strict`
(the default) turns TF32 off in the float32 twin's process and for SideBySide's float32 bursts;
`tf32` keeps TensorFlow's default. On a CPU, or a GPU older than Ampere, there is no TF32 and
the setting changes nothing: it is recorded as "not applicable".
"""

from __future__ import annotations

STRICT, TF32 = "strict", "tf32"
MODES = (STRICT, TF32)
NOT_APPLICABLE_CPU = "not applicable on this CPU"


def tf32_capable_gpus() -> list[str]:
    """The visible GPUs of compute capability 8.0 or more (Ampere and later): where TF32 exists."""
    import tensorflow as tf

    capable = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        major = (details.get("compute_capability") or (0, 0))[0]
        if major >= 8:
            capable.append(details.get("device_name", gpu.name))
    return capable


def apply(mode: str) -> dict:
    """Sets this process's float32 math (`strict`: TF32 off; `tf32`: on, TensorFlow's default)
    and returns the record the summary, MLflow and the table show."""
    import tensorflow as tf

    if mode not in MODES:
        raise ValueError(
            f"Invalid value for argument fp32_math: expected one of {', '.join(MODES)}. "
            f"Received: fp32_math={mode!r}"
        )
    tf.config.experimental.enable_tensor_float_32_execution(mode == TF32)
    capable = tf32_capable_gpus()
    if capable:
        effective = mode
    elif tf.config.list_physical_devices("GPU"):
        effective = "not applicable on this GPU (no TF32 before Ampere)"
    else:
        effective = NOT_APPLICABLE_CPU
    return {
        "requested": mode,
        "tf32_enabled": bool(tf.config.experimental.tensor_float_32_execution_enabled()),
        "effective": effective,
        "devices": capable,
    }

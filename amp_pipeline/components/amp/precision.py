"""Hardware -> precision recipe: which mixed-precision policy, XLA setting and loss scaling to use.

The rules (measured on the project's machines; benchmarks/RESULTS.md, docs/ARCHITECTURE.md):
- NVIDIA GPU, compute capability >= 7.0 (tensor cores): mixed_float16, dynamic loss scaling, XLA.
- TPU, or a CPU with AMX-BF16 or AVX-512 BF16: mixed_bfloat16, no loss scaling, XLA off on CPU
  (XLA made every policy 1.6-4.6x slower on such a CPU: benchmarks/RESULTS.md, "XLA on CPU").
- Anything else: float32. Mixed precision there is emulated and slower than float32.

Detection is split from the decision so that tests can fake what detection sees.
"""

from __future__ import annotations

import dataclasses
import logging
import platform
from pathlib import Path

logger = logging.getLogger(__name__)

POLICIES = ("auto", "autotune", "float32", "mixed_float16", "mixed_bfloat16")
XLA_CHOICES = ("auto", "on", "off")
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


@dataclasses.dataclass(frozen=True)
class Hardware:
    """What device detection saw."""

    device: str  # "gpu", "tpu" or "cpu"
    name: str
    compute_capability: tuple[int, int] | None = None
    features: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        out = {"device": self.device, "name": self.name, "features": list(self.features)}
        if self.compute_capability is not None:
            out["compute_capability"] = ".".join(map(str, self.compute_capability))
        return out


@dataclasses.dataclass(frozen=True)
class Recipe:
    """The precision recipe for one trainer, and why it was chosen."""

    policy: str
    xla: bool
    loss_scaling: bool
    hardware: Hardware
    reason: str
    warnings: tuple[str, ...] = ()

    @property
    def is_mixed(self) -> bool:
        return self.policy != "float32"


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """Returns the CPU feature flags from /proc/cpuinfo (empty where it cannot be read)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_name(cpuinfo: str | None = None) -> str:
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return platform.processor() or "unknown CPU"
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def detect_hardware() -> Hardware:
    """Looks at the real machine: the first GPU TensorFlow sees, else the CPU."""
    import tensorflow as tf  # Imported here: detection is the only part that needs TF.

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        cc = details.get("compute_capability")
        return Hardware(
            device="gpu",
            name=details.get("device_name", gpus[0].name),
            compute_capability=tuple(cc) if cc else None,
        )
    if tf.config.list_logical_devices("TPU"):
        return Hardware(device="tpu", name="TPU")
    flags = cpu_flags()
    return Hardware(
        device="cpu",
        name=cpu_name(),
        features=tuple(sorted(f for f in flags if f in BF16_CPU_FLAGS or f.startswith("avx512"))),
    )


def _auto(hw: Hardware) -> tuple[str, bool, bool, str]:
    """The automatic choice: (policy, xla, loss_scaling, reason)."""
    if hw.device == "gpu":
        cc = hw.compute_capability or (0, 0)
        cc_text = ".".join(map(str, cc))
        if cc >= (7, 0):
            return (
                "mixed_float16",
                True,
                True,
                f"NVIDIA GPU {hw.name} with compute capability {cc_text} has float16 tensor "
                "cores: mixed_float16 with dynamic loss scaling and XLA",
            )
        return (
            "float32",
            False,
            False,
            f"GPU {hw.name} has compute capability {cc_text} < 7.0 (no tensor cores): "
            "mixed precision would not be faster, so float32",
        )
    if hw.device == "tpu":
        return "mixed_bfloat16", True, False, "TPU computes natively in bfloat16: mixed_bfloat16"
    bf16 = [f for f in BF16_CPU_FLAGS if f in hw.features]
    if bf16:
        return (
            "mixed_bfloat16",
            False,
            False,
            f"CPU {hw.name} has {', '.join(bf16)}: mixed_bfloat16 without loss scaling; "
            "XLA off (it made every policy 1.6-4.6x slower on such a CPU: benchmarks/RESULTS.md, "
            "'XLA on CPU')",
        )
    return (
        "float32",
        False,
        False,
        f"CPU {hw.name} has neither AMX-BF16 nor AVX-512 BF16: bfloat16 and float16 are "
        "emulated there and slower than float32, so float32",
    )


def choose_recipe(hw: Hardware, policy: str = "auto", xla: str = "auto") -> Recipe:
    """Chooses policy, XLA and loss scaling for `hw`, honouring explicit overrides.

    Raises:
        ValueError: if `policy` or `xla` is not one of the known values.
    """
    if policy not in POLICIES:
        raise ValueError(
            f"Invalid value for argument policy: expected one of {', '.join(POLICIES)}. "
            f"Received: policy={policy!r}"
        )
    if xla not in XLA_CHOICES:
        raise ValueError(
            f"Invalid value for argument xla: expected one of {', '.join(XLA_CHOICES)}. "
            f"Received: xla={xla!r}"
        )
    auto_policy, auto_xla, _, reason = _auto(hw)
    if policy == "autotune":
        return Recipe(
            policy="autotune",
            xla=False,
            loss_scaling=False,
            hardware=hw,
            reason=(
                "autotune: the AMP trainer measures float32 and the reduced precisions this "
                "hardware has, XLA on and off, 1-4x the batch (and thread counts on CPU) on the "
                f"real model, and trains with the fastest that keeps parity (the rule table "
                f"would pick {auto_policy}: {reason})"
            ),
        )
    chosen = auto_policy if policy == "auto" else policy
    if policy != "auto" and policy != auto_policy:
        reason = f"--policy {policy} requested (auto would pick {auto_policy}: {reason})"
    if xla == "auto":
        use_xla = auto_xla if chosen == auto_policy else (hw.device != "cpu")
    else:
        use_xla = xla == "on"
    warnings = []
    if chosen == "float32" and use_xla:
        # The AMP trainer running float32 is the baseline's program: it trains without XLA,
        # and the recipe says so (the summary, MLflow and the warnings read the recipe).
        use_xla = False
        if xla == "on":
            warnings.append(
                "--xla on applies to the AMP trainer's reduced precision; the AMP trainer runs "
                "float32 here, so it trains without XLA, like its float32 twin."
            )
    if chosen == "mixed_float16" and hw.device == "cpu":
        warnings.append(
            "mixed_float16 on a CPU: float16 maths is emulated there, convolutions can take "
            "minutes per step. Use --policy auto (mixed_bfloat16 on BF16 CPUs) instead."
        )
    if (
        chosen == "mixed_bfloat16"
        and hw.device == "cpu"
        and not any(f in hw.features for f in BF16_CPU_FLAGS)
    ):
        warnings.append(
            f"mixed_bfloat16 on CPU {hw.name} without AMX-BF16/AVX-512 BF16: bfloat16 is "
            "emulated there and usually slower than float32."
        )
    if use_xla and hw.device == "cpu":
        warnings.append(
            "XLA on a CPU made every policy 1.6-4.6x slower in benchmarks/RESULTS.md ('XLA on "
            "CPU': digits CNN and transformer, AMX Xeon)."
        )
    return Recipe(
        policy=chosen,
        xla=use_xla,
        loss_scaling=chosen == "mixed_float16",
        hardware=hw,
        reason=reason,
        warnings=tuple(warnings),
    )

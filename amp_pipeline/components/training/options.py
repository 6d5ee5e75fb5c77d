"""TrainOptions: how a trainer trains, written once.

Everything else is built from it: the Trainer's `custom_config` is its `asdict` (plus the data
spec), a `TrainSpec` is these fields plus the job's paths, the MLflow parameters are its fields,
and the CLI's training flags set it through `dest` names equal to its fields. The recipe fields
(model, policy, xla, loss scaling, device, readiness, diagnose, TFLite variants) are set per twin
by create_pipeline; the others come from the CLI and are the same for both twins. Variants are
made with `dataclasses.replace`, as Flax makes config variants from one default.
"""

from __future__ import annotations

import dataclasses
import json

from amp_pipeline.components.amp.fp32_math import MODES as FP32_MATH_MODES
from amp_pipeline.components.export.tflite import PARITY_EXAMPLES as TFLITE_PARITY_EXAMPLES
from amp_pipeline.components.export.tflite import VARIANTS as TFLITE_VARIANTS
from amp_pipeline.components.export.tflite import ParityThresholds
from amp_pipeline.components.training.distribution import DISTRIBUTIONS

SERVING_PRECISIONS = ("float32", "mixed")
# Set per twin by create_pipeline (pipeline/pipeline.py::twin_options), not by a CLI flag.
RECIPE_FIELDS = (
    "model",
    "model_options",
    "model_module",
    "policy",
    "xla",
    "loss_scaling",
    "device",
    "readiness",
    "diagnose",
    "intra_op_threads",
    "autotune_cache",
)


REGRESSION_LOSSES = ("mse", "huber")
WARM_START_MODES = ("auto", "on", "off")  # components/training/warm_start.py


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """How one trainer trains.

    Attributes:
        model: `cnn`, `mlp`, `resnet50`, `transformer` (components/models/builtin.py), or
            `module:<name>` when `model_module` is set.
        model_options: architecture options of a built-in model.
        model_module: the user's model module (a `user_module.ModuleRef` as a dict).
        policy: the Keras dtype policy (`float32`, `mixed_bfloat16`, `mixed_float16`), or `auto`
            to decide on the node the trainer runs on (Kubeflow/Vertex).
        xla: compile the train step with XLA.
        loss_scaling: dynamic loss scaling (LossScaleOptimizer).
        device: `cpu`, `gpu`, `tpu`, or `auto` (decided on the node).
        train_steps, eval_steps, batch_size, learning_rate: the training loop's.
        regression_loss: `mse` or `huber`, for a regression label (on the standardised label).
        seed: the seed of the exported model (initial weights and data order).
        seeds: how many seeds to train (`seed`, `seed` + 1, ...); the gate judges all of them.
        loss_scale_initial, loss_scale_growth_interval: the dynamic loss scale's.
        collapse_patience: steps at the loss-scale floor, or with a NaN loss, before training
            stops with a diagnosis.
        serving_precision: `float32` (the served model is rebuilt in float32 with the trained
            weights) or `mixed` (keeps the training policy).
        fp32_math: the float32 twin's matmuls: `strict` (TF32 off, the FP32 the gate names) or
            `tf32` (TensorFlow's default on Ampere and later GPUs; components/amp/fp32_math.py).
        tflite_variants: TFLite variants to build and check.
        tflite_min_agreement: smallest class agreement of float32/float16 TFLite models.
        tflite_max_int8_drop: largest accuracy drop of the int8 TFLite models.
        tflite_parity_examples: how many eval examples (the first of the eval split) each
            TFLite variant's parity is measured on; the gate's tokenizer check reads as many.
        readiness: run the AMP readiness check before training.
        diagnose: measure why AMP may not be faster, after training.
        intra_op_threads: TensorFlow's intra-op threads (0: its default); autotune sets it.
        autotune_budget_s: time the autotune probe may take (policy `autotune`).
        autotune_refresh: probe again although the cache holds a winner.
        autotune_cache: the file autotune's winners are cached in ("": none); set by the runner.
        distribution: `auto`, `none`, `mirrored` or `multiworker`
            (components/training/distribution.py); `batch_size` is then per replica.
        cpu_replicas: logical CPU devices `mirrored` uses on a machine without GPUs.
        warm_start: `on` starts both twins from the production model's weights where its
            architecture and features match (vocabularies remapped by value); `auto` does so
            for data in spans (`{SPAN}`), where each run brings new data; `off` never.
    """

    model: str = "cnn"
    model_options: dict = dataclasses.field(default_factory=dict)
    model_module: dict | None = None
    policy: str = "float32"
    xla: bool = False
    loss_scaling: bool = False
    device: str = "cpu"
    train_steps: int = 300
    eval_steps: int = 20
    batch_size: int = 64
    learning_rate: float = 1e-3
    regression_loss: str = "mse"
    seed: int = 42
    seeds: int = 1
    loss_scale_initial: float = 2.0**15
    loss_scale_growth_interval: int = 2000
    collapse_patience: int = 20
    serving_precision: str = "float32"
    fp32_math: str = "strict"
    tflite_variants: tuple[str, ...] = TFLITE_VARIANTS
    tflite_min_agreement: float = ParityThresholds.min_agreement
    tflite_max_int8_drop: float = ParityThresholds.max_int8_accuracy_drop
    tflite_parity_examples: int = TFLITE_PARITY_EXAMPLES
    readiness: bool = False
    diagnose: bool = False
    intra_op_threads: int = 0
    autotune_budget_s: float = 60.0
    autotune_refresh: bool = False
    autotune_cache: str = ""
    distribution: str = "auto"
    cpu_replicas: int = 2
    warm_start: str = "auto"

    def __post_init__(self) -> None:
        for name in (
            "train_steps",
            "eval_steps",
            "batch_size",
            "seeds",
            "loss_scale_growth_interval",
            "collapse_patience",
            "cpu_replicas",
            "tflite_parity_examples",
        ):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"Invalid value for argument {name}: must be at least 1. "
                    f"Received: {name}={getattr(self, name)!r}"
                )
        for name in ("learning_rate", "loss_scale_initial", "autotune_budget_s"):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"Invalid value for argument {name}: must be > 0. "
                    f"Received: {name}={getattr(self, name)!r}"
                )
        if self.serving_precision not in SERVING_PRECISIONS:
            raise ValueError(
                "Invalid value for argument serving_precision: expected one of "
                f"{', '.join(SERVING_PRECISIONS)}. "
                f"Received: serving_precision={self.serving_precision!r}"
            )
        if self.fp32_math not in FP32_MATH_MODES:
            raise ValueError(
                "Invalid value for argument fp32_math: expected one of "
                f"{', '.join(FP32_MATH_MODES)}. Received: fp32_math={self.fp32_math!r}"
            )
        if self.regression_loss not in REGRESSION_LOSSES:
            raise ValueError(
                "Invalid value for argument regression_loss: expected one of "
                f"{', '.join(REGRESSION_LOSSES)}. "
                f"Received: regression_loss={self.regression_loss!r}"
            )
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(
                "Invalid value for argument distribution: expected one of "
                f"{', '.join(DISTRIBUTIONS)}. Received: distribution={self.distribution!r}"
            )
        if self.warm_start not in WARM_START_MODES:
            raise ValueError(
                "Invalid value for argument warm_start: expected one of "
                f"{', '.join(WARM_START_MODES)}. Received: warm_start={self.warm_start!r}"
            )
        unknown = [v for v in self.tflite_variants if v not in TFLITE_VARIANTS]
        if unknown:
            raise ValueError(
                "Invalid value for argument tflite_variants: expected some of "
                f"{', '.join(TFLITE_VARIANTS)}. Received: tflite_variants={unknown!r}"
            )
        for name in ("tflite_min_agreement", "tflite_max_int8_drop"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(
                    f"Invalid value for argument {name}: must be in [0, 1]. "
                    f"Received: {name}={getattr(self, name)!r}"
                )

    @property
    def seed_list(self) -> list[int]:
        return [self.seed + k for k in range(self.seeds)]

    def to_config(self) -> dict:
        """The JSON-ready form (TFX custom_config, MLflow parameters)."""
        d = dataclasses.asdict(self)
        d["tflite_variants"] = list(self.tflite_variants)
        return d

    @classmethod
    def from_config(cls, d: dict) -> TrainOptions:
        """Back from `to_config` (unknown keys are ignored: custom_config carries others)."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        if "tflite_variants" in values:
            values["tflite_variants"] = tuple(values["tflite_variants"])
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class TrainSpec(TrainOptions):
    """One trainer's job: where its data and outputs are, and every field of TrainOptions, flat.

    It crosses a process boundary as JSON (`to_json`, `from_json`): the Trainer's `run_fn`
    writes it, the trainer process, autotune's probes and the side-by-side measurement read it.
    The path fields are keyword-only.

    Attributes:
        train_files, eval_files: Transform's output file patterns of each split.
        transform_output: the Transform graph's folder.
        serving_model_dir: where the serving SavedModel goes (TFX's `serving_model_dir`).
        model_run_dir: where the figures, predictions and logs go (TFX's `model_run_dir`).
        data_spec: the DataSpec (core/data_spec.py) as a dict.
        base_model: the production model's serving folder (TFX's `base_model`), where the
            twins warm-start from it (components/training/warm_start.py); else "".
    """

    _: dataclasses.KW_ONLY
    train_files: tuple[str, ...]
    eval_files: tuple[str, ...]
    transform_output: str
    serving_model_dir: str
    model_run_dir: str
    data_spec: dict
    base_model: str = ""

    @property
    def options(self) -> TrainOptions:
        return TrainOptions.from_config(dataclasses.asdict(self))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> TrainSpec:
        d = json.loads(text)
        for name in ("train_files", "eval_files", "tflite_variants"):
            d[name] = tuple(d.get(name, ()))
        return cls(**d)

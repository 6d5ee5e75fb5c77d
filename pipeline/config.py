"""Run configuration: plain frozen data, variants made with `dataclasses.replace`."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from kubeflow.beam_profiles import BeamProfile
from pipeline.csv_inspect import CsvOptions
from pipeline.ingest import DataSpec

MODELS = ("auto", "cnn", "mlp", "resnet50", "transformer")
SERVING_PRECISIONS = ("float32", "mixed")
TFLITE_VARIANTS = ("float32", "float16", "dynamic_int8", "int8")
PARITY_MODES = ("evidence", "strict")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything one `amp-pipeline run` needs.

    Attributes:
        data: input path (CSV file, TFRecord file or folder, image folder); None for the
            embedded digits.
        label: label column / feature name.
        model: `cnn`, `mlp`, `resnet50` (images, at --image-size, at least 32),
            `transformer` (one token per feature), or `auto` (cnn for images, mlp otherwise).
        model_module: the user's model module (a `.py` file or an import path defining
            `build_model(spec)`, components/model_module.py); replaces `model` when set.
        policy: AMP trainer policy: `auto` follows the hardware (see components/precision.py).
        xla: `auto`, `on` or `off` for the AMP trainer.
        output: folder for every artifact, log, the ML Metadata DB and the serving folder.
        train_steps: training steps of each trainer (the same for both).
        eval_steps: evaluation steps of each trainer's own validation pass.
        batch_size: examples per step.
        learning_rate: Adam learning rate.
        accuracy_tolerance: largest accuracy drop of AMP vs float32 that still promotes.
        min_accuracy: smallest absolute accuracy of the AMP model that still promotes.
        min_speedup: smallest AMP/float32 throughput ratio that still promotes (1.0: AMP must
            not be slower).
        amp_train_steps: train the AMP candidate for this many steps instead of
            `train_steps`: a way to see a rejection on purpose (demos, tests). None: the same.
        loss_scale_initial: initial dynamic loss scale (mixed_float16).
        loss_scale_growth_interval: finite steps before the loss scale doubles.
        collapse_patience: steps with the loss scale at its floor (1.0), or a NaN loss, after
            which training stops with a diagnosis.
        serving_latency_budget_ms: largest p99 latency of a single-example request to the
            candidate on the local server (infra validation, gRPC and REST), in milliseconds.
        serving_precision: `float32` (the served SavedModel is rebuilt in float32 with the
            trained weights; runs well on any CPU) or `mixed` (keeps the training policy).
        tflite_variants: TFLite variants to build and check (empty: none).
        tflite_min_agreement: smallest class agreement of the float32/float16 TFLite models
            with the SavedModel.
        tflite_max_int8_drop: largest accuracy drop of the int8 TFLite models.
        image_size: side length image-folder inputs are resized to.
        model_name: the served model's name: `<output>/serving/<model_name>/<version>/`.
        seed: seed shared by both trainers (same init, same data order).
        seeds: train both twins under this many seeds (seed, seed + 1, ...) and gate on all
            of them; the pushed model is the first seed's.
        parity: `evidence` (a rule the data cannot decide does not reject) or `strict` (it
            does: the interval must clear the threshold).
        speed_rounds: rounds of the side-by-side speed measurement.
        enable_cache: reuse TFX outputs whose inputs did not change.
        tracking_uri: MLflow tracking URI; None: $MLFLOW_TRACKING_URI, else a SQLite file
            under `output`.
        experiment: MLflow experiment name.
        beam: where the Beam-based components run (kubeflow/beam_profiles.py).
        csv: how CSV inputs are read (missing-value markers, delimiter, encoding, columns kept
            or dropped; pipeline/csv_inspect.py).
    """

    data: str | None = None
    label: str = "label"
    model: str = "auto"
    model_module: str | None = None
    policy: str = "auto"
    xla: str = "auto"
    output: str = "output"
    train_steps: int = 300
    eval_steps: int = 20
    batch_size: int = 64
    learning_rate: float = 1e-3
    accuracy_tolerance: float = 0.005
    min_accuracy: float = 0.0
    min_speedup: float = 1.0
    amp_train_steps: int | None = None
    loss_scale_initial: float = 2.0**15
    loss_scale_growth_interval: int = 2000
    collapse_patience: int = 20
    serving_latency_budget_ms: float = 500.0
    serving_precision: str = "float32"
    tflite_variants: tuple[str, ...] = TFLITE_VARIANTS
    tflite_min_agreement: float = 0.995
    tflite_max_int8_drop: float = 0.01
    image_size: int = 32
    model_name: str = ""
    seed: int = 42
    seeds: int = 1
    parity: str = "evidence"
    speed_rounds: int = 7
    enable_cache: bool = True
    tracking_uri: str | None = None
    experiment: str = "amp-pipeline"
    beam: BeamProfile = BeamProfile()
    csv: CsvOptions = CsvOptions()

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(
                f"Invalid value for argument model: expected one of {', '.join(MODELS)}. "
                f"Received: model={self.model!r}"
            )
        if self.parity not in PARITY_MODES:
            raise ValueError(
                f"Invalid value for argument parity: expected one of {', '.join(PARITY_MODES)}. "
                f"Received: parity={self.parity!r}"
            )
        for name in (
            "seeds",
            "speed_rounds",
            "train_steps",
            "eval_steps",
            "batch_size",
            "image_size",
            "amp_train_steps",
            "loss_scale_growth_interval",
            "collapse_patience",
        ):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(
                    f"Invalid value for argument {name}: must be at least 1. "
                    f"Received: {name}={getattr(self, name)!r}"
                )
        if not 0.0 <= self.accuracy_tolerance <= 1.0:
            raise ValueError(
                "Invalid value for argument accuracy_tolerance: must be in [0, 1]. "
                f"Received: accuracy_tolerance={self.accuracy_tolerance!r}"
            )
        if not 0.0 <= self.min_accuracy <= 1.0:
            raise ValueError(
                "Invalid value for argument min_accuracy: must be in [0, 1]. "
                f"Received: min_accuracy={self.min_accuracy!r}"
            )
        if self.serving_precision not in SERVING_PRECISIONS:
            raise ValueError(
                "Invalid value for argument serving_precision: expected one of "
                f"{', '.join(SERVING_PRECISIONS)}. "
                f"Received: serving_precision={self.serving_precision!r}"
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
        if not self.loss_scale_initial > 0:
            raise ValueError(
                "Invalid value for argument loss_scale_initial: must be > 0. "
                f"Received: loss_scale_initial={self.loss_scale_initial!r}"
            )
        if self.min_speedup < 0:
            raise ValueError(
                "Invalid value for argument min_speedup: must be >= 0. "
                f"Received: min_speedup={self.min_speedup!r}"
            )
        if not self.serving_latency_budget_ms > 0:
            raise ValueError(
                "Invalid value for argument serving_latency_budget_ms: must be > 0. "
                f"Received: serving_latency_budget_ms={self.serving_latency_budget_ms!r}"
            )
        if self.learning_rate <= 0:
            raise ValueError(
                "Invalid value for argument learning_rate: must be > 0. "
                f"Received: learning_rate={self.learning_rate!r}"
            )

    @property
    def output_dir(self) -> Path:
        return Path(self.output).resolve()

    @property
    def pipeline_root(self) -> Path:
        return self.output_dir / "tfx"

    @property
    def metadata_path(self) -> Path:
        return self.output_dir / "metadata.sqlite"

    @property
    def serving_dir(self) -> Path:
        return self.output_dir / "serving"

    @property
    def pipeline_name(self) -> str:
        """One pipeline (and so one production lineage in ML Metadata) per served model."""
        return f"amp-pipeline-{self.model_name}" if self.model_name else "amp-pipeline"

    @property
    def log_path(self) -> Path:
        return self.output_dir / "logs" / "tfx.log"


def model_name_for(config: RunConfig, data: DataSpec) -> str:
    """The served model's name: --model-name, else 'digits' or the input's file name."""
    if config.model_name:
        return config.model_name
    if config.data is None:
        return "digits"
    stem = re.sub(r"(\.csv|\.gz|\.tfrecords?|\.tfr)+$", "", data.source.rstrip("/").split("/")[-1])
    return re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_") or "model"


def model_for(config: RunConfig, data: DataSpec) -> str:
    """The model's name in figures and MLflow: a built-in name, or `module:<file or import>`."""
    if config.model_module:
        return f"module:{Path(config.model_module).name}"
    if config.model != "auto":
        return config.model
    return "cnn" if data.image_shape is not None else "mlp"


def model_options_for(config: RunConfig, model: str) -> dict:
    """Architecture options the pipeline passes to components.models.build_model."""
    if config.model_module:
        return {}
    if model == "resnet50":
        return {"resolution": max(32, config.image_size)}
    if model == "transformer":
        return {"width": 64, "heads": 4, "depth": 2}
    return {}

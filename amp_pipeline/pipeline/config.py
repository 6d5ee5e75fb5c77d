"""Run configuration: plain frozen data, variants made with `dataclasses.replace`.

Every default is written once, where it belongs: the trainers' in TrainOptions, the gate's in
GateConfig, the infra validation's latency budget here; the components take them as arguments.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from amp_pipeline.components.data.inspection import CsvOptions
from amp_pipeline.components.gate.rules import GateConfig
from amp_pipeline.components.training.options import TrainOptions
from amp_pipeline.core import names
from amp_pipeline.core.data_spec import DataSpec
from amp_pipeline.pipeline.beam import BeamProfile

MODELS = ("auto", "bert", "cnn", "dlrm", "mlp", "ngrams", "resnet50", "transformer")
BERT_SIZES = names.BERT_SIZE_NAMES
PARITY_MODES = ("evidence", "strict")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything one `amp-pipeline run` needs.

    Attributes:
        data: input path (CSV file or shards, TFRecord file or folder, image folder); None for
            the embedded digits.
        label: label column / feature name.
        model: `cnn`, `mlp`, `resnet50` (images, at --image-size, at least 32),
            `transformer` (one token per feature), `bert` (a BERT-style encoder over the text
            features), or `auto` (bert with text, cnn for images, mlp otherwise).
        bert_size: `tiny`, `mini`, `small` or `base` (BERT-base: 12 layers, 768 wide).
        model_module: the user's model module (a `.py` file or an import path defining
            `build_model(spec)`, components/models/user_module.py); replaces `model` when set.
        policy: AMP trainer policy: `auto` follows the hardware (see components/amp/precision.py).
        xla: `auto`, `on` or `off` for the AMP trainer.
        output: folder for every artifact, log, the ML Metadata DB and the serving folder.
        train: how both trainers train (steps, batch, learning rate, seeds, loss scaling,
            TFLite, ...): components/training/options.py; the recipe fields are set per twin.
        accuracy_tolerance, min_accuracy, min_speedup: the gate's thresholds (GateConfig).
        error_tolerance: a regression label's: the largest MAE rise, as a share of float32's
            (and production's) MAE, that still promotes (GateConfig).
        recall_tolerance, auc_tolerance, class_metrics: the rare class's rules (GateConfig).
        min_gain_over_baseline: regression: the shipped twin's MAE at least this share below
            the reference baseline's (GateConfig); None: a figure, not a rule.
        require_amp: ship the AMP twin or nothing (`--require-amp`); by default the float32
            twin ships when AMP loses and it passes the rules that do not compare the twins
            (components/gate/twins.py).
        parity: `evidence` (a rule the data cannot decide does not reject) or `strict`.
        speed_rounds: rounds of the side-by-side speed measurement (0: none; the speed rule
            then judges the trainers' own throughputs).
        tfma_max_examples: TFMA reads at most this many eval examples on a local run, a
            systematic sample (components/gate/evaluator.py); 0: every one. The gate's rules
            read every eval example whatever it is.
        auto_train_steps: `train.train_steps` is sized by the data (with_data_steps):
            AUTO_PASSES passes over the train split, within [AUTO_STEPS_MIN, AUTO_STEPS_MAX];
            `--train-steps` unset.
        amp_train_steps: train the AMP candidate for this many steps instead of
            `train.train_steps`: a way to see a rejection on purpose. None: the same.
        serving_latency_budget_ms: largest p99 latency of a single-example request to the
            candidate on the local server (infra validation), in milliseconds.
        image_size: side length image-folder inputs are resized to.
        model_name: the served model's name: `<output>/serving/<model_name>/<version>/`.
        enable_cache: reuse TFX outputs whose inputs did not change.
        tracking_uri: MLflow tracking URI; None: $MLFLOW_TRACKING_URI, else a SQLite file
            under `output`.
        experiment: MLflow experiment name.
        beam: where the Beam-based components run (pipeline/beam.py).
        csv: how CSV inputs are read (components/data/inspection.py).
        span: with `{SPAN}` in `data`, the span to train on (None: the newest).
        rolling_spans: with `{SPAN}`, how many consecutive spans, ending at `span`, to train on.
        drift: with `{SPAN}`, what a drift between the newest span and the one before does:
            `warn`, or `fail` (the run stops before training; components/data/spans/drift.py).
    """

    data: str | None = None
    label: str = "label"
    model: str = "auto"
    model_module: str | None = None
    bert_size: str = "tiny"
    policy: str = "auto"
    xla: str = "auto"
    output: str = "output"
    train: TrainOptions = TrainOptions()
    accuracy_tolerance: float = GateConfig.accuracy_tolerance
    min_accuracy: float = GateConfig.min_accuracy
    min_speedup: float = GateConfig.min_speedup
    error_tolerance: float = GateConfig.error_tolerance
    min_gain_over_baseline: float | None = None
    require_amp: bool = False
    recall_tolerance: float = GateConfig.recall_tolerance
    auc_tolerance: float = GateConfig.auc_tolerance
    class_metrics: str = GateConfig.class_metrics
    parity: str = "evidence"
    speed_rounds: int = 7
    tfma_max_examples: int = 50_000  # components/gate/evaluator.py MAX_EXAMPLES
    amp_train_steps: int | None = None
    auto_train_steps: bool = False
    serving_latency_budget_ms: float = 500.0
    image_size: int = 32
    model_name: str = ""
    enable_cache: bool = True
    tracking_uri: str | None = None
    experiment: str = "amp-pipeline"
    beam: BeamProfile = BeamProfile()
    csv: CsvOptions = CsvOptions()
    span: int | None = None
    rolling_spans: int = 1
    drift: str = "warn"

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(
                f"Invalid value for argument model: expected one of {', '.join(MODELS)}. "
                f"Received: model={self.model!r}"
            )
        if self.bert_size not in BERT_SIZES:
            raise ValueError(
                f"Invalid value for argument bert_size: expected one of {', '.join(BERT_SIZES)}. "
                f"Received: bert_size={self.bert_size!r}"
            )
        if self.parity not in PARITY_MODES:
            raise ValueError(
                f"Invalid value for argument parity: expected one of {', '.join(PARITY_MODES)}. "
                f"Received: parity={self.parity!r}"
            )
        for name in ("speed_rounds", "tfma_max_examples"):
            if getattr(self, name) < 0:
                raise ValueError(
                    f"Invalid value for argument {name}: must be 0 (none) or more. "
                    f"Received: {name}={getattr(self, name)!r}"
                )
        for name in ("image_size", "amp_train_steps"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(
                    f"Invalid value for argument {name}: must be at least 1. "
                    f"Received: {name}={getattr(self, name)!r}"
                )
        GateConfig(  # validates
            self.accuracy_tolerance,
            self.min_accuracy,
            self.min_speedup,
            error_tolerance=self.error_tolerance,
            recall_tolerance=self.recall_tolerance,
            auc_tolerance=self.auc_tolerance,
            class_metrics=self.class_metrics,
            min_gain_over_baseline=self.min_gain_over_baseline,
        )
        if not self.serving_latency_budget_ms > 0:
            raise ValueError(
                "Invalid value for argument serving_latency_budget_ms: must be > 0. "
                f"Received: serving_latency_budget_ms={self.serving_latency_budget_ms!r}"
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


def prepared(config: RunConfig, folder: Path | None = None) -> tuple[RunConfig, DataSpec]:
    """The run's input checked and read (ingest.prepare, into `folder`, by default
    `<output>/data`), and the config with the served model's name filled in.

    Raises:
        InputError: bad data or flags (exit code 2).
    """
    from amp_pipeline.components.data import ingest

    data = ingest.prepare(
        config.data,
        config.label,
        folder or config.output_dir / "data",
        config.image_size,
        config.csv,
        config.span,
        config.rolling_spans,
    )
    return dataclasses.replace(config, model_name=model_name_for(config, data)), data


# The default training length: AUTO_PASSES passes over the train split (a fifth of the labelled
# rows is the eval split), at least AUTO_STEPS_MIN steps and at most AUTO_STEPS_MAX. A fixed 300
# steps of 64 read a third of InstEval's 58,736 train ratings (RMSE 1.253); the MLP with ID
# biases reached 1.227 after one pass, 1.220 after two and 1.235 after three, and on MovieLens
# 0.885, 0.873 and 0.882 (benchmarks/RESULTS.md, "Ratings").
AUTO_PASSES = 2
AUTO_STEPS_MIN = 300
AUTO_STEPS_MAX = 20_000
# The bag of words and word pairs learns a row of its table from the few documents that hold
# each pair: on 4,000 public reviews its eval accuracy climbed until about 9 passes and held
# to 14 (benchmarks/RESULTS.md, "Text on small data"), so it trains 10 by default.
PASSES_BY_MODEL = {"ngrams": 10}


def passes_for(model: str) -> int:
    return PASSES_BY_MODEL.get(model, AUTO_PASSES)


def auto_train_steps(data: DataSpec, batch_size: int, model: str = "") -> int:
    steps = -(-passes_for(model) * train_rows(data) // batch_size)
    return max(AUTO_STEPS_MIN, min(AUTO_STEPS_MAX, steps))


def with_data_steps(config: RunConfig, data: DataSpec) -> RunConfig:
    """The config with its training length sized by the data where `--train-steps` was not
    given."""
    if not config.auto_train_steps:
        return config
    steps = auto_train_steps(data, config.train.batch_size, model_for(config, data))
    return dataclasses.replace(config, train=dataclasses.replace(config.train, train_steps=steps))


def steps_text(config: RunConfig, data: DataSpec) -> str:
    """How the training length was chosen, for the run's header."""
    steps = config.train.train_steps
    if not config.auto_train_steps:
        return f"{steps:,} training steps (--train-steps)"
    passes = f"{passes_for(model_for(config, data))} passes over about "
    passes += f"{train_rows(data):,} train rows at batch {config.train.batch_size}"
    if steps == AUTO_STEPS_MIN:
        why = f"at least {AUTO_STEPS_MIN} ({passes} take fewer)"
    elif steps == AUTO_STEPS_MAX:
        why = f"at most {AUTO_STEPS_MAX:,} ({passes} take more)"
    else:
        why = passes
    return f"{steps:,} training steps: {why} (--train-steps sets it)"


# `--model auto` on text: the BERT-style encoder from this many labelled rows, the bag of words
# and word pairs (ngrams) below. Measured on public reviews and tweets (benchmarks/RESULTS.md,
# "Text on small data"): ngrams led the encoder by 5.8 points on 2,000 reviews, 5.2 on 5,000
# reviews and 1.9 on 8,614 tweets, and trailed it by 5.2 on 1,000 tweets and 0.9 on 4,000;
# on 19,332 tweets of three classes the encoder led fastText's words-only bag by 8.5.
TEXT_ENCODER_MIN_ROWS = 10_000


def model_for(config: RunConfig, data: DataSpec) -> str:
    """The model's name in figures and MLflow: a built-in name, or `module:<file or import>`."""
    if config.model_module:
        return f"module:{Path(config.model_module).name}"
    if config.model != "auto":
        return config.model
    if data.text_features:
        return "bert" if labelled_rows(data) >= TEXT_ENCODER_MIN_ROWS else "ngrams"
    return "cnn" if data.image_shape is not None else "mlp"


def labelled_rows(data: DataSpec) -> int:
    return data.rows - data.unlabelled_rows


def train_rows(data: DataSpec) -> int:
    """About how many rows the train split holds: four fifths of the labelled ones."""
    return labelled_rows(data) * 4 // 5


def model_reason(config: RunConfig, data: DataSpec) -> str | None:
    """Why `--model auto` chose the text model it chose, for the run's header."""
    if config.model_module or config.model != "auto" or not data.text_features:
        return None
    rows = labelled_rows(data)
    if rows >= TEXT_ENCODER_MIN_ROWS:
        return (
            f"the BERT-style encoder for text: {rows:,} labelled rows, at least "
            f"{TEXT_ENCODER_MIN_ROWS:,}, where it led a bag of words on the largest public set "
            "measured (--model ngrams chooses the bag of words and word pairs)"
        )
    return (
        f"a bag of words and word pairs (ngrams) for text: {rows:,} labelled rows, under "
        f"{TEXT_ENCODER_MIN_ROWS:,}, where it led the BERT-style encoder trained from scratch "
        "in 3 of 5 public measurements (--model bert chooses the encoder; the baseline line "
        "shows TF-IDF's accuracy)"
    )


def model_options_for(config: RunConfig, model: str) -> dict:
    """Architecture options the pipeline passes to
    amp_pipeline.components.models.builtin.build_model."""
    if config.model_module:
        return {}
    if model == "resnet50":
        return {"resolution": max(32, config.image_size)}
    if model == "transformer":
        return {"width": 64, "heads": 4, "depth": 2}
    if model == "bert":
        return {"size": config.bert_size}
    return {}

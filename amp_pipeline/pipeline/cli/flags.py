"""The CLI's flag groups, shared by the commands that need them, and their way back into config.

Every flag's `dest` is the name of the field it sets (RunConfig, TrainOptions, CsvOptions,
BeamProfile), so a parsed namespace turns into config objects without a field-by-field copy.
"""

from __future__ import annotations

import argparse
import dataclasses

from amp_pipeline.components.amp.fp32_math import MODES as FP32_MATH_MODES
from amp_pipeline.components.data.inspection import (
    AUTO_MAX_CLASSES,
    MISSING_LABEL,
    TASKS,
    CsvOptions,
)
from amp_pipeline.components.training.distribution import DISTRIBUTIONS
from amp_pipeline.components.training.options import (
    RECIPE_FIELDS,
    REGRESSION_LOSSES,
    SERVING_PRECISIONS,
    TFLITE_VARIANTS,
    WARM_START_MODES,
    TrainOptions,
)
from amp_pipeline.core import argtypes
from amp_pipeline.core.cli_help import AddsFlags, Grouped
from amp_pipeline.pipeline.beam import BEAM_RUNNERS, BeamProfile
from amp_pipeline.pipeline.cli.span_flags import add_span_flags
from amp_pipeline.pipeline.config import (
    AUTO_PASSES,
    AUTO_STEPS_MAX,
    AUTO_STEPS_MIN,
    BERT_SIZES,
    MODELS,
    PARITY_MODES,
    RunConfig,
)

POLICIES = ("auto", "autotune", "float32", "mixed_float16", "mixed_bfloat16")
XLA_CHOICES = ("auto", "on", "off")
DEFAULTS = RunConfig()
TRAIN = TrainOptions()


# How the pipeline commands' --help lays their flags out, group by group (the first name of
# each flag). A flag no group names would show under "options": tests/test_cli_docs.py fails.
GROUPS: dict[str, tuple[str, ...]] = {
    "data": (
        "--data", "--label", "--task", "--image-size", "--data-root", "--keep-columns",
        "--drop-columns", "--text-columns", "--categorical-columns", "--multi-value-columns",
        "--closed-columns", "--missing-label", "--separator", "--vocab-size", "--max-tokens",
        "--na-values", "--delimiter", "--encoding", "--span", "--rolling-spans", "--drift",
    ),
    "model and training": (
        "--model", "--bert-size", "--model-module", "--train-steps", "--amp-train-steps",
        "--batch-size", "--learning-rate", "--regression-loss", "--seed", "--seeds",
        "--distribution", "--cpu-replicas", "--warm-start",
    ),
    "AMP recipe": (
        "--policy", "--xla", "--fp32-math", "--serving-precision", "--loss-scale-initial",
        "--loss-scale-growth-interval", "--collapse-patience", "--autotune-budget-s",
        "--autotune-refresh",
    ),
    "gate": (
        "--accuracy-tolerance", "--error-tolerance", "--min-accuracy", "--min-gain-over-baseline",
        "--min-speedup", "--speed-rounds", "--recall-tolerance", "--auc-tolerance",
        "--class-metrics", "--require-amp", "--parity", "--tfma-max-examples",
        "--serving-latency-budget-ms", "--tflite-parity-examples", "--tflite-min-agreement",
        "--tflite-max-int8-drop",
    ),
    "export": ("--tflite", "--model-name"),
    "tracking": ("--tracking-uri", "--experiment"),
    "output and execution": (
        "--output", "--no-cache", "--beam", "--beam-workers", "--beam-project", "--beam-region",
        "--beam-temp-location", "--beam-job-endpoint", "--beam-environment-type",
    ),
}  # fmt: skip


def grouped(parser: argparse.ArgumentParser, **extra: tuple[str, ...]) -> Grouped:
    """`parser` with the pipeline's flag groups (and a command's own, `extra`, first)."""
    return Grouped(parser, {**{k.replace("_", " "): v for k, v in extra.items()}, **GROUPS})


def variants(text: str) -> tuple[str, ...]:
    if text == "none":
        return ()
    names = tuple(v.strip() for v in text.split(",") if v.strip())
    unknown = [v for v in names if v not in TFLITE_VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown variant {', '.join(unknown) or text!r}; choose from "
            f"{', '.join(TFLITE_VARIANTS)} or none"
        )
    return names


def add_model_flags(p: AddsFlags) -> None:
    """What is trained and how it is judged: `run` and `compile`."""
    p.add_argument("--label", default=DEFAULTS.label, help="label column (default: %(default)s)")
    p.add_argument(
        "--model",
        choices=MODELS,
        default=DEFAULTS.model,
        help="ngrams (a bag of words and word pairs) or bert for text, cnn for images, mlp "
        "for tabular, dlrm for IDs (a DLRM-style recommender); auto picks (default: "
        "%(default)s)",
    )
    p.add_argument(
        "--bert-size",
        choices=BERT_SIZES,
        default=DEFAULTS.bert_size,
        help="the BERT-style encoder's size; base is BERT-base (default: %(default)s)",
    )
    p.add_argument(
        "--model-module",
        default=None,
        metavar="PATH_OR_IMPORT",
        help="your model: a .py file or importable module defining build_model(spec) "
        "(optional hooks: preprocessing_fn, optimizer, loss); replaces --model",
    )
    p.add_argument(
        "--warm-start",
        choices=WARM_START_MODES,
        default=TRAIN.warm_start,
        help="on: both twins start from the production model's weights when its model, "
        "features and classes match (vocabularies remapped by value), else from scratch, "
        "saying why; auto: on for data in spans ({SPAN} in --data), off otherwise (a rerun "
        "stays cached); off: always from scratch (default: %(default)s)",
    )
    p.add_argument(
        "--accuracy-tolerance",
        type=argtypes.fraction,
        default=DEFAULTS.accuracy_tolerance,
        help="largest accuracy drop of AMP vs fp32 that still promotes (default: %(default)s)",
    )
    p.add_argument(
        "--error-tolerance",
        type=argtypes.non_negative,
        default=DEFAULTS.error_tolerance,
        help="regression labels: largest rise of the mean absolute error of AMP vs fp32 (and "
        "vs production), as a share of fp32's, that still promotes (default: %(default)s: 2%%)",
    )
    p.add_argument(
        "--min-gain-over-baseline",
        type=argtypes.fraction,
        default=None,
        metavar="G",
        help="regression labels: a rule that the shipped twin's mean absolute error is at least "
        "this share below the reference baseline's (ridge, then per-ID offsets on its residuals); "
        "by default the baseline is a figure in the report, not a rule",
    )
    p.add_argument(
        "--min-speedup",
        type=argtypes.non_negative,
        default=DEFAULTS.min_speedup,
        help="smallest AMP/fp32 precision ratio (median of the side-by-side rounds) that "
        "still promotes (default: %(default)s: AMP must not be slower)",
    )
    p.add_argument(
        "--recall-tolerance",
        type=argtypes.fraction,
        default=DEFAULTS.recall_tolerance,
        help="largest drop of a rare class's recall (and of the macro-averaged recall) of AMP "
        "vs fp32 that still promotes (default: %(default)s)",
    )
    p.add_argument(
        "--auc-tolerance",
        type=argtypes.fraction,
        default=DEFAULTS.auc_tolerance,
        help="binary labels: largest drop of ROC AUC and PR AUC of AMP vs fp32 that still "
        "promotes (default: %(default)s)",
    )
    p.add_argument(
        "--class-metrics",
        choices=("rare", "all"),
        default=DEFAULTS.class_metrics,
        help="recall rules for the classes under 10%% of the eval examples (rare) or for every "
        "class (all) (default: %(default)s)",
    )
    p.add_argument(
        "--require-amp",
        action="store_true",
        help="ship the AMP twin or nothing: when AMP loses (slower, or less accurate), reject "
        "the run (exit 3) instead of shipping the float32 twin (default: the float32 twin "
        "ships when it passes the rules that do not compare the twins)",
    )
    p.add_argument(
        "--parity",
        choices=PARITY_MODES,
        default=DEFAULTS.parity,
        help="evidence: an estimate beyond its threshold rejects; one within it whose 95%% "
        "interval reaches past it promotes as 'parity not proven'; strict: that rejects too, "
        "every interval must clear its threshold (default: %(default)s)",
    )
    p.add_argument(
        "--speed-rounds",
        type=argtypes.count,
        default=DEFAULTS.speed_rounds,
        help="rounds of the side-by-side speed measurement; 0: none, the speed rule then judges "
        "the trainers' own throughputs, one after the other (default: %(default)s)",
    )
    p.add_argument(
        "--tfma-max-examples",
        type=argtypes.count,
        default=DEFAULTS.tfma_max_examples,
        help="on a local run TFMA's Evaluators read at most this many eval examples, every k-th "
        "one; 0: every example. The gate's rules always read every one (default: %(default)s)",
    )
    p.add_argument(
        "--model-name", default="", help="served model name (default: 'digits' or the input's name)"
    )
    add_training_flags(p)


def add_training_flags(p: AddsFlags) -> None:
    """TrainOptions' CLI fields (dest = field name)."""
    p.add_argument(
        "--train-steps",
        type=argtypes.positive,
        default=None,
        help=f"training steps of each trainer (default: {AUTO_PASSES} passes over the train "
        f"split at --batch-size, at least {AUTO_STEPS_MIN} and at most {AUTO_STEPS_MAX:,})",
    )
    p.add_argument(
        "--batch-size", type=argtypes.positive, default=TRAIN.batch_size, help="(default: 64)"
    )
    p.add_argument(
        "--learning-rate",
        type=argtypes.positive_float,
        default=TRAIN.learning_rate,
        help="Adam learning rate of both trainers (default: %(default)s)",
    )
    p.add_argument(
        "--regression-loss",
        choices=REGRESSION_LOSSES,
        default=TRAIN.regression_loss,
        help="loss of a regression label, on the label standardised: mean squared error, or "
        "Huber for labels with outliers (default: %(default)s)",
    )
    p.add_argument("--seed", type=int, default=TRAIN.seed, help="(default: %(default)s)")
    p.add_argument(
        "--seeds",
        type=argtypes.positive,
        default=TRAIN.seeds,
        help="train both twins under this many seeds (--seed, --seed + 1, ...) and gate on all "
        "of them, every seed's pairs pooled (none dropped); from 5 seeds the report adds a "
        "trimmed mean of the per-seed differences (default: %(default)s)",
    )
    p.add_argument(
        "--loss-scale-initial",
        type=argtypes.positive_float,
        default=TRAIN.loss_scale_initial,
        help="initial dynamic loss scale for mixed_float16 (default: %(default)s)",
    )
    p.add_argument(
        "--loss-scale-growth-interval",
        type=argtypes.positive,
        default=TRAIN.loss_scale_growth_interval,
        help="finite steps before the loss scale doubles (default: %(default)s)",
    )
    p.add_argument(
        "--collapse-patience",
        type=argtypes.positive,
        default=TRAIN.collapse_patience,
        help="steps with the loss scale at its floor or a NaN loss before training stops "
        "with a diagnosis (default: %(default)s)",
    )
    p.add_argument(
        "--fp32-math",
        choices=FP32_MATH_MODES,
        default=TRAIN.fp32_math,
        help="the float32 twin's matmuls on Ampere and later GPUs: strict (TF32 off: the FP32 "
        "the gate names) or tf32 (TensorFlow's default); no effect on a CPU (default: "
        "%(default)s)",
    )
    p.add_argument(
        "--serving-precision",
        choices=SERVING_PRECISIONS,
        default=TRAIN.serving_precision,
        help="compute dtype of the served SavedModel: float32 (any CPU) or mixed (the "
        "training policy, for GPU servers) (default: %(default)s)",
    )
    p.add_argument(
        "--tflite",
        dest="tflite_variants",
        type=variants,
        default=TRAIN.tflite_variants,
        help=f"comma-separated TFLite variants of {', '.join(TFLITE_VARIANTS)}, or 'none' "
        "(default: all)",
    )
    p.add_argument(
        "--tflite-parity-examples",
        type=argtypes.positive,
        default=TRAIN.tflite_parity_examples,
        help="eval examples (the first of the eval split) each TFLite variant's parity, and the "
        "gate's tokenizer check, read (default: %(default)s)",
    )
    p.add_argument(
        "--tflite-min-agreement",
        type=argtypes.fraction,
        default=TRAIN.tflite_min_agreement,
        help="float32/float16 TFLite: smallest share of predictions equal to the SavedModel's "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--autotune-budget-s",
        type=argtypes.positive_float,
        default=TRAIN.autotune_budget_s,
        help="--policy autotune: seconds the probe of the candidate recipes may take "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--autotune-refresh",
        action="store_true",
        help="--policy autotune: probe again although the output folder caches a winner",
    )
    p.add_argument(
        "--distribution",
        choices=DISTRIBUTIONS,
        default=TRAIN.distribution,
        help="data-parallel training of both twins: mirrored (the GPUs of one machine), "
        "multiworker (the workers TF_CONFIG names), auto (multiworker when TF_CONFIG names "
        "several workers, mirrored with more than one GPU, else none); --batch-size is then "
        "per replica and the learning rate scales with the replicas (default: %(default)s)",
    )
    p.add_argument(
        "--cpu-replicas",
        type=argtypes.positive,
        default=TRAIN.cpu_replicas,
        help="--distribution mirrored without a GPU: logical CPU devices to mirror over "
        "(proves the path, adds no compute) (default: %(default)s)",
    )
    p.add_argument(
        "--tflite-max-int8-drop",
        type=argtypes.fraction,
        default=TRAIN.tflite_max_int8_drop,
        help="int8 TFLite: largest accuracy drop vs the SavedModel (default: %(default)s)",
    )


def add_beam_flags(p: AddsFlags) -> None:
    p.add_argument(
        "--beam",
        dest="beam_runner",
        choices=BEAM_RUNNERS,
        default="direct",
        help="where the Beam-based components run (default: %(default)s)",
    )
    p.add_argument(
        "--beam-workers",
        type=argtypes.positive,
        default=1,
        help="DirectRunner workers; > 1 runs them as processes (default: 1)",
    )
    p.add_argument("--beam-project", default="", help="Dataflow: GCP project")
    p.add_argument("--beam-region", default="", help="Dataflow: region")
    p.add_argument("--beam-temp-location", default="", help="Dataflow: gs:// temp folder")
    p.add_argument(
        "--beam-job-endpoint",
        default="",
        help="Flink: JobManager host:port; Spark: Beam job server host:port",
    )
    p.add_argument(
        "--beam-environment-type",
        default="DOCKER",
        help="Flink/Spark SDK workers: DOCKER, PROCESS or LOOPBACK (default: DOCKER)",
    )


def column_list(p: AddsFlags, flag: str, help: str) -> None:  # noqa: A002
    """A flag naming CSV columns, comma-separated (original or sanitised names)."""
    p.add_argument(flag, type=argtypes.names, default=(), metavar="LIST", help=help)


def add_csv_flags(p: AddsFlags) -> None:
    """How CSV inputs are read: `run`, `compile`, `check-model` and `inspect` read them alike;
    with them, which spans of a `{SPAN}` pattern."""
    add_csv_reading_flags(p)
    add_span_flags(p)
    column_list(
        p,
        "--keep-columns",
        "columns to keep as features although they look ID-like, constant or dates",
    )
    column_list(p, "--drop-columns", "columns never to use as features")
    column_list(
        p,
        "--text-columns",
        "string columns to tokenise as text, whatever they look like (by default a string "
        "column of multi-word values is text)",
    )
    column_list(
        p,
        "--categorical-columns",
        "columns to use as categories (whole values, embedded past 16 of them): strings "
        "that look like text, or integer IDs",
    )
    column_list(
        p,
        "--multi-value-columns",
        "string columns whose cells hold several values joined by --separator (by "
        "default a string column with the separator in 10%% of its values is one)",
    )
    column_list(
        p,
        "--closed-columns",
        "string columns whose values are a closed set: a value the train split does not "
        "have stops the run as drift (by default it is read as out-of-vocabulary and reported)",
    )
    p.add_argument(
        "--missing-label",
        choices=MISSING_LABEL,
        default=CsvOptions.missing_label,
        help="rows whose label is missing: drop (left out before the split, and counted) or "
        "error (the run stops, naming the first line) (default: %(default)s)",
    )
    p.add_argument(
        "--separator",
        default=CsvOptions.separator,
        help="what joins the values of a multi-valued cell (default: %(default)s)",
    )
    p.add_argument(
        "--vocab-size",
        type=int,
        default=CsvOptions.vocab_size,
        help="the largest vocabulary per text column, its most frequent tokens "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=CsvOptions.max_tokens,
        help="token ids per text value, cut or padded; 0: the 95th percentile of the lengths, "
        "a multiple of 8, at most 512 (default: %(default)s)",
    )
    p.add_argument(
        "--task",
        choices=TASKS,
        default=CsvOptions.task,
        help="what the label is: classes, or a number to predict (regression); auto: "
        f"regression for a numeric label with non-integer values or more than "
        f"{AUTO_MAX_CLASSES} distinct integers (default: %(default)s)",
    )


def add_csv_reading_flags(p: AddsFlags) -> None:
    """How a CSV file's cells are read (also `predict --csv`)."""
    p.add_argument(
        "--na-values",
        type=lambda text: tuple(v for v in text.split(",")),
        default=None,
        metavar="LIST",
        help="comma-separated cell texts that mean missing, replacing the default set "
        "(pandas': '', NA, N/A, NaN, null, #N/A, None, ...)",
    )
    p.add_argument(
        "--delimiter",
        type=argtypes.delimiter,
        default=None,
        help="field separator: ',', ';', 'tab', '|' or one character (default: sniffed)",
    )
    p.add_argument(
        "--encoding",
        type=argtypes.encoding,
        default="utf-8",
        help="text encoding of the CSV files (default: %(default)s)",
    )


def _fields(cls, args: argparse.Namespace, prefix: str = "", skip=()) -> dict:
    """The namespace's values for `cls`'s fields (dest = prefix + field name)."""
    return {
        f.name: getattr(args, prefix + f.name)
        for f in dataclasses.fields(cls)
        if f.name not in skip and hasattr(args, prefix + f.name)
    }


def run_config(args: argparse.Namespace, **overrides) -> RunConfig:
    """RunConfig from whatever flags the command has; the rest keep their defaults.

    Raises:
        ValueError: a value the config's own validation refuses.
    """
    values = _fields(RunConfig, args, skip=("train", "beam", "csv"))
    train = _fields(TrainOptions, args, skip=RECIPE_FIELDS)
    if train.get("train_steps", 0) is None:  # the default: sized by the data (auto_train_steps)
        train["train_steps"] = TRAIN.train_steps
        values["auto_train_steps"] = True
    values["train"] = TrainOptions(**train)
    if hasattr(args, "na_values"):
        values["csv"] = CsvOptions(**_fields(CsvOptions, args))
    if hasattr(args, "beam_runner"):
        values["beam"] = BeamProfile(**_fields(BeamProfile, args, prefix="beam_"))
    return RunConfig(**{**values, **overrides})

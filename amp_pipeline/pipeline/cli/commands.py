"""The pipeline's commands: `run`, `check-model`, `inspect` and `doctor`."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from amp_pipeline.core import argtypes, cli_help, names
from amp_pipeline.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REJECTED, InputError
from amp_pipeline.pipeline.cli import flags, monitor, predict


def add_parsers(sub) -> None:
    _add_run(sub)
    _add_check_model(sub)
    _add_inspect(sub)
    _add_autotune(sub)
    cli_help.command(
        sub,
        "doctor",
        "show the versions, the hardware and the precision recipe auto would pick",
        "Prints amp-pipeline's version and the stack's (TensorFlow, TFX, Keras, MLflow), the "
        "device it would train on, and the AMP recipe `--policy auto` picks there, with why.",
        ["amp-pipeline doctor"],
        (0,),
    )
    predict.add_parser(sub)
    monitor.add_parser(sub)


def _add_run(sub) -> None:
    run = flags.grouped(
        cli_help.command(
            sub,
            "run",
            "run the pipeline: train fp32 + AMP, gate, push",
            "Reads --data (the embedded digits by default), validates it, trains a float32 and "
            "an AMP twin of the same model, gates the AMP twin against the float32 one on "
            "paired evidence (its float32 twin ships when AMP loses and it qualifies), exports "
            "a SavedModel and TFLite, pushes what the gate passed and tracks it in MLflow.",
            [
                "amp-pipeline run                              # the embedded digits",
                "amp-pipeline run --data churn.csv --label churn",
                "amp-pipeline run --data reviews.csv --label sentiment --model bert",
                "amp-pipeline run --data prices.csv --label price --task regression",
                "amp-pipeline run --data ratings.csv --label rating --model dlrm",
                "amp-pipeline run @ci.args                     # flags kept in a file",
            ],
            cli_help.RUN_CODES,
        )
    )
    flags.add_model_flags(run)
    run.add_argument(
        "--data",
        help="CSV file or shards, TFRecord file/folder, or image folder (default: the embedded "
        "digits)",
    )
    run.add_argument(
        "--policy",
        choices=flags.POLICIES,
        default=flags.DEFAULTS.policy,
        help="AMP trainer policy; auto follows the hardware (default: %(default)s)",
    )
    run.add_argument(
        "--xla",
        choices=flags.XLA_CHOICES,
        default=flags.DEFAULTS.xla,
        help="XLA for the AMP trainer (default: %(default)s)",
    )
    run.add_argument(
        "--output", default=flags.DEFAULTS.output, help="output folder (default: %(default)s)"
    )
    run.add_argument(
        "--min-accuracy",
        type=argtypes.fraction,
        default=flags.DEFAULTS.min_accuracy,
        help="smallest AMP accuracy that still promotes (default: %(default)s)",
    )
    run.add_argument(
        "--serving-latency-budget-ms",
        type=argtypes.positive_float,
        default=flags.DEFAULTS.serving_latency_budget_ms,
        help="infra validation: largest p99 latency of one request to the candidate on the "
        "local server, gRPC and REST (default: %(default)s)",
    )
    run.add_argument(
        "--amp-train-steps",
        type=argtypes.positive,
        default=None,
        help="train the AMP candidate for N steps instead of --train-steps: "
        "shows a rejection on purpose (demos, tests)",
    )
    run.add_argument(
        "--image-size",
        type=argtypes.positive,
        default=flags.DEFAULTS.image_size,
        help="side length image folders are resized to (default: %(default)s)",
    )
    run.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///OUTPUT/mlflow.db)",
    )
    run.add_argument(
        "--experiment",
        default=flags.DEFAULTS.experiment,
        help="MLflow experiment (default: %(default)s)",
    )
    run.add_argument(
        "--no-cache", dest="enable_cache", action="store_false", help="rerun every component"
    )
    flags.add_beam_flags(run)
    flags.add_csv_flags(run)


def _add_check_model(sub) -> None:
    check = flags.grouped(
        cli_help.command(
            sub,
            "check-model",
            "AMP readiness of a model (numeric and XLA probes) without training it",
            "Builds your model under float32 and the AMP policy, runs one real batch through "
            "both, and names the first layer whose output differs, the layers XLA cannot "
            "compile, and what to change. Writes readiness.json.",
            [
                "amp-pipeline check-model --model-module examples/custom_layer.py",
                "amp-pipeline check-model --model-module my_model.py --data my.csv --label y",
            ],
            {
                0: "ready under the policy",
                1: "something failed",
                2: "bad input or usage",
                3: "findings: the report names the layers",
            },
        )
    )
    check.add_argument(
        "--model-module",
        required=True,
        metavar="PATH_OR_IMPORT",
        help="your model module: a .py file or an import path defining build_model",
    )
    check.add_argument(
        "--data", help="data for the probe's real batch (default: the embedded digits)"
    )
    check.add_argument("--label", default=flags.DEFAULTS.label, help="(default: %(default)s)")
    check.add_argument(
        "--policy",
        choices=("auto", "mixed_bfloat16", "mixed_float16"),
        default="auto",
        help="policy to probe; auto: the hardware's (mixed_bfloat16 where it has none); "
        "mixed_float16 is the GPU recipe, with XLA and tensor-core advice (default: auto)",
    )
    check.add_argument("--xla", choices=flags.XLA_CHOICES, default="auto", help="(default: auto)")
    check.add_argument(
        "--batch-size", type=argtypes.positive, default=flags.TRAIN.batch_size, help="(default: 64)"
    )
    check.add_argument(
        "--image-size",
        type=argtypes.positive,
        default=flags.DEFAULTS.image_size,
        help="(default: 32)",
    )
    flags.add_csv_flags(check)
    check.add_argument(
        "--output",
        default="output/check",
        help="folder for the data components' cache and readiness.json (default: %(default)s)",
    )


def _add_inspect(sub) -> None:
    inspect = flags.grouped(
        cli_help.command(
            sub,
            "inspect",
            "what the pipeline makes of --data: columns, types, missing values, exclusions",
            "Reads --data as `run` would and prints each column's kind (numeric, categorical, "
            "text, IDs, image), its missing values, what is left out and why, the label's "
            "task (classification or regression) and classes. Trains nothing.",
            [
                "amp-pipeline inspect --data churn.csv --label churn",
                "amp-pipeline inspect --data export/ --label y --drop-columns id",
            ],
            (0, 2),
        )
    )
    inspect.add_argument("--data", help="input (default: the embedded digits)")
    inspect.add_argument("--label", default=flags.DEFAULTS.label, help="(default: %(default)s)")
    inspect.add_argument(
        "--image-size",
        type=argtypes.positive,
        default=flags.DEFAULTS.image_size,
        help="(default: 32)",
    )
    flags.add_csv_flags(inspect)


def _add_autotune(sub) -> None:
    tune = flags.grouped(
        cli_help.command(
            sub,
            "autotune",
            "measure the candidate AMP recipes on the model and a real batch; the fastest "
            "that keeps parity wins",
            "Times every candidate recipe (policy, XLA, batch size, threads) on your model and a "
            "real batch, keeps those whose outputs stay within parity of float32, and caches "
            "the fastest; `run --policy autotune` then trains with it.",
            ["amp-pipeline autotune --data churn.csv --label churn"],
            (0, 1, 2),
        )
    )
    tune.add_argument("--data", help="data for the probe (default: the embedded digits)")
    tune.add_argument("--label", default=flags.DEFAULTS.label, help="(default: %(default)s)")
    tune.add_argument(
        "--model",
        choices=flags.MODELS,
        default=flags.DEFAULTS.model,
        help="the built-in model to probe (default: %(default)s)",
    )
    tune.add_argument(
        "--model-module",
        default=None,
        metavar="PATH_OR_IMPORT",
        help="your model module instead of a built-in --model (a .py file or an import path)",
    )
    tune.add_argument(
        "--image-size",
        type=argtypes.positive,
        default=flags.DEFAULTS.image_size,
        help="(default: 32)",
    )
    tune.add_argument(
        "--output",
        default="output/autotune",
        help="folder for the data components' cache, autotune.json and the winners' cache "
        "(default: %(default)s)",
    )
    flags.add_training_flags(tune)
    flags.add_csv_flags(tune)


def error(message: object) -> int:
    print(f"amp-pipeline: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_run(args: argparse.Namespace) -> int:
    from amp_pipeline.pipeline import local_runner
    from amp_pipeline.pipeline.cli.table import format_table

    try:
        config = flags.run_config(args)
    except ValueError as e:  # the config's own validation
        return error(e)
    try:
        summary = local_runner.run(config, sys.stdout)
    except InputError as e:
        return error(e)
    except local_runner.RunInterrupted as e:
        print(
            f"amp-pipeline: error: stopped: {e}; MLflow runs ended KILLED, nothing pushed "
            f"({config.output_dir / names.RUN_SUMMARY_JSON})",
            file=sys.stderr,
        )
        return e.exit_code
    except local_runner.RunFailed as e:
        print(f"amp-pipeline: error: failed: {e} (log: {e.log_path})", file=sys.stderr)
        return EXIT_FAILED
    print()
    print(format_table(summary))
    print(f"\n  summary      {config.output_dir / names.RUN_SUMMARY_JSON}")
    if summary.get("report"):
        print(f"  report       {summary['report']}")
    if summary.get("mlflow"):
        m = summary["mlflow"]
        print(
            f"  mlflow       {m['tracking_uri']} (experiment {m['experiment']}, run {m['run_id']})"
        )
        if m.get("error"):
            print(f"  mlflow       NOT RECORDED: {m['error']} (the decision stands)")
    return summary["exit_code"]


def cmd_check_model(args: argparse.Namespace) -> int:
    from amp_pipeline.pipeline.cli import check_model

    try:
        config = flags.run_config(args)
        report = check_model.check(config, sys.stdout)
    except (InputError, ValueError) as e:
        return error(e)
    print()
    print(check_model.format_report(report))
    print(f"\n  report       {config.output_dir / names.READINESS_JSON}")
    return 0 if report["ok"] else EXIT_REJECTED


def cmd_autotune(args: argparse.Namespace) -> int:
    from amp_pipeline.pipeline.cli import autotune as autotune_command

    try:
        config = flags.run_config(args)
        report = autotune_command.autotune(config, sys.stdout)
    except (InputError, ValueError) as e:
        return error(e)
    print()
    print(autotune_command.format_report(report))
    print(f"\n  report       {config.output_dir / 'autotune' / 'autotune.json'}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from amp_pipeline.components.data.report import format_data
    from amp_pipeline.pipeline.config import prepared

    try:
        config = flags.run_config(args)
        with tempfile.TemporaryDirectory() as tmp:
            _, data = prepared(config, Path(tmp))
    except (InputError, ValueError) as e:
        return error(e)
    print(format_data(data))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from amp_pipeline.components.amp.precision import choose_recipe, detect_hardware
    from amp_pipeline.core.versions import versions

    print(f"versions:     {versions()}")
    recipe = choose_recipe(detect_hardware())
    hw = recipe.hardware
    print(f"device:       {hw.device}")
    print(f"name:         {hw.name}")
    if hw.compute_capability:
        print(f"capability:   {'.'.join(map(str, hw.compute_capability))}")
    print(f"features:     {', '.join(hw.features) or 'none relevant'}")
    print(f"policy:       {recipe.policy}")
    print(f"xla:          {'on' if recipe.xla else 'off'}")
    print(f"loss scaling: {'on' if recipe.loss_scaling else 'off'}")
    print(f"reason:       {recipe.reason}")
    return 0


COMMANDS = {
    "predict": predict.cmd_predict,
    "monitor": monitor.cmd_monitor,
    "run": cmd_run,
    "check-model": cmd_check_model,
    "inspect": cmd_inspect,
    "autotune": cmd_autotune,
    "doctor": cmd_doctor,
}

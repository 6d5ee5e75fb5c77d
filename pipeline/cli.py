"""`amp-pipeline`: parses flags and calls library functions; prints the user-facing summary."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import warnings
from pathlib import Path

from benchmarks.configs import BENCH_MODELS
from kubeflow.beam_profiles import BEAM_RUNNERS, BeamProfile
from kubeflow.deployment import TARGETS
from pipeline import argtypes
from pipeline.config import MODELS, PARITY_MODES, SERVING_PRECISIONS, TFLITE_VARIANTS, RunConfig
from pipeline.csv_inspect import CsvOptions
from pipeline.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_REJECTED, InputError
from serving import cli as serving_cli

POLICIES = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
XLA_CHOICES = ("auto", "on", "off")


class Parser(argparse.ArgumentParser):
    """Usage errors as one line naming the flag, exit code 2."""

    def error(self, message: str):  # noqa: D102
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def _variants(text: str) -> tuple[str, ...]:
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


def _names(allowed: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(v.strip() for v in text.split(",") if v.strip())
        unknown = [v for v in names if v not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown value {', '.join(unknown) or text!r}; choose from {', '.join(allowed)}"
            )
        return names

    return parse


def _add_beam_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--beam",
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


def _add_csv_flags(p: argparse.ArgumentParser) -> None:
    """How CSV inputs are read: `run`, `compile` and `check-model` read them alike."""
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
    p.add_argument(
        "--keep-columns",
        type=argtypes.names,
        default=(),
        metavar="LIST",
        help="columns to keep as features although they look ID-like, constant, free text or dates",
    )
    p.add_argument(
        "--drop-columns",
        type=argtypes.names,
        default=(),
        metavar="LIST",
        help="columns never to use as features",
    )


def _csv(args: argparse.Namespace) -> CsvOptions:
    return CsvOptions(
        na_values=args.na_values,
        delimiter=args.delimiter,
        encoding=args.encoding,
        keep_columns=args.keep_columns,
        drop_columns=args.drop_columns,
    )


def _beam(args: argparse.Namespace) -> BeamProfile:
    return BeamProfile(
        runner=args.beam,
        workers=args.beam_workers,
        project=args.beam_project,
        region=args.beam_region,
        temp_location=args.beam_temp_location,
        job_endpoint=args.beam_job_endpoint,
        environment_type=args.beam_environment_type,
    )


def _add_model_flags(p: argparse.ArgumentParser, defaults: RunConfig) -> None:
    """The flags `run` and `compile` share: what is trained, how long, and the gate's rules."""
    p.add_argument("--label", default=defaults.label, help="label column (default: %(default)s)")
    p.add_argument(
        "--model",
        choices=MODELS,
        default=defaults.model,
        help="cnn for images, mlp for tabular; auto picks (default: %(default)s)",
    )
    p.add_argument(
        "--model-module",
        default=None,
        metavar="PATH_OR_IMPORT",
        help="your model: a .py file or importable module defining build_model(spec) "
        "(optional hooks: preprocessing_fn, optimizer, loss); replaces --model",
    )
    p.add_argument(
        "--train-steps",
        type=argtypes.positive,
        default=defaults.train_steps,
        help="training steps of each trainer (default: %(default)s)",
    )
    p.add_argument(
        "--accuracy-tolerance",
        type=argtypes.fraction,
        default=defaults.accuracy_tolerance,
        help="largest accuracy drop of AMP vs fp32 that still promotes (default: %(default)s)",
    )
    p.add_argument(
        "--min-speedup",
        type=argtypes.non_negative,
        default=defaults.min_speedup,
        help="smallest AMP/fp32 throughput ratio that still promotes "
        "(default: %(default)s: AMP must not be slower)",
    )
    p.add_argument(
        "--seeds",
        type=argtypes.positive,
        default=defaults.seeds,
        help="train both twins under this many seeds (--seed, --seed + 1, ...) and gate on all "
        "of them; with 5 or more the best and worst seed are dropped (default: %(default)s)",
    )
    p.add_argument(
        "--parity",
        choices=PARITY_MODES,
        default=defaults.parity,
        help="evidence: a rule the data cannot decide is inconclusive and does not reject; "
        "strict: every interval must clear its threshold (default: %(default)s)",
    )
    p.add_argument(
        "--speed-rounds",
        type=argtypes.positive,
        default=defaults.speed_rounds,
        help="rounds of the side-by-side speed measurement (default: %(default)s)",
    )
    p.add_argument(
        "--model-name", default="", help="served model name (default: 'digits' or the input's name)"
    )


def build_parser() -> Parser:
    defaults = RunConfig()
    parser = Parser(prog="amp-pipeline", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    run = sub.add_parser("run", help="run the pipeline: train fp32 + AMP, gate, push")
    _add_model_flags(run, defaults)
    run.add_argument(
        "--data",
        help="CSV file, TFRecord file/folder, or image folder (default: the embedded digits)",
    )
    run.add_argument(
        "--policy",
        choices=POLICIES,
        default=defaults.policy,
        help="AMP trainer policy; auto follows the hardware (default: %(default)s)",
    )
    run.add_argument(
        "--xla",
        choices=XLA_CHOICES,
        default=defaults.xla,
        help="XLA for the AMP trainer (default: %(default)s)",
    )
    run.add_argument(
        "--output", default=defaults.output, help="output folder (default: %(default)s)"
    )
    run.add_argument(
        "--batch-size",
        type=argtypes.positive,
        default=defaults.batch_size,
        help="(default: %(default)s)",
    )
    run.add_argument(
        "--min-accuracy",
        type=argtypes.fraction,
        default=defaults.min_accuracy,
        help="smallest AMP accuracy that still promotes (default: %(default)s)",
    )
    run.add_argument(
        "--serving-latency-budget-ms",
        type=argtypes.positive_float,
        default=defaults.serving_latency_budget_ms,
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
        "--learning-rate",
        type=argtypes.positive_float,
        default=defaults.learning_rate,
        help="Adam learning rate of both trainers (default: %(default)s)",
    )
    run.add_argument(
        "--loss-scale-initial",
        type=argtypes.positive_float,
        default=defaults.loss_scale_initial,
        help="initial dynamic loss scale for mixed_float16 (default: %(default)s)",
    )
    run.add_argument(
        "--loss-scale-growth-interval",
        type=argtypes.positive,
        default=defaults.loss_scale_growth_interval,
        help="finite steps before the loss scale doubles (default: %(default)s)",
    )
    run.add_argument(
        "--collapse-patience",
        type=argtypes.positive,
        default=defaults.collapse_patience,
        help="steps with the loss scale at its floor or a NaN loss before training stops "
        "with a diagnosis (default: %(default)s)",
    )
    run.add_argument(
        "--serving-precision",
        choices=SERVING_PRECISIONS,
        default=defaults.serving_precision,
        help="compute dtype of the served SavedModel: float32 (any CPU) or mixed (the "
        "training policy, for GPU servers) (default: %(default)s)",
    )
    run.add_argument(
        "--tflite",
        type=_variants,
        default=defaults.tflite_variants,
        help=f"comma-separated TFLite variants of {', '.join(TFLITE_VARIANTS)}, or 'none' "
        "(default: all)",
    )
    run.add_argument(
        "--tflite-min-agreement",
        type=argtypes.fraction,
        default=defaults.tflite_min_agreement,
        help="float32/float16 TFLite: smallest share of predictions equal to the SavedModel's "
        "(default: %(default)s)",
    )
    run.add_argument(
        "--tflite-max-int8-drop",
        type=argtypes.fraction,
        default=defaults.tflite_max_int8_drop,
        help="int8 TFLite: largest accuracy drop vs the SavedModel (default: %(default)s)",
    )
    run.add_argument(
        "--image-size",
        type=argtypes.positive,
        default=defaults.image_size,
        help="side length image folders are resized to (default: %(default)s)",
    )
    run.add_argument("--seed", type=int, default=defaults.seed, help="(default: %(default)s)")
    run.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///OUTPUT/mlflow.db)",
    )
    run.add_argument(
        "--experiment", default=defaults.experiment, help="MLflow experiment (default: %(default)s)"
    )
    run.add_argument("--no-cache", action="store_true", help="rerun every component")
    _add_beam_flags(run)
    _add_csv_flags(run)

    comp = sub.add_parser("compile", help="compile for Kubeflow Pipelines or Vertex AI")
    comp.add_argument("--target", choices=TARGETS, required=True)
    comp.add_argument("--image", required=True, help="component image (kubeflow/Dockerfile)")
    comp.add_argument("--pipeline-root", required=True, help="artifact root, e.g. gs://b/root")
    comp.add_argument("--output", required=True, help="the .json (vertex) or .yaml file")
    comp.add_argument(
        "--data-root",
        default="",
        help="default of the data_root parameter (default: PIPELINE_ROOT/data)",
    )
    comp.add_argument(
        "--data",
        help="a local sample of the data, for its feature layout (default: the embedded digits)",
    )
    _add_model_flags(comp, defaults)
    comp.add_argument(
        "--image-context",
        default=str(Path(__file__).resolve().parent.parent),
        help="docker build context of kubeflow/Dockerfile: a --model-module .py file is copied "
        "into its user_models/ (default: this checkout)",
    )
    comp.add_argument(
        "--machine-type",
        default="n1-standard-8",
        help="Vertex trainers' machine type (default: %(default)s)",
    )
    comp.add_argument(
        "--accelerator",
        default="NVIDIA_TESLA_T4",
        help="Vertex accelerator type, or a Kubernetes resource name such as "
        "nvidia.com/gpu on Kubeflow (default: %(default)s)",
    )
    comp.add_argument(
        "--accelerator-count",
        type=int,
        default=1,
        help="per trainer; 0 for CPU-only trainers (default: 1)",
    )
    comp.add_argument(
        "--region",
        default="us-central1",
        help="Vertex region of the training jobs (default: %(default)s)",
    )
    _add_beam_flags(comp)
    _add_csv_flags(comp)

    sub_vertex = sub.add_parser("submit", help="submit a compiled pipeline to Vertex AI")
    sub_vertex.add_argument("--target", choices=("vertex",), default="vertex")
    sub_vertex.add_argument("--job", required=True, help="the compiled PipelineJob JSON")
    sub_vertex.add_argument("--project", required=True)
    sub_vertex.add_argument("--region", required=True)
    sub_vertex.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pipeline parameter value (repeatable)",
    )
    sub_vertex.add_argument(
        "--dry-run", action="store_true", help="build the request without credentials and print it"
    )

    bench = sub.add_parser(
        "bench", help="AMP vs float32 benchmark: fresh process per configuration, median"
    )
    bench.add_argument(
        "--models",
        type=_names(BENCH_MODELS),
        default=("cnn",),
        help=f"comma-separated, of {', '.join(BENCH_MODELS)} (default: cnn)",
    )
    bench.add_argument(
        "--policies",
        type=_names(POLICIES[1:]),
        default=("float32", "mixed_bfloat16"),
        help="comma-separated; float32 is the baseline (default: float32,mixed_bfloat16)",
    )
    bench.add_argument(
        "--xla",
        type=_names(("on", "off")),
        default=("off",),
        help="comma-separated of on,off (default: off)",
    )
    bench.add_argument(
        "--batch-size", type=argtypes.positive, default=64, help="(default: %(default)s)"
    )
    bench.add_argument(
        "--image-size",
        type=argtypes.positive,
        default=96,
        help="resnet50 input side (default: %(default)s)",
    )
    bench.add_argument(
        "--steps",
        type=argtypes.positive,
        default=20,
        help="measured steps per run, after the warm-up (default: %(default)s)",
    )
    bench.add_argument(
        "--warmup-steps",
        type=argtypes.positive,
        default=3,
        help="steps excluded from the figures (default: %(default)s)",
    )
    bench.add_argument(
        "--repeats",
        type=argtypes.positive,
        default=3,
        help="runs per configuration; the median is reported (default: 3)",
    )
    bench.add_argument("--output", default="bench", help="output folder (default: %(default)s)")

    check = sub.add_parser(
        "check-model",
        help="AMP readiness of a model (numeric and XLA probes) without training it",
    )
    check.add_argument("--model-module", required=True, metavar="PATH_OR_IMPORT")
    check.add_argument(
        "--data", help="data for the probe's real batch (default: the embedded digits)"
    )
    check.add_argument("--label", default=defaults.label, help="(default: %(default)s)")
    check.add_argument(
        "--policy",
        choices=("auto", "mixed_bfloat16", "mixed_float16"),
        default="auto",
        help="policy to probe; auto: the hardware's (mixed_bfloat16 where it has none); "
        "mixed_float16 is the GPU recipe, with XLA and tensor-core advice (default: auto)",
    )
    check.add_argument("--xla", choices=XLA_CHOICES, default="auto", help="(default: auto)")
    check.add_argument(
        "--batch-size", type=argtypes.positive, default=defaults.batch_size, help="(default: 64)"
    )
    check.add_argument(
        "--image-size", type=argtypes.positive, default=defaults.image_size, help="(default: 32)"
    )
    _add_csv_flags(check)
    check.add_argument(
        "--output",
        default="output/check",
        help="folder for the data components' cache and readiness.json (default: %(default)s)",
    )

    inspect = sub.add_parser(
        "inspect",
        help="what the pipeline makes of --data: columns, types, missing values, exclusions",
    )
    inspect.add_argument("--data", help="input (default: the embedded digits)")
    inspect.add_argument("--label", default=defaults.label, help="(default: %(default)s)")
    inspect.add_argument(
        "--image-size", type=argtypes.positive, default=defaults.image_size, help="(default: 32)"
    )
    _add_csv_flags(inspect)

    sub.add_parser("doctor", help="show the hardware and the precision recipe auto would pick")
    serving_cli.add_parsers(sub)
    return parser


def _config(args: argparse.Namespace) -> RunConfig:
    return RunConfig(
        data=args.data,
        label=args.label,
        model=args.model,
        model_module=args.model_module,
        policy=args.policy,
        xla=args.xla,
        output=args.output,
        train_steps=args.train_steps,
        batch_size=args.batch_size,
        accuracy_tolerance=args.accuracy_tolerance,
        min_accuracy=args.min_accuracy,
        min_speedup=args.min_speedup,
        serving_latency_budget_ms=args.serving_latency_budget_ms,
        amp_train_steps=args.amp_train_steps,
        learning_rate=args.learning_rate,
        loss_scale_initial=args.loss_scale_initial,
        loss_scale_growth_interval=args.loss_scale_growth_interval,
        collapse_patience=args.collapse_patience,
        serving_precision=args.serving_precision,
        tflite_variants=args.tflite,
        tflite_min_agreement=args.tflite_min_agreement,
        tflite_max_int8_drop=args.tflite_max_int8_drop,
        image_size=args.image_size,
        model_name=args.model_name,
        seed=args.seed,
        seeds=args.seeds,
        parity=args.parity,
        speed_rounds=args.speed_rounds,
        enable_cache=not args.no_cache,
        tracking_uri=args.tracking_uri,
        experiment=args.experiment,
        beam=_beam(args),
        csv=_csv(args),
    )


def cmd_run(args: argparse.Namespace) -> int:
    from pipeline import local_runner
    from pipeline.summary import format_table

    try:
        config = _config(args)
    except ValueError as e:  # RunConfig's own validation
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        summary = local_runner.run(config, sys.stdout)
    except InputError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except local_runner.RunInterrupted as e:
        print(
            f"amp-pipeline: stopped: {e}; MLflow runs ended KILLED, nothing pushed "
            f"({config.output_dir / 'run_summary.json'})",
            file=sys.stderr,
        )
        return e.exit_code
    except local_runner.RunFailed as e:
        print(f"amp-pipeline: failed: {e} (log: {e.log_path})", file=sys.stderr)
        return EXIT_FAILED
    print()
    print(format_table(summary))
    print(f"\n  summary      {config.output_dir / 'run_summary.json'}")
    if summary.get("report"):
        print(f"  report       {summary['report']}")
    if summary.get("mlflow"):
        m = summary["mlflow"]
        print(
            f"  mlflow       {m['tracking_uri']} (experiment {m['experiment']}, run {m['run_id']})"
        )
    return summary["exit_code"]


def cmd_check_model(args: argparse.Namespace) -> int:
    from pipeline import check_model

    config = RunConfig(
        data=args.data,
        label=args.label,
        model_module=args.model_module,
        policy=args.policy,
        xla=args.xla,
        batch_size=args.batch_size,
        image_size=args.image_size,
        output=args.output,
        csv=_csv(args),
    )
    try:
        report = check_model.check(config, sys.stdout)
    except InputError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print()
    print(check_model.format_report(report))
    print(f"\n  report       {config.output_dir / 'readiness.json'}")
    return 0 if report["ok"] else EXIT_REJECTED


def cmd_bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    from benchmarks import bench

    if "float32" not in args.policies:
        print(
            "amp-pipeline: error: --policies must include float32 (the baseline)", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    configs = bench.bench_configs(
        list(args.models),
        list(args.policies),
        [x == "on" for x in args.xla],
        args.batch_size,
        args.image_size,
        args.steps,
        args.warmup_steps,
    )
    print(
        f"amp-pipeline bench: {len(configs)} configurations x {args.repeats} rounds, "
        "each run in a fresh process"
    )
    try:
        result = bench.run_bench(configs, args.repeats)
    except RuntimeError as e:
        print(f"amp-pipeline: failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    result["machine"] = bench.machine()
    paths = bench.write_outputs(result, Path(args.output))
    print()
    print(paths["md"].read_text())
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kubeflow.compile import compile_pipeline
    from kubeflow.deployment import Deployment
    from pipeline import ingest
    from pipeline.config import model_name_for

    try:
        deployment = Deployment(
            target=args.target,
            image=args.image,
            pipeline_root=args.pipeline_root,
            data_root=args.data_root or args.pipeline_root.rstrip("/") + "/data",
            machine_type=args.machine_type,
            accelerator=args.accelerator,
            accelerator_count=args.accelerator_count,
            region=args.region,
        )
        config = RunConfig(
            data=args.data,
            label=args.label,
            model=args.model,
            model_module=args.model_module,
            model_name=args.model_name,
            train_steps=args.train_steps,
            accuracy_tolerance=args.accuracy_tolerance,
            min_speedup=args.min_speedup,
            seeds=args.seeds,
            parity=args.parity,
            speed_rounds=args.speed_rounds,
            csv=_csv(args),
        )
        with tempfile.TemporaryDirectory() as tmp:
            data = ingest.prepare(config.data, config.label, Path(tmp), csv_options=config.csv)
        config = dataclasses.replace(config, model_name=model_name_for(config, data))
        beam_args = _beam(args).args()
        module_ref, copied = None, None
        if args.model_module:
            from kubeflow import user_module
            from pipeline import user_model

            checked = user_model.check(args.model_module, data)
            module_ref, copied = user_module.package(checked, Path(args.image_context))
    except (InputError, ValueError) as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = compile_pipeline(config, data, deployment, Path(args.output), beam_args, module_ref)
    print(f"compiled {config.pipeline_name} for {args.target}: {out}")
    if module_ref is not None:
        where = f"copied to {copied}: " if copied else ""
        print(
            f"model module: {where}the spec imports {module_ref.ref}; build the image "
            "(kubeflow/Dockerfile) after compiling so that it holds the module"
        )
    print("parameters: data_root, train_args (JSON TrainArgs), accuracy_tolerance")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from kubeflow.submit import submit

    params = {}
    for item in args.param:
        name, sep, value = item.partition("=")
        if not sep or not name:
            print(f"amp-pipeline: error: --param {item!r}: expected NAME=VALUE", file=sys.stderr)
            return EXIT_BAD_INPUT
        params[name] = value
    try:
        result = submit(Path(args.job), args.project, args.region, params, args.dry_run)
    except InputError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.dry_run:
        print(f"dry run: would create a PipelineJob in {result['parent']}:")
        print(json.dumps(result["pipeline_job"], indent=2))
    else:
        print(f"submitted {result['submitted']}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from pipeline import ingest
    from pipeline.data_report import format_data

    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = ingest.prepare(args.data, args.label, Path(tmp), args.image_size, _csv(args))
    except InputError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(format_data(data))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from components.precision import choose_recipe, detect_hardware

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


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # google-api-core warns on every import that Python 3.10 nears its end of support.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.")
    args = build_parser().parse_args(argv)
    commands = {
        "run": cmd_run,
        "bench": cmd_bench,
        "compile": cmd_compile,
        "check-model": cmd_check_model,
        "inspect": cmd_inspect,
        "submit": cmd_submit,
        "doctor": cmd_doctor,
        **serving_cli.COMMANDS,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

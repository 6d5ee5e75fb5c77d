"""The cluster commands: `compile` (Kubeflow Pipelines YAML or Vertex PipelineJob JSON) and
`submit` (to Vertex AI)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from amp_pipeline.core import cli_help
from amp_pipeline.core.errors import EXIT_BAD_INPUT, InputError
from amp_pipeline.kubeflow.target import TARGETS, ClusterTarget
from amp_pipeline.pipeline.cli import flags

REPO_ROOT = Path(__file__).resolve().parents[2]


def add_parsers(sub) -> None:
    comp = flags.grouped(
        cli_help.command(
            sub,
            "compile",
            "compile for Kubeflow Pipelines or Vertex AI",
            "Compiles the same pipeline `run` runs into a Kubeflow Pipelines v2 YAML or a Vertex "
            "AI PipelineJob JSON. The data layout comes from a local sample (--data); the run's "
            "flags become the pipeline's defaults, and the trainers run on the cluster's nodes "
            "(GPUs with mixed_float16 where they have them).",
            [
                "amp-pipeline compile --target vertex --image gcr.io/p/amp:1 --pipeline-root "
                "gs://b/root --output amp.json",
                "amp-pipeline compile --target kubeflow --image registry/amp:1 --pipeline-root "
                "gs://b/root --output amp.yaml --data churn.csv --label churn",
            ],
            (0, 1, 2),
        ),
        cluster=(
            "--target", "--image", "--pipeline-root", "--image-context", "--machine-type",
            "--accelerator", "--gpus-per-replica", "--trainer-replicas", "--region",
        ),
    )  # fmt: skip
    comp.add_argument(
        "--target", choices=TARGETS, required=True, help="kubeflow (KFP v2 YAML) or vertex (JSON)"
    )
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
    flags.add_model_flags(comp)
    comp.add_argument(
        "--policy",
        choices=("auto", "autotune"),
        default="auto",
        help="the AMP trainer's recipe, decided on the node it runs on: the rule table for its "
        "hardware, or autotune's measurement there (default: %(default)s)",
    )
    comp.add_argument(
        "--image-context",
        default=str(REPO_ROOT),
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
        "--gpus-per-replica",
        "--accelerator-count",
        dest="accelerator_count",
        type=int,
        default=1,
        help="accelerators per trainer machine; 0 for CPU-only trainers; more than 1 trains "
        "with MirroredStrategy (default: 1)",
    )
    comp.add_argument(
        "--trainer-replicas",
        type=int,
        default=1,
        help="machines per trainer (Vertex: a chief and N-1 workers under "
        "MultiWorkerMirroredStrategy; the global batch is --batch-size x all replicas) "
        "(default: 1)",
    )
    comp.add_argument(
        "--region",
        default="us-central1",
        help="Vertex region of the training jobs (default: %(default)s)",
    )
    flags.add_beam_flags(comp)
    flags.add_csv_flags(comp)

    submit = cli_help.command(
        sub,
        "submit",
        "submit a compiled pipeline to Vertex AI",
        "Submits a PipelineJob JSON that `compile --target vertex` wrote, once or, with "
        "--schedule, as a recurring Vertex Schedule; or, --target kubeflow, a Kubeflow package "
        "as a recurring run. Data in spans ({SPAN}) then trains on the newest span at each "
        "run. --dry-run prints the request body it would send and needs no credentials.",
        [
            "amp-pipeline submit --job amp.json --project p --region us-central1 --dry-run",
            "amp-pipeline submit --job amp.json --project p --region us-central1 --param "
            "train_args='{\"num_steps\": 2000}'",
            "amp-pipeline submit --job amp.json --project p --region us-central1 "
            "--schedule 'TZ=Europe/Paris 0 3 * * 1' --dry-run   # Mondays 03:00",
            "amp-pipeline submit --target kubeflow --job amp.yaml --schedule '0 3 1 * *' "
            "--host http://localhost:8888   # monthly",
        ],
        (0, 1, 2),
    )
    submit.add_argument(
        "--target",
        choices=TARGETS,
        default="vertex",
        help="where to submit (default: %(default)s)",
    )
    submit.add_argument(
        "--job", required=True, help="the compiled PipelineJob JSON (Kubeflow: the YAML package)"
    )
    submit.add_argument("--project", help="the Google Cloud project (vertex)")
    submit.add_argument("--region", help="the Vertex AI region, e.g. us-central1 (vertex)")
    submit.add_argument(
        "--schedule",
        metavar="CRON",
        help="run on a schedule: five cron fields (minute hour day month weekday), Vertex "
        "also after TZ=Area/City; one run at a time, missed runs not caught up",
    )
    submit.add_argument(
        "--schedule-name",
        default="amp-pipeline continuous training",
        help="the schedule's display name (default: %(default)s)",
    )
    submit.add_argument(
        "--host", help="kubeflow: the KFP API endpoint to create the recurring run on"
    )
    submit.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pipeline parameter value (repeatable)",
    )
    submit.add_argument(
        "--dry-run", action="store_true", help="build the request without credentials and print it"
    )


def cluster_spans(data, config):
    """The spans of a compiled pipeline: without --span, TFX's driver picks the newest span
    when each run starts (no range config: a schedule trains on what landed since); with
    --span, that span. A rolling window's earlier spans would be fixed at compile time, so
    --rolling-spans is the local runner's.

    Raises:
        InputError: --rolling-spans above 1.
    """
    if config.rolling_spans > 1:
        raise InputError(
            f"--rolling-spans {config.rolling_spans}: a compiled pipeline reads one span per "
            "run (the newest when it starts, or --span); a rolling window runs locally"
        )
    if config.span is None:
        return dataclasses.replace(data, spans={**data.spans, "newest_at_run_time": True})
    return data


def error(message) -> int:
    print(f"amp-pipeline: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_compile(args: argparse.Namespace) -> int:
    from amp_pipeline.kubeflow.runner import compile_pipeline
    from amp_pipeline.pipeline import user_model
    from amp_pipeline.pipeline.config import prepared, with_data_steps

    try:
        target = ClusterTarget(
            target=args.target,
            image=args.image,
            pipeline_root=args.pipeline_root,
            data_root=args.data_root or args.pipeline_root.rstrip("/") + "/data",
            machine_type=args.machine_type,
            accelerator=args.accelerator,
            accelerator_count=args.accelerator_count,
            trainer_replicas=args.trainer_replicas,
            region=args.region,
        )
        # --output here is the compiled file, not a run's output folder.
        config = flags.run_config(args, output="output")
        with tempfile.TemporaryDirectory() as tmp:
            config, data = prepared(config, Path(tmp))
        if data.spans:
            data = cluster_spans(data, config)
        config = with_data_steps(config, data)  # a runtime parameter's default on the cluster
        module_ref, copied = None, None
        if args.model_module:
            from amp_pipeline.kubeflow import user_module

            checked = user_model.check(args.model_module, data)
            assert checked is not None  # a module was named
            module_ref, copied = user_module.package(checked, Path(args.image_context))
    except (InputError, ValueError) as e:
        return error(e)
    out = compile_pipeline(config, data, target, Path(args.output), config.beam.args(), module_ref)
    print(f"compiled {config.pipeline_name} for {args.target}: {out}")
    if module_ref is not None:
        where = f"copied to {copied}: " if copied else ""
        print(
            f"model module: {where}the spec imports {module_ref.ref}; build the image "
            "(kubeflow/Dockerfile) after compiling so that it holds the module"
        )
    print("parameters: data_root, train_args (JSON TrainArgs), accuracy_tolerance")
    print(
        f"trainers: {target.trainer_replicas} replica(s) x {target.accelerator_count} "
        f"{target.accelerator if target.accelerator_count else 'CPU'}; fixed at compile time "
        "(TFX takes no runtime parameter inside the trainers' machine specs)"
    )
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from amp_pipeline.kubeflow.submit import kubeflow_recurring_run, schedule, submit

    params = {}
    for item in args.param:
        name, sep, value = item.partition("=")
        if not sep or not name:
            return error(f"--param {item!r}: expected NAME=VALUE")
        params[name] = value
    try:
        if args.target == "kubeflow":
            if args.schedule is None:
                raise InputError(
                    "--target kubeflow: submit makes a recurring run (--schedule CRON); upload "
                    "the package in the KFP UI for a single run"
                )
            host = None if args.dry_run else args.host
            if host is None and not args.dry_run:
                raise InputError("--target kubeflow: --host (the KFP API endpoint) or --dry-run")
            result = kubeflow_recurring_run(
                Path(args.job), args.schedule, args.schedule_name, params, host
            )
            what, body = "a Kubeflow recurring run", result["recurring_run"]
        else:
            missing = [f for f in ("project", "region") if getattr(args, f) is None]
            if missing:
                raise InputError(f"--{missing[0]}: needed for --target vertex")
            if args.schedule is not None:
                result = schedule(
                    Path(args.job), args.project, args.region, params, args.schedule,
                    args.schedule_name, args.dry_run,
                )  # fmt: skip
                what = f"a Vertex Schedule in {result['parent']}"
                body = result["schedule"]
            else:
                result = submit(Path(args.job), args.project, args.region, params, args.dry_run)
                what, body = f"a PipelineJob in {result['parent']}", result["pipeline_job"]
    except InputError as e:
        return error(e)
    if args.dry_run:
        print(f"dry run: would create {what}:")
        print(json.dumps(body, indent=2))
    else:
        print(f"submitted {result['submitted']}")
    return 0


COMMANDS = {"compile": cmd_compile, "submit": cmd_submit}

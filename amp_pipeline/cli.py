"""`amp-pipeline`, the composition root: the one module that sees every package, above all of
them (docs/ARCHITECTURE.md). Each package brings its own commands (`add_parsers` + `COMMANDS`);
this module only assembles them and dispatches. No package imports it."""

from __future__ import annotations

import os
import sys
import warnings

from amp_pipeline.benchmarks import cli as benchmarks_cli
from amp_pipeline.core import cli_help, quiet_tensorflow
from amp_pipeline.core.argtypes import Parser
from amp_pipeline.core.versions import versions
from amp_pipeline.kubeflow import cli as kubeflow_cli
from amp_pipeline.pipeline.cli import commands as pipeline_commands
from amp_pipeline.serving import cli as serving_cli

PACKAGES = (pipeline_commands, kubeflow_cli, serving_cli, benchmarks_cli)


def build_parser() -> Parser:
    parser = Parser(
        prog="amp-pipeline",
        description="Train a Keras model in float32 and with automatic mixed precision, gate the "
        "AMP model on evidence, export it for TF Serving and TFLite, and track it in MLflow.",
        epilog="Exit codes: 0 a model shipped, 2 bad input or usage, 3 the gate shipped nothing, "
        "4 monitor: the traffic moved, 1 anything else. Flags can come from a file: "
        "amp-pipeline run @ci.args (one flag or value per line).",
        fromfile_prefix_chars="@",
    )
    parser.add_argument(
        "--version", action="version", version=versions(), help="print the versions and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for package in PACKAGES:
        package.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    quiet_tensorflow.install()  # TensorFlow's import without its CUDA registration lines
    # google-api-core warns on every import that Python 3.10 nears its end of support.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.")
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # what the command does not take, with the flag it was probably meant to be
        command = cli_help.subcommands(parser)[args.command]
        command.error(cli_help.unrecognized(command, extras))
    commands = {name: fn for package in PACKAGES for name, fn in package.COMMANDS.items()}
    return commands[args.command](args)


def entry() -> None:
    """The `amp-pipeline` console script: `main`, then an exit that skips the interpreter's
    teardown. By then every file is written and closed, the MLflow run ended and the logs
    flushed; what teardown would add is TensorFlow's `AtomicFunction.__del__` running after its
    module's globals are gone, one "Exception ignored ... 'NoneType' object is not
    subscriptable" traceback per traced function on stderr (tens of lines after every run)."""
    import logging

    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    entry()

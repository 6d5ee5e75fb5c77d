"""Runs the pipeline on this machine: LocalDagRunner, ML Metadata in SQLite, Beam DirectRunner."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TextIO

from pipeline.config import RunConfig, model_for, model_name_for
from pipeline.errors import EXIT_BAD_INPUT, EXIT_FAILED, InputError
from pipeline.progress import captured_output

logger = logging.getLogger(__name__)

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def _find_input_error(error: BaseException) -> InputError | None:
    """The InputError behind `error` (TFX may wrap what a component raised)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, InputError):
            return error
        error = error.__cause__ or error.__context__
    return None


def run(config: RunConfig, console: TextIO) -> dict:
    """Runs the whole pipeline and returns run_summary.json's content (also written to disk).

    Raises:
        InputError: bad input, before or during the run (exit code 2).
    """
    from pipeline import summary

    output = config.output_dir
    output.mkdir(parents=True, exist_ok=True)
    recipe = None
    with captured_output(config.log_path) as (progress, terminal):
        try:
            from pipeline import ingest

            data = ingest.prepare(config.data, config.label, output / "data", config.image_size)
            config = dataclasses.replace(config, model_name=model_name_for(config, data))
            # Imported here so that TF's and Beam's start-up noise goes to the log file, and
            # after the data check so that a bad CSV is reported in a second.
            from absl import logging as absl_logging
            from tfx import v1 as tfx

            from components.precision import choose_recipe, detect_hardware
            from pipeline.pipeline import create_pipeline
            from pipeline.results import latest_run_outputs

            model = model_for(config, data)
            if model in ("cnn", "resnet50") and data.image_shape is None:
                raise InputError(
                    f"--model {model}: {data.source} is tabular (no image features); "
                    "use --model mlp or transformer"
                )
            recipe = choose_recipe(detect_hardware(), config.policy, config.xla)
            for warning in recipe.warnings:
                terminal.write(f"WARNING: {warning}\n")
            terminal.write(
                f"amp-pipeline: {data.source} ({data.rows} rows, {data.num_classes} classes), "
                f"model {model_for(config, data)}, AMP policy {recipe.policy} "
                f"[{recipe.reason}]\n"
            )
            terminal.write(f"  full log: {config.log_path}\n")
            absl_logging.set_verbosity(absl_logging.INFO)
            pipeline = create_pipeline(
                config,
                data,
                recipe,
                metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
                    str(config.metadata_path)
                ),
                beam_pipeline_args=BEAM_ARGS,
            )
            progress.total = len(pipeline.components)
            tfx.orchestration.LocalDagRunner().run(pipeline)
            outputs = latest_run_outputs(config.metadata_path, config.pipeline_name)
            result = summary.build_summary(
                outputs, recipe, dataclasses.asdict(config), data.to_dict(), output
            )
        except Exception as e:  # noqa: BLE001 - every failure is reported, then re-raised
            input_error = _find_input_error(e)
            code = EXIT_BAD_INPUT if input_error else EXIT_FAILED
            where = f" in {progress.current}" if progress.current else ""
            logger.exception("Run failed%s", where)
            summary.write_summary(summary.failure_summary(input_error or e, code, recipe), output)
            if input_error is not None:
                raise input_error from None
            raise RunFailed(f"{type(e).__name__}{where}: {e}", Path(config.log_path)) from e
    summary.write_summary(result, output)
    return result


class RunFailed(RuntimeError):
    """The pipeline failed for a reason that is not bad input (exit code 1)."""

    def __init__(self, message: str, log_path: Path):
        super().__init__(message)
        self.log_path = log_path

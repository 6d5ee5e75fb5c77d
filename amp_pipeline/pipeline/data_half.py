"""The data half of the pipeline, for the commands that probe a model without training it
(`check-model`, `autotune`): ExampleGen to Transform, cached in `<output>/tfx`, under the
output folder's lock, with the run's progress lines."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from amp_pipeline.components.models.user_module import ModuleRef
from amp_pipeline.core.data_spec import DataSpec
from amp_pipeline.pipeline.config import RunConfig, prepared
from amp_pipeline.pipeline.progress import captured_output
from amp_pipeline.pipeline.run_lock import OutputLock, check_output


@dataclasses.dataclass(frozen=True)
class Transformed:
    """What a probe reads: the checked data and module, and Transform's outputs."""

    config: RunConfig
    data: DataSpec
    module_ref: ModuleRef | None
    train_files: tuple[str, ...]
    eval_files: tuple[str, ...]
    transform_output: str


@contextlib.contextmanager
def transformed(config: RunConfig, command: str) -> Iterator[tuple[Transformed, TextIO]]:
    """Yields (Transformed, terminal stream) with the data half run and the folder locked.

    Raises:
        InputError: bad data, a broken model module, or a busy output folder (exit code 2).
    """
    output = config.output_dir
    check_output(output)
    with OutputLock(output, command), captured_output(config.log_path) as (progress, terminal):
        from amp_pipeline.pipeline import user_model

        config, data = prepared(config)
        module_ref = user_model.check(config.model_module, data)

        from absl import logging as absl_logging

        from amp_pipeline.pipeline.local_runner import metadata_config, run_pipeline
        from amp_pipeline.pipeline.pipeline import create_check_pipeline

        pipeline = create_check_pipeline(
            config,
            data,
            module_ref,
            metadata_connection_config=metadata_config(config.metadata_path),
            beam_pipeline_args=config.beam.args(),
        )
        terminal.write(f"amp-pipeline {command}: {data.source} ({data.rows} rows)\n")
        absl_logging.set_verbosity(absl_logging.INFO)  # the progress lines read INFO records
        progress.total = len(pipeline.components)
        outputs = run_pipeline(pipeline, config.metadata_path).outputs["Transform"]
        examples = Path(outputs["transformed_examples"].uri)
        yield (
            Transformed(
                config=config,
                data=data,
                module_ref=module_ref,
                train_files=(str(examples / "Split-train" / "*"),),
                eval_files=(str(examples / "Split-eval" / "*"),),
                transform_output=outputs["transform_graph"].uri,
            ),
            terminal,
        )

"""CsvExampleGen for CSV as people write it: TFX's file-based ExampleGen with our own reader.

TFX's own CsvExampleGen splits files into lines (no quoted newlines), knows only `,` and empty
cells as missing, and converts about 1,100 rows/s on a 2-core machine. This one reads each file
with the CsvFormat the input check decided (components/data/csv_format.py): Arrow record batches,
turned into serialized tf.Examples by tfx_bsl's C++ encoder. Each file is one unit of work, so a
folder of shards is read in parallel by Beam's workers.

The split: TFX's ExampleGens put an example in train or eval by a hash of its serialized bytes.
The C++ encoder's bytes are not the same from process to process (its feature order varies),
and re-serialising every example deterministically in Python cost 150 us a row, 80% of
ExampleGen's time (measured: 7.5 of 8.4 s for 50k rows of 65 columns, 2-core Zen 4). So the
rows are hashed instead, by their cells' values (csv_format.row_keys, vectorised over each
Arrow batch), into the same hash buckets (4:1): the same row lands in the same split in every
run and with any number of Beam workers.

Writing the splits (`InOrderSplits`, also under ImportExampleGen for TFRecord and image inputs):
TFX's WriteSplit puts every example through `beam.Reshuffle()` before writing. On a cluster
runner that spreads the writes over workers. Under the DirectRunner it does nothing useful and
costs the most memory of the run: the in-memory runner buffers the whole split in the driver
for the shuffle's GroupByKey (the driver grew with the data), then hands the examples back in
the order they came (the runner's grouping keeps insertion order; tests/test_example_gen.py
shows it). So on the DirectRunner the splits are written straight, in the input's order, which
is the order they had; on Dataflow, Flink and Spark TFX's own WriteSplit runs unchanged.
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import os
import time
from pathlib import Path

import apache_beam as beam
import numpy as np
from tfx import components as tfx_components
from tfx.components.example_gen import driver, utils, write_split
from tfx.components.example_gen.base_example_gen_executor import BaseExampleGenExecutor
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.example_gen.import_example_gen.executor import (
    Executor as ImportExecutor,
)
from tfx.components.util import examples_utils
from tfx.dsl.components.base import executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.types.component_spec import ExecutionParameter
from tfx.utils import proto_utils

from amp_pipeline.components.data.csv_format import (
    CsvFormat,
    batches,
    row_keys,
    to_examples,
    with_required,
)
from amp_pipeline.core.runner import runs_locally

logger = logging.getLogger(__name__)

CSV_FORMAT_KEY = "csv_format"
# A rolling window's earlier spans (components/data/spans/selection.py): their patterns relative to
# input_base and a fingerprint of their files (so that a changed earlier span is not answered
# from the cache), as JSON; TFX's driver resolves the newest span itself.
EARLIER_SPANS_KEY = "earlier_spans"


def earlier_patterns(exec_properties: dict) -> list[str]:
    raw = exec_properties.get(EARLIER_SPANS_KEY) or ""
    return list(json.loads(raw)["patterns"]) if raw else []


PROGRESS_SECONDS = 10.0


class _ReadCsvFile(beam.DoFn):
    """One CSV file -> serialized tf.Examples, logging its progress every 10 s; with
    `buckets`, each as (its row's bucket in [0, buckets), the example)."""

    def __init__(self, fmt: dict, buckets: int = 0):
        self._fmt = fmt
        self._buckets = buckets

    def process(self, path: str):
        fmt = CsvFormat.from_dict(self._fmt)
        rows, last = 0, time.monotonic()
        for read in batches(Path(path), fmt):
            batch = with_required(read, fmt)
            examples = to_examples(batch, fmt.types)
            if self._buckets:
                keyed = row_keys(batch) % np.uint64(self._buckets)
                yield from zip(keyed.tolist(), examples, strict=True)
            else:
                yield from examples
            rows += read.num_rows
            if time.monotonic() - last >= PROGRESS_SECONDS:
                logger.info("ExampleGen progress: %s rows read from %s", f"{rows:,}", path)
                last = time.monotonic()
        logger.info("ExampleGen read %s rows from %s", f"{rows:,}", path)


def _csv_files(exec_properties: dict, split_pattern: str) -> list[str]:
    """The CSV files of the pattern (the newest span's, with spans) and of a rolling window's
    earlier spans, oldest first."""
    import tensorflow as tf

    base = Path(exec_properties[standard_component_specs.INPUT_BASE_KEY])
    files = []
    for relative in [*earlier_patterns(exec_properties), split_pattern]:
        pattern = str(base / relative)
        matched = sorted(
            f
            for f in tf.io.gfile.glob(pattern)
            if f.lower().endswith((".csv", ".csv.gz")) and not Path(f).name.startswith((".", "_"))
        )
        if not matched:
            raise RuntimeError(f"no CSV files match {pattern}")
        files += matched
    return files


@beam.ptransform_fn
@beam.typehints.with_input_types(beam.Pipeline)
def _CsvToExample(  # noqa: N802 - Beam's PTransform naming
    pipeline: beam.Pipeline, exec_properties: dict, split_pattern: str, buckets: int = 0
) -> beam.pvalue.PCollection:
    fmt = json.loads(exec_properties[CSV_FORMAT_KEY])
    return (
        pipeline
        | "Files" >> beam.Create(_csv_files(exec_properties, split_pattern))
        | "Reshuffle" >> beam.Reshuffle()  # one file per worker where there are several
        | "Read" >> beam.ParDo(_ReadCsvFile(fmt, buckets))
    )


@beam.ptransform_fn
@beam.typehints.with_input_types(bytes)
def WriteInOrder(examples: beam.pvalue.PCollection, split_path: str) -> beam.pvalue.PDone:  # noqa: N802
    """A split as gzipped TFRecords, without TFX's Reshuffle (the file names TFX's use)."""
    return (
        examples
        | "MaybeSerialize" >> beam.ParDo(write_split.MaybeSerialize())
        | "Write"
        >> beam.io.WriteToTFRecord(
            os.path.join(split_path, write_split.DEFAULT_FILE_NAME), file_name_suffix=".gz"
        )
    )


def split_configs(exec_properties: dict) -> tuple[example_gen_pb2.Input, example_gen_pb2.Output]:
    """ExampleGen's input and output configs, from their JSON execution properties."""
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config
    )
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config
    )
    return input_config, output_config


class InOrderSplits(BaseExampleGenExecutor):
    """ExampleGen's Do with the splits written by WriteInOrder on the DirectRunner (the module
    docstring says why); on any other runner, TFX's own Do."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        if not runs_locally(self._beam_pipeline_args):
            return super().Do(input_dict, output_dict, exec_properties)
        input_config, output_config = split_configs(exec_properties)
        outputs = output_dict[standard_component_specs.EXAMPLES_KEY]
        examples = artifact_utils.get_single_instance(outputs)
        examples.split_names = artifact_utils.encode_split_names(
            utils.generate_output_split_names(input_config, output_config)
        )
        with self._make_beam_pipeline() as pipeline:
            splits = self.GenerateExamplesByBeam(pipeline, exec_properties)
            for name, split in splits.items():
                _ = split | f"WriteSplit[{name}]" >> WriteInOrder(
                    artifact_utils.get_split_uri(outputs, name)
                )
        payload = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        file_format = exec_properties.get(
            standard_component_specs.OUTPUT_FILE_FORMAT_KEY,
            example_gen_pb2.FILE_FORMAT_UNSPECIFIED,
        )
        for artifact in outputs:
            if payload:
                examples_utils.set_payload_format(artifact, payload)
            examples_utils.set_file_format(artifact, write_split.to_file_format_str(file_format))
        return None


@beam.ptransform_fn
@beam.typehints.with_input_types(beam.Pipeline)
def _RecordsWithEarlierSpans(  # noqa: N802 - Beam's PTransform naming
    pipeline: beam.Pipeline, exec_properties: dict, split_pattern: str
) -> beam.pvalue.PCollection:
    """The serialized records of the pattern and of a rolling window's earlier spans."""
    base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
    patterns = [*earlier_patterns(exec_properties), split_pattern]
    reads = [
        pipeline | f"ReadSpan[{i}]" >> beam.io.ReadFromTFRecord(os.path.join(base, p))
        for i, p in enumerate(patterns)
    ]
    return reads[0] if len(reads) == 1 else reads | "Spans" >> beam.Flatten()


class ImportInOrder(InOrderSplits, ImportExecutor):
    """ImportExampleGen's executor (TFRecord inputs, image folders) writing in order locally,
    reading a rolling window's earlier spans too."""

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802
        return _RecordsWithEarlierSpans  # type: ignore[return-value]  # a ptransform_fn


def _file_based_spec(
    spec_class: type[standard_component_specs.FileBasedExampleGenSpec],
    input_base,
    input_config: example_gen_pb2.Input,
    output_config: example_gen_pb2.Output,
    range_config,
    earlier_spans: str,
    **extra: str,
) -> standard_component_specs.FileBasedExampleGenSpec:
    """A file-based ExampleGen's spec writing gzipped tf.Examples, as FileBasedExampleGen's own
    __init__ builds it, with a rolling window's earlier spans and the executor's own properties."""
    from tfx import types
    from tfx.types import standard_artifacts

    return spec_class(
        input_base=input_base,
        input_config=input_config,
        output_config=output_config,
        custom_config=None,
        range_config=range_config,
        output_data_format=example_gen_pb2.FORMAT_TF_EXAMPLE,
        output_file_format=example_gen_pb2.FORMAT_TFRECORDS_GZIP,
        examples=types.Channel(type=standard_artifacts.Examples),
        **extra,
        **({EARLIER_SPANS_KEY: earlier_spans} if earlier_spans else {}),
    )


class ImportExampleGenSpec(standard_component_specs.FileBasedExampleGenSpec):
    PARAMETERS = {
        **standard_component_specs.FileBasedExampleGenSpec.PARAMETERS,
        EARLIER_SPANS_KEY: ExecutionParameter(type=str, optional=True),
    }


class ImportExampleGen(tfx_components.ImportExampleGen):
    """TFX's ImportExampleGen on ImportInOrder (the node id stays `ImportExampleGen`), with a
    range config for spans and a rolling window's earlier spans."""

    SPEC_CLASS = ImportExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(ImportInOrder)

    def __init__(
        self,
        input_base,
        input_config: example_gen_pb2.Input,
        output_config: example_gen_pb2.Output,
        range_config=None,
        earlier_spans: str = "",
    ):
        spec = _file_based_spec(
            ImportExampleGenSpec,
            input_base,
            input_config,
            output_config,
            range_config,
            earlier_spans,
        )
        super(FileBasedExampleGen, self).__init__(spec=spec)


class Executor(InOrderSplits, BaseExampleGenExecutor):
    """Reads CSV files with the input's CsvFormat, split by hash buckets of each row's values
    (csv_format.row_keys) as TFX splits by hash buckets of each example's bytes."""

    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802
        return _CsvToExample  # type: ignore[return-value]  # a ptransform_fn, as TFX's own are

    def GenerateExamplesByBeam(self, pipeline, exec_properties):  # noqa: N802 - TFX's name
        input_config, output_config = split_configs(exec_properties)
        splits = output_config.split_config
        if not splits.splits or splits.partition_feature_name:
            return super().GenerateExamplesByBeam(pipeline, exec_properties)
        bounds = list(itertools.accumulate(s.hash_buckets for s in splits.splits))
        keyed = pipeline | "InputToRecord" >> _CsvToExample(
            exec_properties, input_config.splits[0].pattern, bounds[-1]
        )
        parts = keyed | "SplitData" >> beam.Partition(
            lambda kv, n: bisect.bisect(bounds, kv[0]), len(bounds)
        )
        names = utils.generate_output_split_names(input_config, output_config)
        return {
            name: part | f"Examples[{name}]" >> beam.Values()
            for name, part in zip(names, parts, strict=True)
        }


class CsvExampleGenSpec(standard_component_specs.FileBasedExampleGenSpec):
    PARAMETERS = {
        **standard_component_specs.FileBasedExampleGenSpec.PARAMETERS,
        CSV_FORMAT_KEY: ExecutionParameter(type=str),
        EARLIER_SPANS_KEY: ExecutionParameter(type=str, optional=True),
    }


class CsvExampleGen(FileBasedExampleGen):
    """ExampleGen for CSV files read with a CsvFormat (the node id stays `CsvExampleGen`)."""

    SPEC_CLASS = CsvExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
    DRIVER_CLASS = driver.FileBasedDriver

    def __init__(
        self,
        input_base,
        csv_format: dict,
        input_config: example_gen_pb2.Input,
        output_config: example_gen_pb2.Output,
        range_config=None,
        earlier_spans: str = "",
    ):
        spec = _file_based_spec(
            CsvExampleGenSpec,
            input_base,
            input_config,
            output_config,
            range_config,
            earlier_spans,
            **{CSV_FORMAT_KEY: json.dumps(csv_format, sort_keys=True)},
        )
        super(FileBasedExampleGen, self).__init__(spec=spec)

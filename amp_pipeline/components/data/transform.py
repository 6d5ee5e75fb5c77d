"""Transform: TFX's Transform component, with larger Beam batches for narrow rows.

TFX's Transform leaves tf.Transform's batch size to tfx_bsl, which lets Beam's BatchElements grow
batches from 1 up to 1,000 rows. Every batch is a call into the TensorFlow graph of the
preprocessing_fn (and, in the analysis pass, of its analyzers), with a fixed cost per call and
per column. Where a row holds at most `NARROW_VALUES` values (a table's columns, not an image's
pixels), `BATCH_ROWS` rows per batch are fed instead. On the scale benchmark's 65 columns at
200k rows, TFX's executor alone (`python -m amp_pipeline.benchmarks.scale.beam_batches`, 3 rounds
alternating, fresh processes, 2-core AMD EPYC Zen 4): 76.2, 81.9 and 80.5 s with TFX's batching,
64.1, 63.7 and 71.4 s with 8,192 rows (benchmarks/RESULTS.md, "Transform's batches").
Wider rows keep TFX's own batching, whose batches stay small.

A text column is one value per row whatever its length, so rows of text are bounded by bytes
instead: at most TEXT_BATCH_BYTES of text per batch on average (the input check's mean length
per text column), at most BATCH_ROWS rows (at most 1,000, TFX's own ceiling, for wide rows). A
batch's token tensors then stay around 8x that (a tf.string per token, about 40 bytes for a
5-character token): 32 MB, where 8,192 rows of 20 KB documents held 160 MB of text and over a
gigabyte of tokens.

TFX's executor builds its `TransformProcessor` by the module's name inside `Do`, and the batch
size is that class's `_GetDesiredBatchSize`: `Executor.Do` below puts the subclass under that
name for the duration of its call (one component runs at a time in a process).
"""

from __future__ import annotations

import json
import math

from tfx.components import Transform as TfxTransform
from tfx.components.transform import executor as transform_executor
from tfx.dsl.components.base import executor_spec

BATCH_ROWS = 8192
NARROW_VALUES = 256  # values per row: at most 2M values (8-16 MB) per batch
TFX_MAX_ROWS = 1000  # tfx_bsl's BatchElements ceiling
TEXT_BATCH_BYTES = 4 * 2**20


def text_batch_rows(data_spec: dict) -> int | None:
    """Rows per batch that keep a batch's text within TEXT_BATCH_BYTES on average; None
    without text columns."""
    figures = data_spec.get("text_figures") or {}
    chars = sum(f.get("mean_chars", 0.0) for f in figures.values())
    if not data_spec.get("text_features"):
        return None
    return max(16, min(BATCH_ROWS, int(TEXT_BATCH_BYTES / max(chars, 1.0))))


def values_per_row(schema) -> int:
    """The values one example holds by the schema: a fixed shape's size, else 1 per feature."""
    total = 0
    for feature in schema.feature:
        dims = [d.size for d in feature.shape.dim]
        total += math.prod(dims) if dims else 1
    return total


class BatchedProcessor(transform_executor.TransformProcessor):
    """TFX's TransformProcessor with `BATCH_ROWS` rows per batch for narrow rows, and rows of
    text bounded by bytes (`text_rows`, set by Executor.Do from the data spec)."""

    text_rows: int | None = None

    def _GetDesiredBatchSize(self, data_format, schema):  # noqa: N802 - TFX's name
        tfx_choice = super()._GetDesiredBatchSize(data_format, schema)
        if tfx_choice is not None:
            return tfx_choice  # SequenceExamples read as raw records: TFX's batch of 1
        narrow = values_per_row(schema) <= NARROW_VALUES
        if self.text_rows is not None:
            return min(self.text_rows, BATCH_ROWS if narrow else TFX_MAX_ROWS)
        return BATCH_ROWS if narrow else None


class Executor(transform_executor.Executor):
    """TFX's Transform executor, its processor the batched one."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        tfx_processor = transform_executor.TransformProcessor
        config = json.loads(exec_properties.get("custom_config") or "{}")
        BatchedProcessor.text_rows = text_batch_rows(config.get("data_spec") or {})
        transform_executor.TransformProcessor = BatchedProcessor  # type: ignore[misc]  # TFX's processor class swapped for this run, restored below
        try:
            return super().Do(input_dict, output_dict, exec_properties)
        finally:
            transform_executor.TransformProcessor = tfx_processor  # type: ignore[misc]  # restored
            BatchedProcessor.text_rows = None


class Transform(TfxTransform):
    """tfx.components.Transform with the executor above."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

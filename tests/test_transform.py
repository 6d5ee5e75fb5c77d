"""Transform's batch size (components/data/transform.py): large batches for a table's narrow
rows, TFX's own batching for wide ones (images)."""

from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.transform import executor as transform_executor
from tfx.proto import example_gen_pb2

from amp_pipeline.components.data import transform


def _schema(*shapes: list[int] | None) -> schema_pb2.Schema:
    schema = schema_pb2.Schema()
    for i, shape in enumerate(shapes):
        feature = schema.feature.add(name=f"f{i}", type=schema_pb2.FLOAT)
        for size in shape or ():
            feature.shape.dim.add(size=size)
    return schema


def _batch(schema) -> int | None:
    processor = transform.BatchedProcessor()
    return processor._GetDesiredBatchSize(example_gen_pb2.FORMAT_TF_EXAMPLE, schema)  # noqa: SLF001


def test_a_tables_rows_go_in_large_batches_an_images_keep_tfxs():
    table = _schema(*([[1]] * 48), *([None] * 17))  # 48 scalars, 17 optional (varlen) columns
    assert transform.values_per_row(table) == 65
    assert _batch(table) == transform.BATCH_ROWS
    image = _schema([32, 32, 3], [1])
    assert transform.values_per_row(image) == 3073
    assert _batch(image) is None  # TFX's dynamic batching, up to 1,000 rows


def test_the_executor_runs_tfxs_do_with_the_batched_processor_and_puts_tfxs_back(monkeypatch):
    seen = []

    def do(self, input_dict, output_dict, exec_properties):
        seen.append(transform_executor.TransformProcessor)
        raise RuntimeError("stop")  # TFX's Do failing still restores its processor

    monkeypatch.setattr(transform_executor.Executor, "Do", do)
    original = transform_executor.TransformProcessor
    executor = transform.Executor(transform.Executor.Context(beam_pipeline_args=[], tmp_dir="/tmp"))
    try:
        executor.Do({}, {}, {})
    except RuntimeError:
        pass
    assert seen == [transform.BatchedProcessor]
    assert transform_executor.TransformProcessor is original


def test_rows_of_text_are_bounded_by_bytes_not_by_rows(monkeypatch):
    """Tweets (140 characters) still go 8,192 to a batch; 20 KB documents go about 200 to one,
    so a batch holds about TEXT_BATCH_BYTES of text, whatever the rows count as values."""
    import json

    table = _schema(*([[1]] * 3), [1])  # narrow: the text is one value per row
    tweets = {"text_features": ["t"], "text_figures": {"t": {"mean_chars": 140.0}}}
    documents = {"text_features": ["t"], "text_figures": {"t": {"mean_chars": 20_000.0}}}
    assert transform.text_batch_rows(tweets) == transform.BATCH_ROWS
    rows = transform.text_batch_rows(documents)
    assert rows == transform.TEXT_BATCH_BYTES // 20_000 == 209
    assert transform.text_batch_rows({"text_features": []}) is None
    seen = []

    def do(self, input_dict, output_dict, exec_properties):
        seen.append(_batch(table))

    monkeypatch.setattr(transform_executor.Executor, "Do", do)
    executor = transform.Executor(transform.Executor.Context(beam_pipeline_args=[], tmp_dir="/tmp"))
    executor.Do({}, {}, {"custom_config": json.dumps({"data_spec": documents})})
    assert seen == [209] and transform.BatchedProcessor.text_rows is None  # reset after
    assert _batch(table) == transform.BATCH_ROWS

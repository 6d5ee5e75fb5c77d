"""Transform's batch size (components/data/transform.py): large batches for a table's narrow
rows, TFX's own batching for wide ones (images)."""

from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.transform import executor as transform_executor
from tfx.proto import example_gen_pb2

from components.data import transform


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

"""TFMA on a bounded sample of a large eval split (components/gate/evaluator.py)."""

import json
import os

import tensorflow as tf
from tfx.components.evaluator import executor as evaluator_executor
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs

from amp_pipeline.components.gate import evaluator


def _examples(tmp_path, n: int) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    split = tmp_path / "examples" / "Split-eval"
    split.mkdir(parents=True)
    for shard in range(2):  # two files, read in name order
        with tf.io.TFRecordWriter(str(split / f"data-{shard}.gz"), options) as w:
            for i in range(shard * n // 2, (shard + 1) * n // 2):
                w.write(f"record-{i}".encode())
    return examples


def _run(tmp_path, monkeypatch, n: int, beam_args=None, props=None):
    """SampledExecutor.Do with TFX's own Do replaced by a recorder of what TFMA would read."""
    seen = {}

    def tfma(self, input_dict, output_dict, exec_properties):
        (examples,) = input_dict[standard_component_specs.EXAMPLES_KEY]
        files = evaluator.split_files(examples.uri)
        seen["records"] = [
            r.decode() for r in tf.data.TFRecordDataset(files, "GZIP").as_numpy_iterator()
        ]
        seen["splits"] = artifact_utils.decode_split_names(examples.split_names)

    monkeypatch.setattr(evaluator_executor.Executor, "Do", tfma)
    monkeypatch.setattr(evaluator, "MAX_EXAMPLES", 100)
    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = str(tmp_path / "Evaluator" / "evaluation" / "7")
    os.makedirs(evaluation.uri)
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(tmp_path / "blessing")
    executor = evaluator.SampledExecutor(
        evaluator.SampledExecutor.Context(beam_pipeline_args=beam_args or [], tmp_dir="/tmp")
    )
    executor.Do(
        {standard_component_specs.EXAMPLES_KEY: [_examples(tmp_path, n)]},
        {
            standard_component_specs.EVALUATION_KEY: [evaluation],
            standard_component_specs.BLESSING_KEY: [blessing],
        },
        props or {},
    )
    return seen, evaluation.uri


def test_a_large_eval_split_is_read_as_every_kth_example_and_the_sample_is_reported(
    tmp_path, monkeypatch
):
    seen, uri = _run(tmp_path, monkeypatch, 1000)
    # k = ceil(1000 / 100) = 10: the 1st, 11th, ... example, across both files in order.
    assert seen["records"] == [f"record-{i}" for i in range(0, 1000, 10)]
    assert seen["splits"] == ["eval"]
    assert evaluator.sample_record(uri) == {"examples": 100, "of": 1000, "every": 10}
    assert json.loads((tmp_path / "Evaluator/evaluation/7" / evaluator.SAMPLE_JSON).read_text())
    # The sample's copy is gone once TFMA has read it.
    assert not (tmp_path / "Evaluator" / "evaluation" / "eval_sample").exists()


def test_a_small_split_or_a_cluster_runner_reads_every_example(tmp_path, monkeypatch):
    seen, uri = _run(tmp_path / "small", monkeypatch, 100)
    assert len(seen["records"]) == 100 and evaluator.sample_record(uri) is None
    seen, uri = _run(tmp_path / "dataflow", monkeypatch, 1000, ["--runner=DataflowRunner"])
    assert len(seen["records"]) == 1000 and evaluator.sample_record(uri) is None


def test_the_bound_is_the_runs_own_and_zero_lifts_it(tmp_path, monkeypatch):
    """`run --tfma-max-examples` reaches the executor as the `max_examples` parameter."""
    seen, uri = _run(tmp_path / "ten", monkeypatch, 1000, props={evaluator.MAX_EXAMPLES_KEY: 10})
    assert seen["records"] == [f"record-{i}" for i in range(0, 1000, 100)]
    assert evaluator.sample_record(uri) == {"examples": 10, "of": 1000, "every": 100}
    seen, uri = _run(tmp_path / "all", monkeypatch, 1000, props={evaluator.MAX_EXAMPLES_KEY: 0})
    assert len(seen["records"]) == 1000 and evaluator.sample_record(uri) is None


def test_the_run_configs_default_bound_is_the_evaluators():
    from amp_pipeline.pipeline.config import RunConfig

    assert RunConfig().tfma_max_examples == evaluator.MAX_EXAMPLES

"""TFMA on a bounded sample of a large eval split (components/gate/evaluator.py)."""

import json
import os

import pytest
import tensorflow as tf
from tfx.components.evaluator import executor as evaluator_executor
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs

from components.gate import evaluator


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


def _run(tmp_path, monkeypatch, n: int, beam_args=None):
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
        {},
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


@pytest.mark.e2e
def test_a_whole_run_gives_tfma_a_sample_and_the_gate_still_judges_every_example(
    tmp_path, monkeypatch
):
    """In process, so that the bound can be lowered under the digits' eval split."""
    from pipeline.cli import main
    from tests.helpers import CHEAP, LOOSE_GATE

    monkeypatch.setattr(evaluator, "MAX_EXAMPLES", 100)
    out = tmp_path / "out"
    code = main(["run", "--output", str(out), "--train-steps", "40", *LOOSE_GATE, *CHEAP])
    summary = json.loads((out / "run_summary.json").read_text())
    assert code == 0, summary.get("error")
    sample = summary["gate"]["tfma_sample"]["fp32_baseline"]
    assert sample["every"] == -(-sample["of"] // 100) and sample["examples"] <= 100
    assert summary["gate"]["tfma_sample"]["production"] is None  # nothing in production
    decision = json.loads((out / "decision.json").read_text())
    # TFMA's per-class reading is there, from the sample ...
    assert decision["per_class_accuracy"]
    # ... and the parity rule counted every eval example, not the sample.
    (parity,) = [r for r in decision["rules"] if r["name"] == "accuracy_parity"]
    assert parity["n"] == sample["of"] and f"n={sample['of']:,}" in parity["detail"]
    # The accuracies the rules judge are over every example too (k/378, not k/95).
    assert round(decision["measurements"]["amp_accuracy"] * sample["of"], 6).is_integer()

"""Evaluator: TFX's Evaluator (TFMA) on at most MAX_EXAMPLES of the eval split.

TFMA is the pipeline's second reading of the candidate: per-class accuracy, TFMA's own
thresholds, the model-analysis artifacts a user opens in a notebook. Under the DirectRunner it
runs in the driver and its cost grows with the split: about 50 s and 100 MB more per 66k eval
rows, two evaluations a run (measured, benchmarks/RESULTS.md "Scale"). None of the gate's rules
reads it: the gate decides on the twins' paired predictions and the production comparison,
both over every eval example (components/gate/evidence.py).

So where the run is local and the eval split has more than MAX_EXAMPLES examples, TFMA reads a
systematic sample of it: every k-th example, k = ceil(n / MAX_EXAMPLES), written once beside
the evaluation and deleted after. An accuracy on m sampled examples has a standard error of at
most 0.5 / sqrt(m) (0.22 points at 50,000). `tfma_sample.json` in the evaluation says what was
read (m of n, k), and the gate's decision.json repeats it. On a cluster runner TFMA reads the
whole split, as TFX's Evaluator does. `run --tfma-max-examples N` sets the bound; 0 lifts it.
"""

from __future__ import annotations

import json
import math
import os
import shutil

from tfx.components import Evaluator as TfxEvaluator
from tfx.components.evaluator import executor as evaluator_executor
from tfx.components.util import examples_utils
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ExecutionParameter

from amp_pipeline.core.runner import runs_locally

MAX_EXAMPLES = 50_000  # the default bound; `run --tfma-max-examples` sets it (0: no bound)
MAX_EXAMPLES_KEY = "max_examples"
SAMPLE_JSON = "tfma_sample.json"
EVAL_SPLIT = "eval"


def split_files(examples_uri: str, split: str = EVAL_SPLIT) -> list[str]:
    import tensorflow as tf

    return sorted(tf.io.gfile.glob(os.path.join(examples_uri, f"Split-{split}", "*")))


def count_records(files: list[str]) -> int:
    import tensorflow as tf

    ds = tf.data.TFRecordDataset(files, compression_type="GZIP")
    return int(ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))


def write_sample(files: list[str], every: int, out_dir: str) -> int:
    """Every `every`-th record of `files` (the first, the k+1-th, ...) into one gzipped
    TFRecord file under `out_dir`/Split-eval: the number written."""
    import tensorflow as tf

    split_dir = os.path.join(out_dir, f"Split-{EVAL_SPLIT}")
    os.makedirs(split_dir, exist_ok=True)
    ds = tf.data.TFRecordDataset(files, compression_type="GZIP").shard(every, 0)
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    written = 0
    with tf.io.TFRecordWriter(os.path.join(split_dir, "data_tfrecord-00000.gz"), options) as w:
        for record in ds.batch(4096).as_numpy_iterator():
            for r in record:
                w.write(r)
            written += len(record)
    return written


def sample_record(evaluation_uri: str) -> dict | None:
    """What TFMA read for this evaluation ({"examples", "of", "every"}), None for all of it."""
    path = os.path.join(evaluation_uri, SAMPLE_JSON)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


class SampledExecutor(evaluator_executor.Executor):
    """TFX's Evaluator executor, on a systematic sample of a large eval split when local."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        evaluation = artifact_utils.get_single_uri(
            output_dict[standard_component_specs.EVALUATION_KEY]
        )
        examples = artifact_utils.get_single_instance(
            input_dict[standard_component_specs.EXAMPLES_KEY]
        )
        bound = exec_properties.get(MAX_EXAMPLES_KEY)
        bound = MAX_EXAMPLES if bound is None else int(bound)
        files = split_files(examples.uri)
        local = runs_locally(self._beam_pipeline_args) and bound > 0
        n = count_records(files) if local else 0
        if n <= bound or not local:
            return super().Do(input_dict, output_dict, exec_properties)
        every = math.ceil(n / bound)
        sample_dir = os.path.join(os.path.dirname(evaluation.rstrip("/")), "eval_sample")
        try:
            m = write_sample(files, every, sample_dir)
            # A new artifact with what TFMA reads set one by one: Artifact.copy_from on an
            # artifact read from ML Metadata aborts the process (protobuf's C++ map check).
            sample = standard_artifacts.Examples()
            sample.uri = sample_dir
            sample.split_names = artifact_utils.encode_split_names([EVAL_SPLIT])
            examples_utils.set_payload_format(sample, examples_utils.get_payload_format(examples))
            examples_utils.set_file_format(sample, examples_utils.get_file_format(examples))
            sampled = {**input_dict, standard_component_specs.EXAMPLES_KEY: [sample]}
            super().Do(sampled, output_dict, exec_properties)
        finally:
            shutil.rmtree(sample_dir, ignore_errors=True)
        with open(os.path.join(evaluation, SAMPLE_JSON), "w") as f:
            json.dump({"examples": m, "of": n, "every": every}, f)
        return None


class SampledEvaluatorSpec(standard_component_specs.EvaluatorSpec):
    PARAMETERS = {
        **standard_component_specs.EvaluatorSpec.PARAMETERS,
        MAX_EXAMPLES_KEY: ExecutionParameter(type=int, optional=True),
    }


class Evaluator(TfxEvaluator):
    """tfx.components.Evaluator with the sampling executor above (node id `Evaluator`), and
    `max_examples`: TFMA's bound on a local run (0: every eval example)."""

    SPEC_CLASS = SampledEvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(SampledExecutor)

    def __init__(  # the arguments of TFX's Evaluator this pipeline passes, and the bound
        self,
        examples,
        model,
        baseline_model,
        eval_config,
        example_splits: list[str],
        max_examples: int = MAX_EXAMPLES,
    ):
        from tfx import types
        from tfx.dsl.components.base import base_beam_component
        from tfx.utils import json_utils

        spec = SampledEvaluatorSpec(
            examples=examples,
            model=model,
            baseline_model=baseline_model,
            fairness_indicator_thresholds=json_utils.dumps(None),
            example_splits=json_utils.dumps(example_splits),
            evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
            eval_config=eval_config,
            blessing=types.Channel(type=standard_artifacts.ModelBlessing),
            max_examples=max_examples,
        )
        base_beam_component.BaseBeamComponent.__init__(self, spec=spec)

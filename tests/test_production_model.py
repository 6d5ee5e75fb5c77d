"""EvaluatorProduction first checks the model in production can be compared with the candidate on
this run's data (components/gate/production_evaluator.py): a run whose columns or task changed
under the same --model-name stops with one line naming what differs, not a TFMA traceback."""

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts, standard_component_specs

from amp_pipeline.components.gate import production_evaluator
from amp_pipeline.components.gate.production_evaluator import (
    ProductionModelMismatch,
    check_production_model,
)
from amp_pipeline.core import names
from amp_pipeline.core.errors import InputError
from tests.helpers import write_eval_split


def _model(path, feature: str, answer: str = names.CLASS_IDS) -> str:
    """A serving SavedModel (under path/Format-Serving) whose transform_features reads `feature`
    of each serialized example, and whose serving signature answers `answer`."""
    spec = {feature: tf.io.FixedLenFeature([], tf.int64)}

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, examples):
            return {answer: tf.io.parse_example(examples, spec)[feature] % 3}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def transform(self, examples):
            return {names.LABEL_KEY: tf.io.parse_example(examples, spec)[feature] % 3}

    m = M()
    signatures = {names.SERVING_SIGNATURE: m.serve, names.TRANSFORM_SIGNATURE: m.transform}
    tf.saved_model.save(m, str(path / names.SERVING_MODEL_DIR), signatures=signatures)
    return str(path)


def _inputs(candidate: str, production: str, examples: str) -> dict:
    def artifact(kind, uri):
        a = kind()
        a.uri = uri
        return [a]

    return {
        standard_component_specs.MODEL_KEY: artifact(standard_artifacts.Model, candidate),
        standard_component_specs.BASELINE_MODEL_KEY: artifact(standard_artifacts.Model, production),
        standard_component_specs.EXAMPLES_KEY: artifact(standard_artifacts.Examples, examples),
    }


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {
        "v": _model(root / "v", "v"),
        "v_again": _model(root / "v_again", "v"),
        "w": _model(root / "w", "w"),
        "v_regression": _model(root / "v_regression", "v", names.PREDICTIONS),
    }


def test_a_production_model_of_the_same_inputs_passes(models, tmp_path):
    examples = write_eval_split(tmp_path / "examples", 3, "v")
    check_production_model(_inputs(models["v"], models["v_again"], examples))  # no error


def test_a_production_model_of_other_columns_stops_the_run_naming_the_missing_one(models, tmp_path):
    examples = write_eval_split(tmp_path / "examples", 3, "v")
    with pytest.raises(ProductionModelMismatch) as caught:
        check_production_model(_inputs(models["v"], models["w"], examples))
    message = str(caught.value)
    assert isinstance(caught.value, InputError)  # exit 2, before the gate: nothing is pushed
    assert "\n" not in message
    assert "cannot read this run's examples: Feature: w (data type: int64) is required" in message
    assert "--model-name" in message


def test_a_production_regressor_is_not_compared_with_a_classifier(models, tmp_path):
    examples = write_eval_split(tmp_path / "examples", 3, "v")
    with pytest.raises(ProductionModelMismatch, match="answers"):
        check_production_model(_inputs(models["v"], models["v_regression"], examples))


def test_an_empty_eval_split_has_no_example_to_check(tmp_path):
    split = tmp_path / "Split-eval"
    split.mkdir()
    with tf.io.TFRecordWriter(
        str(split / "data.gz"), tf.io.TFRecordOptions(compression_type="GZIP")
    ):
        pass
    assert production_evaluator.first_eval_example(str(tmp_path)) is None

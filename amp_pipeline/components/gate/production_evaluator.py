"""EvaluatorProduction: TFX's Evaluator (TFMA, the candidate against the model in production),
except when nothing is in production yet.

Before the first push the production Resolver finds no model. TFX's Evaluator would then
still start a Beam job and run TFMA over the whole eval split for the candidate alone (8 to 17 s
of every first run, measured on this project's CI-size machines), whose figures nothing
reads: the gate's production rule is skipped without a production model. This executor writes
an empty evaluation marked NO_PRODUCTION_MODEL and a NOT_BLESSED blessing instead, and the
gate's readers (component.py::accuracy_by_slice, tfma_failures) read that as no evaluation.

With a model in production, it first checks that model can read this run's eval examples and
answers as the candidate does (class ids, or a regression's predictions). A run on data whose
columns changed under the same --model-name would otherwise fail inside TFMA with a traceback;
it stops here with one line naming what the production model lacks (an InputError: exit 2,
before the gate, so nothing is pushed).
"""

from __future__ import annotations

import os

from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_component_specs

from amp_pipeline.components.gate.evaluator import Evaluator, SampledExecutor
from amp_pipeline.core import names
from amp_pipeline.core.errors import InputError

NO_PRODUCTION_MODEL = "NO_PRODUCTION_MODEL"


class ProductionModelMismatch(InputError):
    """The model in production cannot be compared with the candidate on this run's data."""


def _answers(saved_model: str) -> set[str]:
    """The output names of a SavedModel's serving signature, read from its saved_model.pb."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    return set(proto.meta_graphs[0].signature_def[names.SERVING_SIGNATURE].outputs)


def first_eval_example(examples_uri: str) -> bytes | None:
    """The first serialized raw example of the eval split (None when it is empty)."""
    from amp_pipeline.components.gate.evidence import eval_batches

    for batch in eval_batches(examples_uri, batch=1).take(1):
        return bytes(batch.numpy()[0])
    return None


def _reason(message: str) -> str:
    """TensorFlow's own line from an op error ("Feature: x (data type: float) is required but
    could not be found."), without its node names and stack."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if "Feature:" in line:
            return line[line.index("Feature:") :].rstrip(".")
    meaningful = [
        line
        for line in lines
        if not line.startswith(("[[", "<", "Graph execution error", "Detected at node"))
    ]
    return (meaningful or lines or ["(no message)"])[0]


def production_mismatch(candidate: str, production: str, example: bytes | None) -> str:
    """Why the production serving model cannot be compared with the candidate ("" if it can):
    it answers with other outputs, or its transform_features (which reads the label and every
    feature it was trained on) fails on one of this run's eval examples."""
    import tensorflow as tf

    theirs, mine = _answers(production), _answers(candidate)
    if theirs != mine:
        return (
            f"it answers {sorted(theirs)}, this run's candidate {sorted(mine)} (a classifier "
            "and a regressor, or models of other labels)"
        )
    if example is None:
        return ""
    transform = tf.saved_model.load(production).signatures[names.TRANSFORM_SIGNATURE]
    try:
        transform(examples=tf.constant([example]))
    except (tf.errors.InvalidArgumentError, ValueError) as e:
        return f"it cannot read this run's examples: {_reason(str(getattr(e, 'message', e)))}"
    return ""


def check_production_model(input_dict: dict) -> None:
    """Raises ProductionModelMismatch when the baseline (production) model cannot be compared
    with the candidate on this run's eval examples."""
    candidate, production = (
        os.path.join(artifact_utils.get_single_uri(input_dict[key]), names.SERVING_MODEL_DIR)
        for key in (standard_component_specs.MODEL_KEY, standard_component_specs.BASELINE_MODEL_KEY)
    )
    examples = artifact_utils.get_single_uri(input_dict[standard_component_specs.EXAMPLES_KEY])
    reason = production_mismatch(candidate, production, first_eval_example(examples))
    if reason:
        raise ProductionModelMismatch(
            f"the model in production ({production}) cannot be compared with this run's: "
            f"{reason}; data with other columns or another label needs its own --model-name"
        )


def has_evaluation(evaluation_uri: str) -> bool:
    """Whether TFMA wrote this evaluation (not the no-production-model marker)."""
    return not os.path.exists(os.path.join(evaluation_uri, NO_PRODUCTION_MODEL))


class Executor(SampledExecutor):
    """The Evaluator's executor (components/gate/evaluator.py), or, without a baseline model,
    the marker alone."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        if input_dict.get(standard_component_specs.BASELINE_MODEL_KEY):
            check_production_model(input_dict)
            return super().Do(input_dict, output_dict, exec_properties)
        evaluation = artifact_utils.get_single_uri(
            output_dict[standard_component_specs.EVALUATION_KEY]
        )
        os.makedirs(evaluation, exist_ok=True)
        with open(os.path.join(evaluation, NO_PRODUCTION_MODEL), "w") as f:
            f.write("no model in production yet: nothing to evaluate against\n")
        blessing = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.BLESSING_KEY]
        )
        os.makedirs(blessing.uri, exist_ok=True)
        with open(os.path.join(blessing.uri, "NOT_BLESSED"), "w"):
            pass
        blessing.set_int_custom_property("blessed", 0)
        return None


class ProductionEvaluator(Evaluator):
    """The sampling Evaluator (components/gate/evaluator.py) with the executor above."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

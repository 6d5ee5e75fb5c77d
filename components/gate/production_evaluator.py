"""EvaluatorProduction: TFX's Evaluator (TFMA, the candidate against the model in production),
except when nothing is in production yet.

Before the first push the production Resolver finds no model. TFX's Evaluator would then
still start a Beam job and run TFMA over the whole eval split for the candidate alone (8 to 17 s
of every first run, measured on this project's CI-size machines), whose figures nothing
reads: the gate's production rule is skipped without a production model. This executor writes
an empty evaluation marked NO_PRODUCTION_MODEL and a NOT_BLESSED blessing instead, and the
gate's readers (component.py::accuracy_by_slice, tfma_failures) read that as no evaluation.
"""

from __future__ import annotations

import os

from tfx import v1 as tfx
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_component_specs

from components.gate.evaluator import SampledExecutor

NO_PRODUCTION_MODEL = "NO_PRODUCTION_MODEL"


def has_evaluation(evaluation_uri: str) -> bool:
    """Whether TFMA wrote this evaluation (not the no-production-model marker)."""
    return not os.path.exists(os.path.join(evaluation_uri, NO_PRODUCTION_MODEL))


class Executor(SampledExecutor):
    """The Evaluator's executor (components/gate/evaluator.py), or, without a baseline model,
    the marker alone."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 - TFX's name
        if input_dict.get(standard_component_specs.BASELINE_MODEL_KEY):
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


class ProductionEvaluator(tfx.components.Evaluator):
    """tfx.components.Evaluator with the executor above."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

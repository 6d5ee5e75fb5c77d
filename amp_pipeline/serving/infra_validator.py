"""InfraValidator: the candidate served by the local server answers as it does in process.

It runs before the PromotionGate, which turns its report into the `serving_infra` rule: a model
that fails here is rejected with the reason, and so never reaches the serving folder (a model
already pushed is never touched). See serving/validation.py for what is checked.
"""

import json
import os

from tfx.types.standard_artifacts import Examples, InfraBlessing, Model

from amp_pipeline.core.component_types import InputArtifact, OutputArtifact, Parameter, component

REPORT = "infra_validation.json"
# No `from __future__ import annotations` here: TFX's @component reads the annotations as types.


def eval_examples(examples_uri: str, limit: int) -> list[bytes]:
    """Up to `limit` serialized raw examples of the eval split (ExampleGen writes gzip)."""
    import tensorflow as tf

    files = tf.io.gfile.glob(os.path.join(examples_uri, "Split-eval", "*"))
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").take(limit)
    return [r.numpy() for r in dataset]


def validate_served(
    saved_model_dir: str,
    examples_uri: str,
    model_name: str,
    latency_budget_ms: float,
    num_examples: int = 64,
) -> dict:
    """The infra validation of one SavedModel on the eval split's first examples (the
    InfraValidator's, and the gate's for the float32 twin when it may ship)."""
    from amp_pipeline.serving.validation import ValidationConfig, validate

    return validate(
        saved_model_dir,
        model_name,
        eval_examples(examples_uri, num_examples),
        ValidationConfig(latency_budget_ms=latency_budget_ms),
    )


@component
def InfraValidator(  # noqa: N802 - TFX component names are classes
    model: InputArtifact[Model],
    examples: InputArtifact[Examples],
    blessing: OutputArtifact[InfraBlessing],
    model_name: Parameter[str],
    latency_budget_ms: Parameter[float],
    num_examples: Parameter[int] = 64,
    requested_at: Parameter[str] = "",
) -> None:
    """Serves the model over gRPC and REST on loopback; writes infra_validation.json.

    `requested_at` (the run's start time) makes every run validate again instead of reusing a
    cached verdict: latency and a server's start are facts of the moment, not of the model.
    """
    from tfx.utils import path_utils

    report = validate_served(
        path_utils.serving_model_path(model.uri),
        examples.uri,
        model_name,
        latency_budget_ms,
        num_examples,
    )
    report["requested_at"] = requested_at
    os.makedirs(blessing.uri, exist_ok=True)
    with open(os.path.join(blessing.uri, REPORT), "w") as f:
        json.dump(report, f, indent=2)
    # TFX's own marker files and property, so that a Pusher could also consume this blessing.
    marker = "INFRA_BLESSED" if report["passed"] else "INFRA_NOT_BLESSED"
    with open(os.path.join(blessing.uri, marker), "w"):
        pass
    blessing.set_int_custom_property("blessed", int(report["passed"]))

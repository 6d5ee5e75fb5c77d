"""amp_pipeline.tfx, the public API for TFX pipelines of one's own: its configs, the Transform
helpers as a user's preprocessing_fn calls them, the nodes it builds, and the gate's outputs a
pipeline condition reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from amp_pipeline import tfx as amp
from amp_pipeline.components.gate.component import pipeline_outputs
from tests.conftest import ROOT
from tests.helpers import tf_example


@pytest.mark.parametrize(
    "kwargs, flag",
    [
        ({"label": ""}, "label"),
        ({"label": "y", "label_kind": "bytes"}, "label_kind"),
        ({"label": "y", "classes": ("a",)}, "classes"),
        ({"label": "y", "classes": ("a", "a")}, "classes"),
    ],
)
def test_a_bad_task_names_its_argument(kwargs, flag):
    with pytest.raises(ValueError, match=f"argument {flag}"):
        amp.Task(**kwargs)


def test_a_task_is_the_data_spec_the_trainers_and_the_gate_read():
    species = amp.Task(label="species", classes=("Adelie", "Gentoo"), label_kind="string")
    spec = species.data_spec()
    assert (spec.label, spec.classes, spec.task, spec.num_classes) == (
        "species", ("Adelie", "Gentoo"), "classification", 2,
    )  # fmt: skip
    assert amp.Task(label="price", label_kind="float").data_spec().regression
    assert amp.Task(label="digit", classes=(0, 1, 2)).classes == ("0", "1", "2")


def test_the_transform_helpers_give_class_ids_and_a_label_scale_the_trainer_reads_back(tmp_path):
    """A user's preprocessing_fn through tf.Transform: class ids in the Task's order (-1 for a
    class it does not name), and a standardised regression label whose mean and std the
    trainer recovers from the graph (preprocessing.label_scale), to answer in the label's
    units."""
    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils
    from tfx_bsl.public import tfxio

    from amp_pipeline.components.data.preprocessing import label_scale

    species = amp.Task(label="species", classes=("Gentoo", "Adelie"), label_kind="string")
    mass = amp.Task(label="mass", label_kind="float")
    feature_spec = {
        "species": tf.io.FixedLenFeature([], tf.string),
        "mass": tf.io.FixedLenFeature([], tf.float32),
    }

    def preprocessing_fn(inputs):
        return {
            amp.FEATURES_KEY: tf.reshape(inputs["mass"], [-1, 1]),
            "species_id": amp.class_ids(inputs["species"], species),
            amp.LABEL_KEY: amp.standardized_label(inputs["mass"]),
        }

    # Far from 0 in standard deviations (as prices in dollars are): the read-back must not
    # cancel there.
    masses = [1_000_000.0, 1_000_500.0, 1_001_000.0, 1_002_500.0]
    pairs = zip(["Adelie", "Gentoo"] * 2, masses, strict=True)
    train = [tf_example(species=s, mass=m) for s, m in pairs]
    schema = schema_utils.schema_from_feature_spec(feature_spec)
    source = tfxio.TFExampleBeamRecord(physical_format="inmem", schema=schema)
    with beam.Pipeline() as p, tft_beam.Context(temp_dir=str(tmp_path / "tmp")):
        raw = p | beam.Create(train) | source.BeamSource()
        transform_fn = (raw, source.TensorAdapterConfig()) | tft_beam.AnalyzeDataset(
            preprocessing_fn
        )
        _ = transform_fn | tft_beam.WriteTransformFn(str(tmp_path / "transform"))
    # The raw schema beside it, as TFX's Transform writes it (label_scale reads the raw spec).
    metadata_io.write_metadata(
        dataset_metadata.DatasetMetadata(schema), str(tmp_path / "transform" / "metadata")
    )
    output = tft.TFTransformOutput(str(tmp_path / "transform"))
    rows = [("Gentoo", 1_001_000.0), ("Adelie", 1_000_000.0), ("Chinstrap", 1_002_500.0)]
    parsed = tf.io.parse_example([tf_example(species=s, mass=m) for s, m in rows], feature_spec)
    out = output.transform_raw_features(parsed)
    assert np.asarray(out["species_id"]).tolist() == [0, 1, -1]
    mean, std = label_scale(str(tmp_path / "transform"), mass.data_spec())
    # The graph's own float32 statistics are what they are (near 1e6, float32 steps by 0.06);
    # what serving needs is that z-scores map back to the labels through the pair read back.
    assert mean == pytest.approx(np.mean(masses), rel=1e-5)
    assert std == pytest.approx(np.std(masses), rel=1e-3)
    z = np.asarray(out[amp.LABEL_KEY], np.float64)
    assert z * std + mean == pytest.approx([1_001_000.0, 1_000_000.0, 1_002_500.0], abs=0.1)


def test_the_nodes_carry_the_task_and_the_options():
    """The nodes a user's pipeline gets, wired to the channels it passes (no run)."""
    from tfx import v1 as tfx
    from tfx.types import standard_artifacts

    examples = tfx.dsl.Channel(type=standard_artifacts.Examples)
    transformed = tfx.dsl.Channel(type=standard_artifacts.Examples)
    graph = tfx.dsl.Channel(type=standard_artifacts.TransformGraph)
    task = amp.Task(label="digit", classes=tuple("0123456789"))
    with pytest.raises(ValueError, match="second float32 model"):
        amp.trainer_twins(transformed, graph, task, amp.TrainOptions(model="mlp"))
    options = amp.TrainOptions(model="mlp", policy="auto")
    twins = amp.trainer_twins(transformed, graph, task, options)
    judged = amp.judges(examples, twins, task, amp.PromotionOptions(model_name="digits"))
    push = amp.pusher(twins, judged.gate, "/serving/digits")
    ids = [node.id for node in (*twins, *judged, push)]
    assert ids == [
        "TrainerFp32", "TrainerAmp", "Evaluator", "ProductionModel", "EvaluatorProduction",
        "InfraValidator", "SideBySide", "PromotionGate", "Pusher",
    ]  # fmt: skip
    assert twins.amp.inputs["examples"] is transformed
    assert twins.amp.inputs["transform_graph"] is graph
    assert judged.gate.inputs["examples"] is examples
    assert judged.gate.exec_properties["label"] == "digit"
    assert judged.gate.exec_properties["model_name"] == "digits"
    assert push.inputs["model_blessing"] is judged.gate.outputs["blessing"]
    # The AMP twin checks readiness and diagnoses; the float32 twin is the same model at float32.
    amp_config = json.loads(twins.amp.exec_properties["custom_config"])
    fp32_config = json.loads(twins.fp32.exec_properties["custom_config"])
    assert amp_config["data_spec"]["classes"] == list("0123456789")
    assert (amp_config["readiness"], fp32_config["policy"]) == (True, "float32")


def test_a_model_module_plugs_in_by_path_and_a_missing_one_is_named(tmp_path):
    from amp_pipeline.components.models.user_module import ModelModuleError

    module = amp.model_module(str(ROOT / "examples" / "custom_layer.py"))
    assert module["ref"].endswith("custom_layer.py") and len(module["sha256"]) == 64
    with pytest.raises(ModelModuleError, match="no_such.py"):
        amp.model_module(str(tmp_path / "no_such.py"))


def _result(**changes) -> dict:
    result = {
        "passed": True,
        "speed_record": {"gate_uses": "precision", "precision": {"ratio": 1.8}},
        "measurements": {"amp_accuracy": 0.91, "fp32_accuracy": 0.92},
    }
    return {**result, **changes}


def test_the_gate_outputs_a_condition_reads():
    assert pipeline_outputs(_result()) == {
        "promoted": 1,
        "precision_ratio": 1.8,
        "accuracy_change": pytest.approx(-0.01),
    }
    rejected = pipeline_outputs(
        _result(
            passed=False,
            speed_record={
                "gate_uses": "recipe",
                "precision": {"ratio": None},
                "recipe": {"ratio": 0.7},
            },
        )
    )
    assert rejected["promoted"] == 0 and rejected["precision_ratio"] == 0.7
    regression = pipeline_outputs(
        _result(
            measurements={"amp_accuracy": None, "fp32_accuracy": None},
            regression={"amp": {"mae": 1.1}, "fp32": {"mae": 1.0}},
        )
    )
    assert "accuracy_change" not in regression
    assert regression["error_change"] == pytest.approx(0.1)
    # Not measured: left out, so that a condition on it fails rather than reading a default.
    unmeasured = pipeline_outputs(_result(speed_record={}))
    assert "precision_ratio" not in unmeasured

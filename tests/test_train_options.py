"""TrainOptions is the one list of a trainer's settings: custom_config, TrainSpec and back."""

import dataclasses
import types

import pytest

from amp_pipeline.components.training.options import TrainOptions, TrainSpec
from amp_pipeline.components.training.trainer import spec_from_fn_args


def test_a_trainer_reads_back_exactly_the_options_create_pipeline_wrote():
    options = dataclasses.replace(
        TrainOptions(),
        model="mlp",
        policy="mixed_bfloat16",
        batch_size=32,
        seeds=3,
        tflite_variants=("int8",),
        readiness=True,
    )
    custom_config = {"data_spec": {"classes": ["a", "b"]}, **options.to_config()}
    fn_args = types.SimpleNamespace(
        custom_config=custom_config,
        train_files=["t/*"],
        eval_files=["e/*"],
        transform_output="tg",
        serving_model_dir="s",
        model_run_dir="r",
        train_steps=120,  # TrainArgs: may differ from the options' (a runtime parameter)
        eval_steps=7,
    )
    spec = spec_from_fn_args(fn_args)
    assert spec.options == dataclasses.replace(options, train_steps=120, eval_steps=7)
    assert spec.seed_list == [42, 43, 44]
    assert TrainSpec.from_json(spec.to_json()) == spec
    assert {f.name for f in dataclasses.fields(TrainOptions)} <= {
        f.name for f in dataclasses.fields(TrainSpec)
    }


def test_options_are_validated_where_they_are_defined():
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        TrainOptions(batch_size=0)
    with pytest.raises(ValueError, match="Received: serving_precision='half'"):
        TrainOptions(serving_precision="half")

"""create_pipeline(...): the one TFX pipeline every runner uses (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from tfx.components import ExampleValidator, SchemaGen, StatisticsGen
from tfx.orchestration.data_types import RuntimeParameter
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import example_gen_pb2

from amp_pipeline.components.data.anomaly_check import AnomalyCheck
from amp_pipeline.components.data.example_gen import CsvExampleGen, ImportExampleGen
from amp_pipeline.components.data.transform import Transform
from amp_pipeline.components.export import tflite
from amp_pipeline.components.gate.rules import GateConfig
from amp_pipeline.components.models.user_module import ModuleRef
from amp_pipeline.components.training import warm_start
from amp_pipeline.components.training.options import TrainOptions
from amp_pipeline.core.data_spec import DataSpec
from amp_pipeline.pipeline.amp_half import (
    PromotionOptions,
    TrainerFactory,
    judges,
    local_trainer,
    on_trainer_hardware,
    production_model_resolver,
    pusher,
    trainer_twins,
)
from amp_pipeline.pipeline.config import RunConfig, model_for, model_name_for, model_options_for

ANOMALY_CHECK = "AnomalyCheck"


def make_example_gen(data: DataSpec, input_base, pattern: str):
    """ExampleGen for the input: CSV through our reader, TFRecord (and converted image folders)
    through ImportExampleGen; with spans, TFX's static range names the newest selected span
    and the earlier spans of a rolling window travel beside it
    (components/data/spans/selection.py)."""
    input_config = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name="single_split", pattern=pattern)]
    )
    output_config = example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(
            splits=[
                example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=4),
                example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=1),
            ]
        )
    )
    range_config, earlier = None, ""
    # A compiled pipeline without --span: no range config, TFX's driver takes the newest span
    # when the run starts (kubeflow/cli.py::cluster_spans).
    if data.spans and not data.spans.get("newest_at_run_time"):
        from tfx.proto import range_config_pb2

        newest = data.spans["spans"][-1]
        range_config = range_config_pb2.RangeConfig(
            static_range=range_config_pb2.StaticRange(
                start_span_number=newest, end_span_number=newest
            )
        )
        if len(data.spans["spans"]) > 1:
            earlier = json.dumps(
                {
                    "patterns": data.spans["resolved"][:-1],
                    "fingerprint": data.spans["fingerprint"],
                }
            )
    if data.format == "csv":
        assert data.csv_format is not None  # inspection records one for every CSV
        return CsvExampleGen(
            input_base=input_base,
            csv_format=data.csv_format,
            input_config=input_config,
            output_config=output_config,
            range_config=range_config,
            earlier_spans=earlier,
        )
    return ImportExampleGen(
        input_base=input_base,
        input_config=input_config,
        output_config=output_config,
        range_config=range_config,
        earlier_spans=earlier,
    )


def promotion_options(config: RunConfig, data: DataSpec) -> PromotionOptions:
    """The run's gate thresholds and promotion options, from its configuration."""
    return PromotionOptions(
        gate=GateConfig(
            accuracy_tolerance=config.accuracy_tolerance,
            min_accuracy=config.min_accuracy,
            min_speedup=config.min_speedup,
            strict=config.parity == "strict",
            error_tolerance=config.error_tolerance,
            recall_tolerance=config.recall_tolerance,
            auc_tolerance=config.auc_tolerance,
            class_metrics=config.class_metrics,
            min_gain_over_baseline=config.min_gain_over_baseline,
        ),
        require_amp=config.require_amp,
        speed_rounds=config.speed_rounds,
        tfma_max_examples=config.tfma_max_examples,
        serving_latency_budget_ms=config.serving_latency_budget_ms,
        model_name=model_name_for(config, data),
    )


def twin_options(
    config: RunConfig,
    data: DataSpec,
    model_module: ModuleRef | None,
    policy: str,
    xla: bool,
    loss_scaling: bool,
    device: str,
) -> TrainOptions:
    """The AMP twin's TrainOptions: the run's shared options and this recipe (policy "auto":
    decided on the node the trainer lands on). The float32 twin is derived from it."""
    model = model_for(config, data)
    return dataclasses.replace(
        config.train,
        model=model,
        model_options=model_options_for(config, model),
        model_module=model_module.to_dict() if model_module else None,
        tflite_variants=tflite.variants_for(
            config.train.tflite_variants,
            bool(data.text_features or data.categorical_features or data.bag_features),
            data.regression,
        ),
        policy=policy,
        xla=xla if policy != "float32" else False,
        loss_scaling=loss_scaling if policy != "float32" else False,
        device=device,
        # The AMP trainer checks AMP readiness before training and measures why AMP was not
        # faster after it. Either twin may ship, so both build their edge variants.
        readiness=True,
        diagnose=True,
    )


def data_components(data: DataSpec, data_root, pattern: str, model_module: ModuleRef | None):
    """Ingestion, validation and Transform: ExampleGen, StatisticsGen, SchemaGen,
    ExampleValidator, AnomalyCheck, Transform (in that order)."""
    example_gen = make_example_gen(data, data_root, pattern)
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = SchemaGen(
        statistics=statistics_gen.outputs["statistics"],
        infer_feature_shape=True,
        exclude_splits=["eval"],  # the eval split is then validated against train's schema
    )
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    vocabulary = (
        *data.text_features,
        *data.categorical_features,
        *(b for b, _ in data.bag_features),
        *data.string_features,
    )
    anomaly_check = AnomalyCheck(
        anomalies=example_validator.outputs["anomalies"],
        schema=schema_gen.outputs["schema"],
        # Read through a vocabulary with an OOV id: a value new in eval is not drift, unless
        # the user declared the column closed (--closed-columns).
        text_features=",".join(n for n in vocabulary if n not in data.closed_features),
        # Missing cells anywhere in the file: the column is optional, whichever split they
        # fall into.
        optional_features=",".join(sorted(data.missing)),
    )
    transform = Transform(
        examples=example_gen.outputs["examples"],
        schema=anomaly_check.outputs["curated_schema"],
        preprocessing_fn="amp_pipeline.components.data.preprocessing.preprocessing_fn",
        # Transform's pre- and post-transform statistics are read by nothing here (StatisticsGen
        # already has the raw data's): two TFDV passes saved.
        disable_statistics=True,
        # The module is Transform's business only when it brings a preprocessing_fn: a change
        # to the model alone keeps Transform's output cached.
        custom_config={
            "data_spec": data.to_dict(),
            "model_module": model_module.to_dict()
            if model_module and model_module.preprocessing
            else None,
            "custom_preprocessing": bool(model_module and model_module.preprocessing),
        },
    )
    return example_gen, statistics_gen, schema_gen, example_validator, anomaly_check, transform


def create_check_pipeline(
    config: RunConfig,
    data: DataSpec,
    model_module: ModuleRef | None,
    metadata_connection_config=None,
    beam_pipeline_args: list[str] | None = None,
) -> Pipeline:
    """The data half of the pipeline, for `check-model`: what the trainers would read."""
    components = data_components(data, data.input_base, data.input_pattern, model_module)
    return Pipeline(
        pipeline_name=f"{config.pipeline_name}-check",
        pipeline_root=str(config.pipeline_root),
        components=list(components),
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list[Any](beam_pipeline_args or []),  # TFX's: str or placeholder
    )


def create_pipeline(
    config: RunConfig,
    data: DataSpec,
    amp: TrainOptions,
    *,
    pipeline_root: str,
    data_root,
    data_pattern: str,
    serving_base: str,
    train_steps,
    accuracy_tolerance,
    amp_train_steps=None,
    make_trainer: TrainerFactory = local_trainer,
    place_speed_check: Callable[[Any], Any] = on_trainer_hardware,
    model_module: ModuleRef | None = None,
    infra_requested_at: str = "compiled",
    metadata_connection_config=None,
    beam_pipeline_args: list[str] | None = None,
) -> Pipeline:
    """The whole pipeline: ingestion and validation, Transform, two trainers, two evaluations
    (vs float32, vs production), infra validation on the local server, the side-by-side speed
    measurement, the promotion gate, push.

    Like TFX's penguin template it takes plain arguments; where it runs is the runners'
    business (pipeline/local_runner.py, kubeflow/runner.py): `data_root`, `train_steps` (an
    int) and `accuracy_tolerance` may be runtime parameters, `make_trainer` makes the trainer
    nodes, `place_speed_check` puts the SideBySide node on the trainers' hardware, and `amp`
    (twin_options) may leave the precision to the node (`policy="auto"`).
    `model_module` is the user's model module, used by both trainers and, when it defines one,
    its preprocessing_fn by Transform. `infra_requested_at`: a new value per local run keeps
    the infra validation out of the cache.
    """
    train_steps = train_steps if isinstance(train_steps, RuntimeParameter) else int(train_steps)
    example_gen, statistics_gen, schema_gen, example_validator, anomaly_check, transform = (
        data_components(data, data_root, data_pattern, model_module)
    )

    # The model in production: the gate's comparison, and the twins' warm start.
    production = production_model_resolver()
    twins = trainer_twins(
        transform.outputs["transformed_examples"],
        transform.outputs["transform_graph"],
        data,
        amp,
        train_steps=train_steps,
        amp_train_steps=amp_train_steps,
        make_trainer=make_trainer,
        base_model=production.outputs["model"]
        if warm_start.wanted(amp.warm_start, bool(data.spans))
        else None,
    )
    judged = judges(
        example_gen.outputs["examples"],
        twins,
        data,
        promotion_options(config, data),
        accuracy_tolerance=accuracy_tolerance,
        place_speed_check=place_speed_check,
        infra_requested_at=infra_requested_at,
        production_model=production,
    )
    push = pusher(twins, judged.gate, f"{serving_base}/{model_name_for(config, data)}")
    return Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=pipeline_root,
        components=[
            example_gen,
            statistics_gen,
            schema_gen,
            example_validator,
            anomaly_check,
            transform,
            *twins,
            *judged,
            push,
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list[Any](beam_pipeline_args or []),  # TFX's: str or placeholder
    )

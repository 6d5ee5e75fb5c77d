"""create_pipeline(config): the one TFX pipeline every runner uses."""

from __future__ import annotations

import datetime
import json

import tensorflow_model_analysis as tfma
from kfp.pipeline_spec import pipeline_spec_pb2
from tfx import v1 as tfx

from components.anomaly_check import AnomalyCheck
from components.csv_example_gen import CsvExampleGen
from components.infra_validation import InfraValidator
from components.model_module import ModuleRef
from components.precision import Recipe
from components.preprocessing import LABEL_KEY
from components.promotion_gate import PromotionGate
from components.pusher import Pusher
from components.speed_check import SideBySide
from kubeflow.deployment import Deployment
from pipeline.config import RunConfig, model_for, model_name_for, model_options_for
from pipeline.ingest import MAX_SLICED_CLASSES, DataSpec

TRAINER_FP32 = "TrainerFp32"
TRAINER_AMP = "TrainerAmp"
EVALUATOR = "Evaluator"
PRODUCTION_MODEL = "ProductionModel"
EVALUATOR_PRODUCTION = "EvaluatorProduction"
INFRA_VALIDATOR = "InfraValidator"
SIDE_BY_SIDE = "SideBySide"
GATE = "PromotionGate"
PUSHER = "Pusher"
CANDIDATE = "candidate"
BASELINE = "baseline"


def eval_config(config: RunConfig, data: DataSpec) -> tfma.EvalConfig:
    """AMP candidate vs a baseline, on the whole eval split and per class.

    Metrics: accuracy (gated: no drop beyond the tolerance, at least the minimum), loss, example
    count, and AUC of the positive class for binary labels.
    """

    def spec(name: str, is_baseline: bool) -> tfma.ModelSpec:
        return tfma.ModelSpec(
            name=name,
            signature_name="serving_default",
            preprocessing_function_names=["transform_features"],
            label_key=LABEL_KEY,
            prediction_key="probabilities",
            is_baseline=is_baseline,
        )

    accuracy_threshold = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(lower_bound={"value": config.min_accuracy}),
        change_threshold=tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.HIGHER_IS_BETTER,
            absolute={"value": -config.accuracy_tolerance},
        ),
    )
    metrics_specs = [
        tfma.MetricsSpec(
            metrics=[
                tfma.MetricConfig(
                    class_name="SparseCategoricalAccuracy", threshold=accuracy_threshold
                ),
                tfma.MetricConfig(class_name="SparseCategoricalCrossentropy"),
                tfma.MetricConfig(class_name="ExampleCount"),
            ]
        )
    ]
    if data.num_classes == 2:
        metrics_specs.append(
            tfma.MetricsSpec(
                metrics=[tfma.MetricConfig(class_name="AUC")],
                binarize=tfma.BinarizationOptions(class_ids={"values": [1]}),
            )
        )
    return tfma.EvalConfig(
        model_specs=[spec(CANDIDATE, False), spec(BASELINE, True)],
        # Per-class slices, where there are few enough classes to read them (ingest says so).
        slicing_specs=[tfma.SlicingSpec()]
        + (
            [tfma.SlicingSpec(feature_keys=[data.label])]
            if data.num_classes <= MAX_SLICED_CLASSES
            else []
        ),
        metrics_specs=metrics_specs,
    )


def make_example_gen(data: DataSpec, input_base, pattern: str):
    input_config = tfx.proto.Input(
        splits=[tfx.proto.Input.Split(name="single_split", pattern=pattern)]
    )
    output_config = tfx.proto.Output(
        split_config=tfx.proto.SplitConfig(
            splits=[
                tfx.proto.SplitConfig.Split(name="train", hash_buckets=4),
                tfx.proto.SplitConfig.Split(name="eval", hash_buckets=1),
            ]
        )
    )
    if data.format == "csv":
        return CsvExampleGen(
            input_base=input_base,
            csv_format=data.csv_format,
            input_config=input_config,
            output_config=output_config,
        )
    return tfx.components.ImportExampleGen(
        input_base=input_base, input_config=input_config, output_config=output_config
    )


def _trainer(
    node_id: str,
    config: RunConfig,
    data: DataSpec,
    recipe: Recipe,
    policy: str,
    transform,
    train_steps,
    deployment: Deployment | None,
    model_module: ModuleRef | None,
):
    custom_config = {
        "data_spec": data.to_dict(),
        "model": model_for(config, data),
        "model_module": model_module.to_dict() if model_module else None,
        # The AMP trainer checks AMP readiness before training and measures why AMP was not
        # faster after it; the float32 baseline does neither.
        "readiness": node_id == TRAINER_AMP,
        "diagnose": node_id == TRAINER_AMP,
        "model_options": model_options_for(config, model_for(config, data)),
        "policy": policy,
        "xla": recipe.xla if policy != "float32" else False,
        "loss_scaling": recipe.loss_scaling if policy != "float32" else False,
        "device": recipe.hardware.device,
        "batch_size": config.batch_size,
        "learning_rate": config.learning_rate,
        "seed": config.seed,
        "seeds": [config.seed + k for k in range(config.seeds)],
        "loss_scale_initial": config.loss_scale_initial,
        "loss_scale_growth_interval": config.loss_scale_growth_interval,
        "collapse_patience": config.collapse_patience,
        "serving_precision": config.serving_precision,
        # Only the candidate is shipped: only its edge variants are built and checked.
        "tflite_variants": list(config.tflite_variants) if node_id == TRAINER_AMP else [],
        "tflite_min_agreement": config.tflite_min_agreement,
        "tflite_max_int8_drop": config.tflite_max_int8_drop,
    }
    trainer_class = tfx.components.Trainer
    if deployment is not None:
        # On the cluster the trainer decides its precision from the GPU it lands on.
        custom_config.update(
            policy="float32" if policy == "float32" else "auto",
            device="auto",
            xla=False,
            loss_scaling=False,
        )
    if deployment is not None and deployment.target == "vertex":
        vertex = tfx.extensions.google_cloud_ai_platform
        trainer_class = vertex.Trainer
        machine = {"machine_type": deployment.machine_type}
        if deployment.accelerator_count:
            machine.update(
                accelerator_type=deployment.accelerator,
                accelerator_count=deployment.accelerator_count,
            )
        custom_config.update(
            {
                vertex.ENABLE_VERTEX_KEY: True,
                vertex.VERTEX_REGION_KEY: deployment.region,
                vertex.TRAINING_ARGS_KEY: {
                    "worker_pool_specs": [
                        {
                            "machine_spec": machine,
                            "replica_count": 1,
                            "container_spec": {"image_uri": deployment.image},
                        }
                    ]
                },
            }
        )
    trainer = trainer_class(
        run_fn="components.trainer.run_fn",
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        train_args=(
            train_steps
            if isinstance(train_steps, tfx.dsl.experimental.RuntimeParameter)
            else tfx.proto.TrainArgs(num_steps=train_steps)
        ),
        eval_args=tfx.proto.EvalArgs(num_steps=config.eval_steps),
        custom_config=custom_config,
    ).with_id(node_id)
    if deployment is not None and deployment.target == "kubeflow" and deployment.accelerator_count:
        resources = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec
        trainer.with_platform_config(
            resources(
                accelerator=resources.AcceleratorConfig(
                    type=deployment.kubernetes_accelerator, count=deployment.accelerator_count
                )
            )
        )
    return trainer


def data_components(data: DataSpec, data_root, pattern: str, model_module: ModuleRef | None):
    """Ingestion, validation and Transform: ExampleGen, StatisticsGen, SchemaGen,
    ExampleValidator, AnomalyCheck, Transform (in that order)."""
    example_gen = make_example_gen(data, data_root, pattern)
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = tfx.components.SchemaGen(
        statistics=statistics_gen.outputs["statistics"],
        infer_feature_shape=True,
        exclude_splits=["eval"],  # the eval split is then validated against train's schema
    )
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    anomaly_check = AnomalyCheck(anomalies=example_validator.outputs["anomalies"])
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn="components.preprocessing.preprocessing_fn",
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
    transform.add_upstream_node(anomaly_check)
    return example_gen, statistics_gen, schema_gen, example_validator, anomaly_check, transform


def create_check_pipeline(
    config: RunConfig,
    data: DataSpec,
    model_module: ModuleRef | None,
    metadata_connection_config=None,
    beam_pipeline_args: list[str] | None = None,
) -> tfx.dsl.Pipeline:
    """The data half of the pipeline, for `check-model`: what the trainers would read."""
    components = data_components(data, data.input_base, data.input_pattern, model_module)
    return tfx.dsl.Pipeline(
        pipeline_name=f"{config.pipeline_name}-check",
        pipeline_root=str(config.pipeline_root),
        components=list(components),
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=beam_pipeline_args or [],
    )


def create_pipeline(
    config: RunConfig,
    data: DataSpec,
    recipe: Recipe,
    metadata_connection_config=None,
    beam_pipeline_args: list[str] | None = None,
    deployment: Deployment | None = None,
    model_module: ModuleRef | None = None,
) -> tfx.dsl.Pipeline:
    """The whole pipeline: ingestion and validation, Transform, two trainers, two evaluations
    (vs float32, vs production), infra validation on the local server, the promotion gate, push.

    With a `deployment` (Kubeflow/Vertex), the data root, the training steps and the accuracy
    tolerance become runtime parameters, and the trainers request the deployment's GPU.
    `model_module` is the user's model module (a file path locally, an import path in a
    compiled pipeline), used by both trainers and, when it defines one, its preprocessing_fn
    by Transform.
    """
    if deployment is None:
        data_root, pattern = data.input_base, data.input_pattern
        train_steps, tolerance = config.train_steps, config.accuracy_tolerance
        pipeline_root, serving_base = str(config.pipeline_root), str(config.serving_dir)
    else:
        RuntimeParameter = tfx.dsl.experimental.RuntimeParameter  # noqa: N806
        data_root = RuntimeParameter(name="data_root", ptype=str, default=deployment.data_root)
        # TrainArgs as a whole is the parameter (TFX takes no parameter inside a proto):
        # a JSON TrainArgs such as {"num_steps": 300}.
        train_steps = RuntimeParameter(
            name="train_args", ptype=str, default=json.dumps({"num_steps": config.train_steps})
        )
        tolerance = RuntimeParameter(
            name="accuracy_tolerance", ptype=float, default=config.accuracy_tolerance
        )
        pattern = "*"
        pipeline_root, serving_base = deployment.pipeline_root, deployment.serving_base
    example_gen, statistics_gen, schema_gen, example_validator, anomaly_check, transform = (
        data_components(data, data_root, pattern, model_module)
    )
    trainer_fp32 = _trainer(
        TRAINER_FP32,
        config,
        data,
        recipe,
        "float32",
        transform,
        train_steps,
        deployment,
        model_module,
    )
    trainer_amp = _trainer(
        TRAINER_AMP,
        config,
        data,
        recipe,
        recipe.policy,
        transform,
        (config.amp_train_steps or train_steps) if deployment is None else train_steps,
        deployment,
        model_module,
    )

    def evaluate_against(baseline, node_id: str):
        """TFMA on the eval split: the AMP candidate vs `baseline`, with the gate's thresholds."""
        return tfx.components.Evaluator(
            examples=example_gen.outputs["examples"],
            model=trainer_amp.outputs["model"],
            baseline_model=baseline,
            eval_config=eval_config(config, data),
            example_splits=["eval"],
        ).with_id(node_id)

    evaluator = evaluate_against(trainer_fp32.outputs["model"], EVALUATOR)
    # The model in production: the latest AMP model the gate promoted (and so pushed).
    production_model = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        model=tfx.dsl.Channel(
            type=tfx.types.standard_artifacts.Model,
            producer_component_id=TRAINER_AMP,
            output_key="model",
        ),
        model_blessing=tfx.dsl.Channel(
            type=tfx.types.standard_artifacts.ModelBlessing,
            producer_component_id=GATE,
            output_key="blessing",
        ),
    ).with_id(PRODUCTION_MODEL)
    evaluator_production = evaluate_against(production_model.outputs["model"], EVALUATOR_PRODUCTION)
    infra_validator = InfraValidator(
        model=trainer_amp.outputs["model"],
        examples=example_gen.outputs["examples"],
        model_name=model_name_for(config, data),
        latency_budget_ms=config.serving_latency_budget_ms,
        # A new value per local run: the validation is never answered from the cache. (On a
        # cluster the compiled value is fixed; the platform's caching option decides.)
        requested_at=datetime.datetime.now(datetime.timezone.utc).isoformat()
        if deployment is None
        else "compiled",
    ).with_id(INFRA_VALIDATOR)
    side_by_side = SideBySide(
        fp32_run=trainer_fp32.outputs["model_run"],
        amp_run=trainer_amp.outputs["model_run"],
        rounds=config.speed_rounds,
    ).with_id(SIDE_BY_SIDE)
    gate = PromotionGate(
        parity_evaluation=evaluator.outputs["evaluation"],
        production_evaluation=evaluator_production.outputs["evaluation"],
        production_blessing=evaluator_production.outputs["blessing"],
        fp32_run=trainer_fp32.outputs["model_run"],
        amp_run=trainer_amp.outputs["model_run"],
        model=trainer_amp.outputs["model"],
        infra_blessing=infra_validator.outputs["blessing"],
        accuracy_tolerance=tolerance,
        min_accuracy=config.min_accuracy,
        min_speedup=config.min_speedup,
        examples=example_gen.outputs["examples"],
        speed=side_by_side.outputs["comparison"],
        label=data.label,
        label_kind=data.label_kind,
        strict=int(config.parity == "strict"),
    ).with_id(GATE)
    pusher = Pusher(
        model=trainer_amp.outputs["model"],
        model_blessing=gate.outputs["blessing"],
        push_base=f"{serving_base}/{model_name_for(config, data)}",
    ).with_id(PUSHER)
    return tfx.dsl.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=pipeline_root,
        components=[
            example_gen,
            statistics_gen,
            schema_gen,
            example_validator,
            anomaly_check,
            transform,
            trainer_fp32,
            trainer_amp,
            evaluator,
            production_model,
            evaluator_production,
            infra_validator,
            side_by_side,
            gate,
            pusher,
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=beam_pipeline_args or [],
    )

"""create_pipeline(...): the one TFX pipeline every runner uses (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow_model_analysis as tfma
from tfx import v1 as tfx

from amp_pipeline.components.data.anomaly_check import AnomalyCheck
from amp_pipeline.components.data.example_gen import CsvExampleGen, ImportExampleGen
from amp_pipeline.components.data.ingest import MAX_SLICED_CLASSES
from amp_pipeline.components.data.transform import Transform
from amp_pipeline.components.export import tflite
from amp_pipeline.components.gate.component import PromotionGate
from amp_pipeline.components.gate.evaluator import Evaluator
from amp_pipeline.components.gate.production_evaluator import ProductionEvaluator
from amp_pipeline.components.gate.side_by_side import SideBySide
from amp_pipeline.components.models.user_module import ModuleRef
from amp_pipeline.components.training.options import TrainOptions
from amp_pipeline.core import names
from amp_pipeline.core.data_spec import DataSpec
from amp_pipeline.pipeline.config import RunConfig, model_for, model_name_for, model_options_for
from amp_pipeline.serving.infra_validator import InfraValidator
from amp_pipeline.serving.pusher import Pusher

ANOMALY_CHECK = "AnomalyCheck"
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
    count, and ROC and PR AUC of the positive class for binary labels (the gate's own rules on
    them are components/gate/class_metrics.py). For a regression label: mean
    absolute error (gated: no rise beyond the error tolerance, a share of the baseline's), mean
    squared error, its root and the example count, on the raw label and the served
    predictions, both in the label's units.
    """

    def spec(name: str, is_baseline: bool) -> tfma.ModelSpec:
        return tfma.ModelSpec(
            name=name,
            signature_name=names.SERVING_SIGNATURE,
            preprocessing_function_names=[names.TRANSFORM_SIGNATURE],
            label_key=data.label if data.regression else names.LABEL_KEY,
            prediction_key=names.PREDICTIONS if data.regression else names.PROBABILITIES,
            is_baseline=is_baseline,
        )

    if data.regression:
        return tfma.EvalConfig(
            model_specs=[spec(CANDIDATE, False), spec(BASELINE, True)],
            slicing_specs=[tfma.SlicingSpec()],
            metrics_specs=[
                tfma.MetricsSpec(
                    metrics=[
                        tfma.MetricConfig(
                            class_name="MeanAbsoluteError",
                            threshold=tfma.MetricThreshold(
                                change_threshold=tfma.GenericChangeThreshold(
                                    direction=tfma.MetricDirection.LOWER_IS_BETTER,
                                    relative={"value": config.error_tolerance},
                                )
                            ),
                        ),
                        tfma.MetricConfig(class_name="MeanSquaredError"),
                        tfma.MetricConfig(class_name="RootMeanSquaredError"),
                        tfma.MetricConfig(class_name="ExampleCount"),
                    ]
                )
            ],
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
                # ROC and PR AUC: the second reading of the gate's roc_auc and pr_auc rules.
                metrics=[
                    tfma.MetricConfig(class_name="AUC"),
                    tfma.MetricConfig(class_name="AUCPrecisionRecall"),
                ],
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
    return ImportExampleGen(
        input_base=input_base, input_config=input_config, output_config=output_config
    )


TrainerFactory = Callable[..., Any]
"""How a runner makes a trainer node: called with TFX Trainer's keyword arguments and the node
id; the cluster runner (kubeflow/runner.py) returns Vertex's Trainer or adds a GPU request."""


def local_trainer(node_id: str, **kwargs):
    """The default trainer node: TFX's Trainer, in this process."""
    return tfx.components.Trainer(**kwargs).with_id(node_id)


def on_trainer_hardware(node):
    """Where the side-by-side speed measurement runs. Locally: where the trainers ran (this
    machine). A cluster runner puts it on the trainers' accelerator (kubeflow/runner.py), so
    the ratio the gate uses is timed on the hardware the AMP recipe was chosen for."""
    return node


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


def fp32_options(amp: TrainOptions) -> TrainOptions:
    return dataclasses.replace(
        amp,
        policy="float32",
        xla=False,
        loss_scaling=False,
        readiness=False,
        diagnose=False,
    )


def _train_args(steps):
    """TrainArgs for `steps`, or the runtime parameter a cluster runner passed."""
    if isinstance(steps, tfx.dsl.experimental.RuntimeParameter):
        return steps
    return tfx.proto.TrainArgs(num_steps=steps)


def production_model_resolver() -> tfx.dsl.Resolver:
    """The model in production: the latest model the gate promoted (and so pushed), whichever
    twin it was: the Model channel is every trainer's (the blessing names the twin)."""
    return tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(
            type=tfx.types.standard_artifacts.ModelBlessing,
            producer_component_id=GATE,
            output_key="blessing",
        ),
    ).with_id(PRODUCTION_MODEL)


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
) -> tfx.dsl.Pipeline:
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
    train_steps = (
        train_steps
        if isinstance(train_steps, tfx.dsl.experimental.RuntimeParameter)
        else int(train_steps)
    )
    example_gen, statistics_gen, schema_gen, example_validator, anomaly_check, transform = (
        data_components(data, data_root, data_pattern, model_module)
    )

    def trainer(node_id: str, options: TrainOptions, steps):
        return make_trainer(
            node_id,
            run_fn="amp_pipeline.components.training.trainer.run_fn",
            examples=transform.outputs["transformed_examples"],
            transform_graph=transform.outputs["transform_graph"],
            train_args=_train_args(steps),
            eval_args=tfx.proto.EvalArgs(num_steps=options.eval_steps),
            custom_config={"data_spec": data.to_dict(), **options.to_config()},
        )

    trainer_fp32 = trainer(TRAINER_FP32, fp32_options(amp), train_steps)
    trainer_amp = trainer(TRAINER_AMP, amp, amp_train_steps or train_steps)

    def evaluate_against(baseline, node_id: str, evaluator=Evaluator):
        """TFMA on the eval split: the AMP candidate vs `baseline`, with the gate's thresholds."""
        return evaluator(
            examples=example_gen.outputs["examples"],
            model=trainer_amp.outputs["model"],
            baseline_model=baseline,
            eval_config=eval_config(config, data),
            example_splits=["eval"],
            max_examples=config.tfma_max_examples,
        ).with_id(node_id)

    evaluator = evaluate_against(trainer_fp32.outputs["model"], EVALUATOR)
    production_model = production_model_resolver()
    # Before the first push there is no production model, and no TFMA run for it.
    evaluator_production = evaluate_against(
        production_model.outputs["model"], EVALUATOR_PRODUCTION, ProductionEvaluator
    )

    infra_validator = InfraValidator(
        model=trainer_amp.outputs["model"],
        examples=example_gen.outputs["examples"],
        model_name=model_name_for(config, data),
        latency_budget_ms=config.serving_latency_budget_ms,
        requested_at=infra_requested_at,
    ).with_id(INFRA_VALIDATOR)
    side_by_side = place_speed_check(
        SideBySide(
            fp32_run=trainer_fp32.outputs["model_run"],
            amp_run=trainer_amp.outputs["model_run"],
            rounds=config.speed_rounds,
        ).with_id(SIDE_BY_SIDE)
    )
    gate = PromotionGate(
        parity_evaluation=evaluator.outputs["evaluation"],
        production_evaluation=evaluator_production.outputs["evaluation"],
        production_blessing=evaluator_production.outputs["blessing"],
        fp32_run=trainer_fp32.outputs["model_run"],
        amp_run=trainer_amp.outputs["model_run"],
        model=trainer_amp.outputs["model"],
        fp32_model=trainer_fp32.outputs["model"],
        infra_blessing=infra_validator.outputs["blessing"],
        accuracy_tolerance=accuracy_tolerance,
        min_accuracy=config.min_accuracy,
        min_speedup=config.min_speedup,
        examples=example_gen.outputs["examples"],
        speed=side_by_side.outputs["comparison"],
        label=data.label,
        label_kind=data.label_kind,
        strict=int(config.parity == "strict"),
        task=data.task,
        error_tolerance=config.error_tolerance,
        label_mean=data.label_mean,
        require_amp=int(config.require_amp),
        recall_tolerance=config.recall_tolerance,
        auc_tolerance=config.auc_tolerance,
        class_metrics_for=config.class_metrics,
        min_gain_over_baseline=(
            -1.0 if config.min_gain_over_baseline is None else config.min_gain_over_baseline
        ),
        # The float32 twin is served by the gate itself, only when it may ship.
        model_name=model_name_for(config, data),
        latency_budget_ms=config.serving_latency_budget_ms,
    ).with_id(GATE)
    pusher = Pusher(
        model=trainer_amp.outputs["model"],
        fp32_model=trainer_fp32.outputs["model"],
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

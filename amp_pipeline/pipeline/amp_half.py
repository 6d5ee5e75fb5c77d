"""The pipeline after Transform, from channels: the trainer twins, the two evaluations (AMP vs
float32, AMP vs production), the infra validation, the side-by-side speed measurement, the
promotion gate and the Pusher.

`create_pipeline` (pipeline.py) wires these after its own data components; `amp_pipeline.tfx`
hands the same functions to users who bring their own ExampleGen and Transform. One code path:
what the command line runs is what a user's pipeline gets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow_model_analysis as tfma
from tfx.components import Trainer
from tfx.dsl.components.common.resolver import Resolver
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import (
    LatestBlessedModelStrategy,
)
from tfx.orchestration.data_types import RuntimeParameter
from tfx.proto import trainer_pb2
from tfx.types.channel import Channel
from tfx.types.standard_artifacts import Model, ModelBlessing

from amp_pipeline.components.data.labels import MAX_SLICED_CLASSES
from amp_pipeline.components.gate.component import PromotionGate
from amp_pipeline.components.gate.evaluator import Evaluator
from amp_pipeline.components.gate.production_evaluator import ProductionEvaluator
from amp_pipeline.components.gate.rules import GateConfig
from amp_pipeline.components.speed.side_by_side import SideBySide
from amp_pipeline.components.training.options import TrainOptions
from amp_pipeline.core import names
from amp_pipeline.core.data_spec import DataSpec
from amp_pipeline.serving.infra_validator import InfraValidator
from amp_pipeline.serving.pusher import Pusher

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
RUN_FN = "amp_pipeline.components.training.trainer.run_fn"


@dataclasses.dataclass(frozen=True)
class PromotionOptions:
    """How the twins are judged and shipped, beyond the gate's thresholds (GateConfig).

    Attributes:
        gate: the gate's thresholds.
        require_amp: ship the AMP twin or nothing; by default the float32 twin ships when AMP
            loses and the float32 twin passes the rules that do not compare the twins.
        speed_rounds: rounds of the side-by-side speed measurement (0: none).
        tfma_max_examples: TFMA reads at most this many eval examples (0: every one).
        serving_latency_budget_ms: largest p99 latency of a single-example request to the
            candidate behind the local server (infra validation).
        model_name: the served model's name: `<push_base>/<version>/`.
    """

    gate: GateConfig = GateConfig()
    require_amp: bool = False
    speed_rounds: int = 7
    tfma_max_examples: int = 50_000
    serving_latency_budget_ms: float = 500.0
    model_name: str = "model"


class Twins(NamedTuple):
    """The two Trainer nodes: float32 and AMP, the same model and data."""

    fp32: Any
    amp: Any


class Judges(NamedTuple):
    """The nodes between the twins and the push, in pipeline order."""

    evaluator: Any
    production_model: Any
    evaluator_production: Any
    infra_validator: Any
    side_by_side: Any
    gate: Any


TrainerFactory = Callable[..., Any]
"""How a runner makes a trainer node: called with TFX Trainer's keyword arguments and the node
id; the cluster runner (kubeflow/runner.py) returns Vertex's Trainer or adds a GPU request."""


def local_trainer(node_id: str, **kwargs):
    """The default trainer node: TFX's Trainer, in this process."""
    return Trainer(**kwargs).with_id(node_id)


def on_trainer_hardware(node):
    """Where the side-by-side speed measurement runs. Locally: where the trainers ran (this
    machine). A cluster runner puts it on the trainers' accelerator (kubeflow/runner.py), so
    the ratio the gate uses is timed on the hardware the AMP recipe was chosen for."""
    return node


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
    if isinstance(steps, RuntimeParameter):
        return steps
    return trainer_pb2.TrainArgs(num_steps=int(steps))


def trainer_twins(
    transformed_examples,
    transform_graph,
    data: DataSpec,
    amp: TrainOptions,
    *,
    train_steps=None,
    amp_train_steps=None,
    make_trainer: TrainerFactory = local_trainer,
    base_model=None,
) -> Twins:
    """The float32 and AMP Trainer nodes on Transform's output. `amp` is the AMP twin's
    options; the float32 twin's are derived from it (fp32_options). `train_steps` (an int or a
    runtime parameter) defaults to `amp.train_steps`. `base_model`: the production model's
    channel (production_model_resolver), which both twins warm-start from where it matches
    (components/training/warm_start.py)."""
    steps = amp.train_steps if train_steps is None else train_steps
    extra = {"base_model": base_model} if base_model is not None else {}

    def trainer(node_id: str, options: TrainOptions, node_steps):
        return make_trainer(
            node_id,
            run_fn=RUN_FN,
            examples=transformed_examples,
            transform_graph=transform_graph,
            train_args=_train_args(node_steps),
            eval_args=trainer_pb2.EvalArgs(num_steps=options.eval_steps),
            custom_config={"data_spec": data.to_dict(), **options.to_config()},
            **extra,
        )

    return Twins(
        fp32=trainer(TRAINER_FP32, fp32_options(amp), steps),
        amp=trainer(TRAINER_AMP, amp, amp_train_steps or steps),
    )


def eval_config(gate: GateConfig, data: DataSpec) -> tfma.EvalConfig:
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
                                    relative={"value": gate.error_tolerance},
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
        value_threshold=tfma.GenericValueThreshold(lower_bound={"value": gate.min_accuracy}),
        change_threshold=tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.HIGHER_IS_BETTER,
            absolute={"value": -gate.accuracy_tolerance},
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


def production_model_resolver() -> Resolver:
    """The model in production: the latest model the gate promoted (and so pushed), whichever
    twin it was: the Model channel is every trainer's (the blessing names the twin)."""
    return Resolver(
        strategy_class=LatestBlessedModelStrategy,
        model=Channel(type=Model),
        model_blessing=Channel(
            type=ModelBlessing,
            producer_component_id=GATE,
            output_key="blessing",
        ),
    ).with_id(PRODUCTION_MODEL)


def judges(
    examples,
    twins: Twins,
    data: DataSpec,
    options: PromotionOptions,
    *,
    accuracy_tolerance=None,
    place_speed_check: Callable[[Any], Any] = on_trainer_hardware,
    infra_requested_at: str = "compiled",
    production_model=None,
) -> Judges:
    """Everything that judges the twins, on ExampleGen's raw `examples` (the eval split): TFMA
    against float32 and against production, the infra validation, the speed measurement and
    the gate. `accuracy_tolerance` may be a runtime parameter (a cluster runner's); None: the
    gate config's. `infra_requested_at`: a new value per local run keeps the infra validation
    out of the cache."""
    gate_config = options.gate
    tolerance = gate_config.accuracy_tolerance if accuracy_tolerance is None else accuracy_tolerance

    def evaluate_against(baseline, node_id: str, evaluator=Evaluator):
        """TFMA on the eval split: the AMP candidate vs `baseline`, with the gate's thresholds."""
        return evaluator(
            examples=examples,
            model=twins.amp.outputs["model"],
            baseline_model=baseline,
            eval_config=eval_config(gate_config, data),
            example_splits=["eval"],
            max_examples=options.tfma_max_examples,
        ).with_id(node_id)

    evaluator = evaluate_against(twins.fp32.outputs["model"], EVALUATOR)
    if production_model is None:  # the trainers' base model, when they warm-start
        production_model = production_model_resolver()
    # Before the first push there is no production model, and no TFMA run for it.
    evaluator_production = evaluate_against(
        production_model.outputs["model"], EVALUATOR_PRODUCTION, ProductionEvaluator
    )
    infra_validator = InfraValidator(
        model=twins.amp.outputs["model"],
        examples=examples,
        model_name=options.model_name,
        latency_budget_ms=options.serving_latency_budget_ms,
        requested_at=infra_requested_at,
    ).with_id(INFRA_VALIDATOR)
    side_by_side = place_speed_check(
        SideBySide(
            fp32_run=twins.fp32.outputs["model_run"],
            amp_run=twins.amp.outputs["model_run"],
            rounds=options.speed_rounds,
        ).with_id(SIDE_BY_SIDE)
    )
    gate = PromotionGate(
        parity_evaluation=evaluator.outputs["evaluation"],
        production_evaluation=evaluator_production.outputs["evaluation"],
        production_blessing=evaluator_production.outputs["blessing"],
        fp32_run=twins.fp32.outputs["model_run"],
        amp_run=twins.amp.outputs["model_run"],
        model=twins.amp.outputs["model"],
        fp32_model=twins.fp32.outputs["model"],
        infra_blessing=infra_validator.outputs["blessing"],
        accuracy_tolerance=tolerance,
        min_accuracy=gate_config.min_accuracy,
        min_speedup=gate_config.min_speedup,
        examples=examples,
        speed=side_by_side.outputs["comparison"],
        label=data.label,
        label_kind=data.label_kind,
        strict=int(gate_config.strict),
        task=data.task,
        error_tolerance=gate_config.error_tolerance,
        label_mean=data.label_mean,
        require_amp=int(options.require_amp),
        recall_tolerance=gate_config.recall_tolerance,
        auc_tolerance=gate_config.auc_tolerance,
        class_metrics_for=gate_config.class_metrics,
        min_gain_over_baseline=(
            -1.0
            if gate_config.min_gain_over_baseline is None
            else gate_config.min_gain_over_baseline
        ),
        # The float32 twin is served by the gate itself, only when it may ship.
        model_name=options.model_name,
        latency_budget_ms=options.serving_latency_budget_ms,
    ).with_id(GATE)
    return Judges(
        evaluator, production_model, evaluator_production, infra_validator, side_by_side, gate
    )


def pusher(twins: Twins, gate, push_base: str):
    """The Pusher: the twin the gate's blessing names, to `push_base/<version>/` (a hidden copy,
    then one rename); nothing when the gate did not bless."""
    return Pusher(
        model=twins.amp.outputs["model"],
        fp32_model=twins.fp32.outputs["model"],
        model_blessing=gate.outputs["blessing"],
        push_base=push_base,
    ).with_id(PUSHER)

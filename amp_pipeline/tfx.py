"""amp-pipeline's components in a TFX pipeline of your own.

Bring your own ExampleGen, StatisticsGen, SchemaGen and Transform; add the AMP trainer twins,
the side-by-side speed measurement, the promotion gate and the atomic Pusher after them. These
are the functions `amp-pipeline run` itself builds its pipeline with (pipeline/amp_half.py), so
what the command line has proven is what your pipeline runs::

    from amp_pipeline import tfx as amp

    task = amp.Task(label="species", classes=("Adelie", "Chinstrap", "Gentoo"), label_kind="string")
    twins = amp.trainer_twins(
        transform.outputs["transformed_examples"], transform.outputs["transform_graph"],
        task, amp.TrainOptions(model="mlp", policy="auto", train_steps=500),
    )
    judged = amp.judges(example_gen.outputs["examples"], twins, task, amp.PromotionOptions())
    push = amp.pusher(twins, judged.gate, "/serving/penguins")
    components = [example_gen, statistics_gen, schema_gen, transform, *twins, *judged, push]

**Your Transform module's contract.** Its `preprocessing_fn` returns at least:

- `FEATURES_KEY` (`"x"`): the model input, a `[batch, width]` float32 tensor of fixed width;
- `LABEL_KEY` (`"label_xf"`): the label as a class id (`class_ids(inputs[label], task)` maps the
  raw label to its index in `task.classes`), or for a regression task the label standardised
  (`standardized_label(inputs[label])`): the serving signatures undo the affine map Transform
  recorded, so answers come back in the label's units.

**The model.** `TrainOptions.model` names a built-in architecture (`mlp` for a feature vector);
`TrainOptions(model_module=model_module("my_model.py"))` plugs in your own `build_model(spec)`
(a `--model-module` file; components/models/user_module.py states that contract).

**What each node reads and writes** (TFX channels):

- `trainer_twins` -> `Twins(fp32, amp)`: two TFX Trainers. Read Transform's `transformed_examples`
  (train and eval splits) and `transform_graph`; write `model` (the serving SavedModel with the
  Transform graph inside, TFLite variants beside it) and `model_run` (figures.json: quality,
  step times, peak memory, loss scale; each seed's eval predictions).
- `judges` -> `Judges(...)`: read ExampleGen's raw `examples` (the eval split), both twins'
  `model` and `model_run`; write TFMA `evaluation`s (AMP vs float32, AMP vs the production
  model), the infra validation's `blessing` (the AMP twin behind a local TF-Serving-compatible
  server), SideBySide's `comparison` (speed.json) and the gate's `blessing` (ModelBlessing,
  naming the twin that ships) and `decision` (decision.json, decision.md).
- `pusher` -> Pusher: reads both `model`s and the gate's `blessing`; copies the blessed twin to
  `push_base/<version>/` (a hidden copy, then one rename), and nothing otherwise: a model
  already pushed is never touched by a rejected run.

**Branching on the decision.** The gate's `blessing` and `decision` artifacts carry `promoted`
(int 0/1), `precision_ratio` (AMP/float32 examples per second) and `accuracy_change` (AMP minus
float32 accuracy; `error_change` for regression) as custom properties. A TFX conditional reads
them, and compiles to a KFP v2 trigger condition on Kubeflow and Vertex::

    with tfx.dsl.Cond(judged.gate.outputs["blessing"].future()[0].custom_property("promoted") == 1):
        deploy = MyDeployStep(model=judged.gate.outputs["blessing"])

Locally, run the pipeline with `beam_args()` among its `beam_pipeline_args` (the DirectRunner
without Beam's Prism download and TFX's per-job dependency staging).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from amp_pipeline.components.gate.rules import GateConfig
from amp_pipeline.components.training.options import TrainOptions
from amp_pipeline.core.data_spec import CLASSIFICATION, REGRESSION, DataSpec
from amp_pipeline.core.names import FEATURES_KEY, LABEL_KEY
from amp_pipeline.pipeline import amp_half
from amp_pipeline.pipeline.amp_half import Judges, PromotionOptions, Twins

if TYPE_CHECKING:
    import tensorflow as tf
    from tfx.dsl.components.base.base_component import BaseComponent
    from tfx.orchestration.data_types import RuntimeParameter
    from tfx.types import BaseChannel
    from tfx.types.standard_artifacts import Examples, TransformGraph

__all__ = [
    "FEATURES_KEY",
    "LABEL_KEY",
    "GateConfig",
    "Judges",
    "PromotionOptions",
    "Task",
    "TrainOptions",
    "Twins",
    "beam_args",
    "class_ids",
    "judges",
    "model_module",
    "pusher",
    "standardized_label",
    "trainer_twins",
]

LABEL_KINDS = ("int", "string", "float")
# The AMP twin's options where none are given: the MLP on `x`, the recipe chosen on the node.
DEFAULT_TWINS = TrainOptions(model="mlp", policy="auto")


@dataclasses.dataclass(frozen=True)
class Task:
    """What the twins and the gate need to know about the label.

    Attributes:
        label: the raw label feature's name in ExampleGen's examples.
        classes: the raw label values, as text, in class-id order: the order your
            preprocessing_fn's class ids follow (`class_ids` maps them so). Empty: a
            regression task.
        label_kind: how ExampleGen stored the label: "int", "string" or "float".
    """

    label: str
    classes: tuple[str, ...] = ()
    label_kind: str = "int"

    def __post_init__(self) -> None:
        if not self.label:
            raise ValueError("Invalid value for argument label: must name the label feature.")
        if self.label_kind not in LABEL_KINDS:
            raise ValueError(
                f"Invalid value for argument label_kind: expected one of {', '.join(LABEL_KINDS)}. "
                f"Received: label_kind={self.label_kind!r}"
            )
        if len(self.classes) == 1 or len(set(self.classes)) != len(self.classes):
            raise ValueError(
                "Invalid value for argument classes: two or more distinct classes, or none for "
                f"a regression task. Received: classes={self.classes!r}"
            )
        object.__setattr__(self, "classes", tuple(str(c) for c in self.classes))

    @property
    def regression(self) -> bool:
        return not self.classes

    def data_spec(self) -> DataSpec:
        """The DataSpec the trainers and the gate read: the label and its classes; the features
        are whatever your Transform puts in `x`."""
        return DataSpec(
            source="a TFX pipeline's own Transform",
            format="tfrecord",
            input_base="",
            input_pattern="",
            label=self.label,
            label_kind=self.label_kind,
            classes=self.classes,
            numeric_features=(),
            task=REGRESSION if self.regression else CLASSIFICATION,
        )


def trainer_twins(
    transformed_examples: BaseChannel[Examples],
    transform_graph: BaseChannel[TransformGraph],
    task: Task,
    options: TrainOptions | None = None,
    *,
    train_steps: int | RuntimeParameter | None = None,
) -> Twins:
    """The float32 and AMP Trainer nodes (ids TrainerFp32, TrainerAmp). `options` is the AMP
    twin's: `policy="auto"` picks the recipe on the node the trainer lands on (mixed_float16
    with loss scaling and XLA on an NVIDIA GPU, mixed_bfloat16 on a CPU with AVX-512 BF16 or
    AMX, else float32); the float32 twin trains the same model at float32 (strict matmuls on a
    GPU: `fp32_math`). `train_steps` (an int, or a runtime parameter) defaults to
    `options.train_steps`. None: DEFAULT_TWINS."""
    options = DEFAULT_TWINS if options is None else options
    if options.policy == "float32":
        raise ValueError(
            "Invalid value for argument options: TrainOptions.policy is float32 (its default), "
            "so the AMP twin would be a second float32 model. Pass policy='auto' (the recipe "
            "for the node's hardware), 'autotune', 'mixed_float16' or 'mixed_bfloat16'."
        )
    return amp_half.trainer_twins(
        transformed_examples,
        transform_graph,
        task.data_spec(),
        dataclasses.replace(options, readiness=True, diagnose=True),
        train_steps=train_steps,
    )


def judges(
    examples: BaseChannel[Examples],
    twins: Twins,
    task: Task,
    options: PromotionOptions | None = None,
) -> Judges:
    """The evaluations, infra validation, speed measurement and gate (ids Evaluator,
    ProductionModel, EvaluatorProduction, InfraValidator, SideBySide, PromotionGate), on
    ExampleGen's raw `examples`; `judges(...).gate` is the PromotionGate. None: the gate's
    defaults (PromotionOptions())."""
    return amp_half.judges(examples, twins, task.data_spec(), options or PromotionOptions())


def pusher(twins: Twins, gate: BaseComponent, push_base: str) -> BaseComponent:
    """The Pusher (id Pusher): the twin the gate blessed, to `push_base/<version>/`."""
    pusher: BaseComponent = amp_half.pusher(twins, gate, push_base)
    return pusher


def model_module(module: str) -> dict[str, Any]:
    """`TrainOptions.model_module` for your model module (a `.py` file or an import path, as
    `--model-module` takes it): `TrainOptions(model_module=model_module("my_model.py"))`. Its
    source's hash goes with it, so TFX's cache sees a changed module. Raises ModelModuleError,
    naming the module, when it does not exist."""
    from amp_pipeline.components.models import user_module

    return user_module.resolve(module).to_dict()


def class_ids(label: tf.Tensor | tf.SparseTensor, task: Task) -> tf.Tensor:
    """For your preprocessing_fn: raw labels to class ids in `task.classes` order (-1 for a
    value not among them)."""
    from amp_pipeline.components.data.preprocessing import label_to_id

    return label_to_id(label, task.data_spec())


def standardized_label(label: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """For your preprocessing_fn: a regression label's z-scores over the train split."""
    from amp_pipeline.components.data.preprocessing import standardized_label as z

    return z(label, None)


def beam_args(workers: int = 1) -> list[str]:
    """beam_pipeline_args for the DirectRunner, as `amp-pipeline run` uses them."""
    from amp_pipeline.pipeline.beam import BeamProfile

    return BeamProfile(workers=workers).args()

"""The model a twin trains: the built-in architecture or the user's model module, its loss,
optimizer and metrics, built under the twin's precision policy (and distribution strategy), checked
against the mixed-precision rules, compiled, and rebuilt in float32 for TFLite."""

from __future__ import annotations

import dataclasses
from typing import Any

from amp_pipeline.components.training.options import TrainSpec


def user_module(spec: TrainSpec):
    """(ModuleRef, module) of the user's model module, or (None, None) for a built-in model."""
    if not spec.model_module:
        return None, None
    from amp_pipeline.components.models import user_module as model_module

    ref = model_module.ModuleRef(**spec.model_module)
    return ref, model_module.load(ref)


def make_optimizer(spec: TrainSpec):
    """The module's `optimizer()` or Adam at the spec's learning rate; wrapped in a
    LossScaleOptimizer where the recipe scales the loss."""
    import keras

    from amp_pipeline.components.models import user_module as model_module

    ref, module = user_module(spec)
    if module is not None and model_module.hook(module, "optimizer"):
        optimizer = model_module.call_hook(ref, module, "optimizer")
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise model_module.ModelModuleError(
                f"model module {ref.label}: optimizer() returned {type(optimizer).__name__}, "
                "not a keras.optimizers.Optimizer"
            )
    else:
        optimizer = keras.optimizers.Adam(spec.learning_rate)
    if spec.loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(
            optimizer,
            initial_scale=spec.loss_scale_initial,
            dynamic_growth_steps=spec.loss_scale_growth_interval,
        )
    return optimizer


def is_regression(spec: TrainSpec) -> bool:
    from amp_pipeline.core.data_spec import REGRESSION

    return spec.data_spec.get("task") == REGRESSION


def make_loss(spec: TrainSpec):
    """The module's `loss()`, else sparse categorical cross-entropy on probabilities, or for a
    regression label the spec's `regression_loss` on the standardised label: mean squared
    error, or Huber (delta 1: one standard deviation of the label)."""
    import keras

    from amp_pipeline.components.models import user_module as model_module

    ref, module = user_module(spec)
    if module is not None and model_module.hook(module, "loss"):
        return model_module.call_hook(ref, module, "loss")
    if is_regression(spec):
        if spec.regression_loss == "huber":
            return keras.losses.Huber(delta=1.0)
        return keras.losses.MeanSquaredError()
    return keras.losses.SparseCategoricalCrossentropy()


def train_metrics(spec: TrainSpec) -> list:
    """What Keras reports while training: accuracy, or for regression the mean absolute error
    of the standardised label (the gate's figures are in the label's units, from the served
    model: `regression_metrics`)."""
    import keras

    if is_regression(spec):
        return [keras.metrics.MeanAbsoluteError(name="mae")]
    return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]


def learning_rate_of(optimizer) -> float:
    """The optimizer's current learning rate, for diagnoses (NaN where it is a schedule)."""
    import keras

    inner = getattr(optimizer, "inner_optimizer", optimizer)
    try:
        return float(keras.ops.convert_to_numpy(inner.learning_rate))
    except (TypeError, ValueError):
        return float("nan")


def input_width(spec: TrainSpec) -> int:
    """Width of `x` as Transform wrote it (or as the built-in preprocessing makes it)."""
    from amp_pipeline.components.data.preprocessing import feature_width
    from amp_pipeline.core.data_spec import DataSpec
    from amp_pipeline.core.names import FEATURES_KEY

    if not spec.transform_output:
        return feature_width(DataSpec.from_dict(spec.data_spec))
    import tensorflow_transform as tft

    from amp_pipeline.components.models.user_module import ModelModuleError

    feature = tft.TFTransformOutput(spec.transform_output).transformed_feature_spec()[FEATURES_KEY]
    shape = list(getattr(feature, "shape", []) or [])
    if len(shape) != 1:
        raise ModelModuleError(
            f"preprocessing_fn: output {FEATURES_KEY!r} must be a [batch, width] float tensor "
            f"of fixed width; Transform recorded {feature}"
        )
    return int(shape[0])


def model_spec(spec: TrainSpec):
    """The ModelSpec `build_model(spec)` receives, with the sizes of the vocabularies Transform
    built (categories, bags; for text, an embedding table no larger than what was seen)."""
    from amp_pipeline.components.data import preprocessing
    from amp_pipeline.core.data_spec import CATEGORY_IDS_BEYOND_VOCABULARY, DataSpec

    custom = bool(spec.model_module and spec.model_module.get("preprocessing"))
    data = DataSpec.from_dict(spec.data_spec)
    mspec = preprocessing.model_spec(data, input_width(spec), custom)
    embedded = mspec.categorical_features or mspec.bag_features or mspec.text_features
    if not (embedded and spec.transform_output):
        return mspec
    import tensorflow_transform as tft

    size = tft.TFTransformOutput(spec.transform_output).vocabulary_size_by_name
    changes: dict[str, Any] = {}
    if mspec.categorical_features:
        changes["categorical_sizes"] = tuple(
            size(preprocessing.category_vocab(name)) + CATEGORY_IDS_BEYOND_VOCABULARY
            for name in mspec.categorical_features
        )
    if mspec.bag_features:  # padding 0, the vocabulary from 1, one id for any other value
        changes["bag_sizes"] = tuple(
            size(preprocessing.bag_vocab(name)) + 2 for name in mspec.bag_features
        )
    if mspec.text_features:
        seen = max(size(preprocessing.vocab_filename(name)) for name in mspec.text_features)
        changes["vocab_size"] = min(mspec.vocab_size, seen)
    return dataclasses.replace(mspec, **changes)


def build_checked(spec: TrainSpec, policy: str):
    """The spec's model built under `policy`, its output made float32: (model, OutputFix)."""
    import keras

    from amp_pipeline.components.amp import rules as amp_rules
    from amp_pipeline.components.models import user_module as model_module
    from amp_pipeline.components.models.builtin import build_from_spec

    keras.mixed_precision.set_global_policy(policy)
    mspec = model_spec(spec)
    ref, module = user_module(spec)
    if module is not None:
        model = model_module.build(ref, module, mspec)
    else:
        model = build_from_spec(spec.model, mspec, **spec.model_options)
    return amp_rules.float32_output(model, mspec.input_width, policy)


def build_under_policy(spec: TrainSpec, policy: str):
    """The spec's model architecture, built under `policy` (float32 output)."""
    return build_checked(spec, policy)[0]


def float32_rebuild(spec: TrainSpec, model):
    """The same architecture under the float32 policy, holding the trained weights.

    Under mixed_float16/mixed_bfloat16 the variables are float32 already, so the weights carry
    over unchanged; only the compute dtype changes.
    """
    rebuilt = build_under_policy(spec, "float32")
    rebuilt.set_weights(model.get_weights())
    return rebuilt


def compile_model(spec: TrainSpec, model, jit_compile: bool, strategy=None) -> None:
    """Compiles `model` with the recipe's optimizer and loss, and train_metrics (in `strategy`'s
    scope, when given)."""

    from amp_pipeline.components.training.distribution import scope

    with scope(strategy):
        model.compile(
            optimizer=make_optimizer(spec),
            loss=make_loss(spec),
            metrics=train_metrics(spec),
            jit_compile=jit_compile,
        )


def build_and_compile(spec: TrainSpec, xla: bool | None = None, strategy=None):
    """The model under `spec.policy`, compiled with the recipe's optimizer and XLA setting."""
    model, _ = build_fresh(spec, spec.policy, strategy)
    compile_model(spec, model, spec.xla if xla is None else xla, strategy)
    return model


def build_fresh(spec: TrainSpec, policy: str, strategy=None):
    """Like build_checked, from a cleared session and the spec's seed: the same initial weights
    (and layer names) every time. Under `strategy`, the variables are the strategy's (the
    session is cleared before its scope is entered: clearing it inside breaks the scope)."""
    import keras

    from amp_pipeline.components.training.distribution import scope

    keras.backend.clear_session()
    keras.utils.set_random_seed(spec.seed)
    with scope(strategy):
        return build_checked(spec, policy)


def distributed(spec: TrainSpec, strategy) -> tuple[TrainSpec, dict | None]:
    """The spec at the global batch (and linearly scaled learning rate) of `strategy`'s
    replicas, and the figures that say so (None without one). Where a worker that is not the
    chief writes is decided before this process starts
    (components/training/trainer.py::for_this_task)."""
    from amp_pipeline.components.training import distribution

    if strategy is None:
        return spec, None
    own_optimizer = False
    _, module = user_module(spec)
    if module is not None:
        from amp_pipeline.components.models import user_module as model_module

        own_optimizer = bool(model_module.hook(module, "optimizer"))
    scaling = distribution.Scaling(
        distribution.replicas(strategy), spec.batch_size, spec.learning_rate
    )
    config = distribution.tf_config()
    figures = {
        "strategy": type(strategy).__name__,
        "replicas": scaling.replicas,
        "workers": max(distribution.cluster_workers(config), 1),
        "per_replica_batch": scaling.per_replica_batch,
        "global_batch": scaling.global_batch,
        "learning_rate": scaling.learning_rate if own_optimizer else scaling.scaled_learning_rate,
        "chief": distribution.is_chief(config),
        "note": scaling.note(own_optimizer),
    }
    scaled = dataclasses.replace(
        spec, batch_size=scaling.global_batch, learning_rate=scaling.scaled_learning_rate
    )
    return scaled, figures

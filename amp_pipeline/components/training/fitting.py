"""Fitting a twin: the readiness check before training, fit and evaluate (Keras' multi-worker path
where the strategy needs it), the step timer, peak memory and loss-scale monitor around fit, the
first seed and the other seeds, and a regression label in its own units."""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from amp_pipeline.components.training.datasets import train_dataset
from amp_pipeline.components.training.model_building import (
    build_fresh,
    compile_model,
    float32_rebuild,
    is_regression,
    learning_rate_of,
    make_loss,
)
from amp_pipeline.components.training.options import TrainSpec

logger = logging.getLogger(__name__)


def check_readiness(spec: TrainSpec, train_ds) -> dict:
    """The AMP readiness check on the first real batch of `train_ds`."""
    import numpy as np

    from amp_pipeline.components.amp.readiness import readiness_report

    x, y = next(iter(train_ds))
    x, y = np.asarray(x), np.asarray(y)
    return readiness_report(
        build=lambda policy: build_fresh(spec, policy)[0],
        compile_model=lambda model, jit: compile_model(spec, model, jit),
        x=x[:64],
        y=y[:64],
        policy=spec.policy,
        xla=spec.xla,
        gpu_recipe=spec.policy == "mixed_float16",
        batch_size=spec.batch_size,
        num_classes=len(spec.data_spec["classes"]),
        loss_fn=make_loss(spec),
    )


def with_train_label_scale(spec: TrainSpec) -> TrainSpec:
    """A regression label's mean and standard deviation as Transform standardised it (over the
    train split), in the spec's DataSpec: the served model, the TFLite sidecar and every figure
    in the label's units use them, never the input check's figures over every row."""
    data = spec.data_spec
    if data.get("task") != "regression":
        return spec
    from amp_pipeline.components.data.preprocessing import label_scale
    from amp_pipeline.core.data_spec import DataSpec

    mean, std = label_scale(spec.transform_output, DataSpec.from_dict(data))
    logger.info("Label scale over the train split: mean %.6g, std %.6g", mean, std)
    return dataclasses.replace(spec, data_spec={**data, "label_mean": mean, "label_std": std})


def label_units(spec: TrainSpec, standardised: np.ndarray) -> np.ndarray:
    """A regression label or prediction back in the label's own units (float64)."""
    data = spec.data_spec
    return np.asarray(standardised, np.float64) * data["label_std"] + data["label_mean"]


def quality_text(figures: dict) -> str:
    """'accuracy 0.9195', or for regression 'MAE 123.4, RMSE 150.2, R² 0.871' (label units)."""
    if figures.get("accuracy") is not None:
        return f"accuracy {figures['accuracy']:.4f}"
    m = {"mae": math.nan, "rmse": math.nan, "r2": math.nan, **(figures.get("metrics") or {})}
    return f"MAE {m['mae']:.4g}, RMSE {m['rmse']:.4g}, R² {m['r2']:.3f}"


def regression_metrics(labels: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
    """MAE, RMSE and R² of predictions against labels, both in the label's units."""
    errors = np.asarray(predictions, np.float64) - labels
    total = float(np.sum((labels - labels.mean()) ** 2)) if len(labels) else 0.0
    return {
        "mae": float(np.mean(np.abs(errors))),
        "rmse": float(np.sqrt(np.mean(errors**2))),
        "r2": 1.0 - float(np.sum(errors**2)) / total if total > 0 else float("nan"),
    }


def fit(model, strategy, train_ds, **kwargs):
    """model.fit, under MultiWorkerMirroredStrategy through its Keras 3 workaround."""
    from amp_pipeline.components.training.distribution import keras_multiworker

    with keras_multiworker(model, strategy, train_ds):
        return model.fit(train_ds, **kwargs)


def evaluate(model, strategy, eval_ds, **kwargs):
    """model.evaluate, likewise."""
    from amp_pipeline.components.training.distribution import keras_multiworker

    with keras_multiworker(model, strategy, eval_ds):
        return model.evaluate(eval_ds, **kwargs)


def fit_watched(spec: TrainSpec, model, strategy, train_ds, what: str = ""):
    """`model.fit` for `spec.train_steps` steps under the step timer, the loss-scale monitor and
    the peak-memory measurement: (history, timer, monitor, memory, peak MB). A collapsed loss
    scale or a loss that stays NaN raises LossScaleCollapse, its diagnosis after `what`."""
    from amp_pipeline.components.amp.loss_scale import LossScaleCollapse, LossScaleMonitor
    from amp_pipeline.components.amp.perf import PeakMemory, StepTimer

    monitor = LossScaleMonitor(
        patience=spec.collapse_patience, learning_rate=learning_rate_of(model.optimizer)
    )
    timer = StepTimer(spec.batch_size, warmup_steps=min(5, max(spec.train_steps - 1, 0)))
    memory = PeakMemory(spec.device)
    memory.start()
    history = fit(
        model,
        strategy,
        train_ds,
        steps_per_epoch=spec.train_steps,
        epochs=1,
        callbacks=[timer, monitor],
        verbose=0,
    )
    peak_mb = memory.peak_mb()
    if monitor.collapse:
        raise LossScaleCollapse(f"{what}{monitor.collapse}")
    return history, timer, monitor, memory, peak_mb


def xla_after_readiness(spec: TrainSpec, readiness: dict | None) -> tuple[bool, str | None]:
    """(XLA on or off, why it was turned off): the readiness check's compile probe failing
    turns XLA off for the run."""
    if readiness and readiness["compile"] and not readiness["compile"]["ok"]:
        logger.warning("Training without XLA: %s", readiness["compile"]["error"])
        return False, readiness["compile"]["error"]
    return spec.xla, None


def train_first_seed(spec: TrainSpec, strategy, train_ds, eval_ds, xla: bool) -> dict:
    """The spec's model built, compiled, trained under the watch of fit_watched and evaluated:
    the model and what was measured on the way."""
    from amp_pipeline.components.amp import rules as amp_rules
    from amp_pipeline.components.training import warm_start

    warm_start.prepare(spec)  # before this run's model: building production's clears the session
    model, output_fix = build_fresh(spec, spec.policy, strategy)
    warm = warm_start.apply(spec, model)
    logger.info("Warm start: %s", warm["reason"])
    compile_model(spec, model, xla, strategy)
    dtype_warnings = amp_rules.variable_dtype_warnings(model, spec.policy)
    history, timer, monitor, memory, peak_mb = fit_watched(spec, model, strategy, train_ds)
    results = evaluate(model, strategy, eval_ds, steps=spec.eval_steps, return_dict=True, verbose=0)
    return {
        "model": model,
        "output_fix": output_fix,
        "dtype_warnings": dtype_warnings,
        "history": history,
        "timer": timer,
        "monitor": monitor,
        "memory": memory,
        "peak_mb": peak_mb,
        "results": results,
        "warm_start": warm,
    }


def predicted_answers(spec: TrainSpec, model, eval_ds) -> tuple[np.ndarray, np.ndarray | None]:
    """The model's class ids for every example of the batched `eval_ds` (its x), or for
    regression its predictions in the label's units; and for a binary label the positive
    class's probability (the gate's ROC and PR AUC), else None."""
    outputs = model.predict(eval_ds.map(lambda x, y: x), verbose=0)
    if is_regression(spec):
        return label_units(spec, np.reshape(outputs, [-1])), None
    scores = outputs[:, 1].astype(np.float32) if outputs.shape[1] == 2 else None
    return np.argmax(outputs, axis=1), scores


def train_other_seeds(spec: TrainSpec, xla: bool, eval_ds, served, first: dict, strategy=None):
    """The spec's model trained again under each further seed of `spec.seed_list` (same data, same
    steps): ([figures per seed], [(eval predictions, binary scores) per seed]), the first
    seed's given."""
    import dataclasses as dc

    from amp_pipeline.components.training import warm_start

    runs, predictions = [first], [predicted_answers(spec, served, eval_ds)]
    for seed in spec.seed_list[1:]:
        sub = dc.replace(spec, seed=seed)
        model, _ = build_fresh(sub, sub.policy, strategy)
        warm_start.apply(sub, model)  # every seed starts where the first did
        compile_model(sub, model, xla, strategy)
        train_ds = train_dataset(sub, sub.batch_size, seed, strategy)
        # Every seed is watched as the first one is: a collapsed loss scale stops the run.
        _, timer, monitor, _, peak_mb = fit_watched(
            sub, model, strategy, train_ds, f"seed {seed}: "
        )
        runs.append(
            {
                "seed": seed,
                **timer.summary(),
                "peak_memory_mb": peak_mb,
                "loss_scale": {k: v for k, v in monitor.summary().items() if k != "history"},
            }
        )
        served_model = float32_rebuild(sub, model) if sub.serving_precision == "float32" else model
        predictions.append(predicted_answers(sub, served_model, eval_ds))
        logger.info("seed %d: %s", seed, runs[-1])
    return runs, predictions

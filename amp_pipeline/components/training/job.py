"""Training under one precision policy: small pure units and `train_and_export(spec)`, each of
its phases timed and logged as it ends (Phases: reading, readiness, fitting, exporting, ...), so
that a slowdown shows in `train.log` and in figures.json's `phases`.

This runs inside a fresh process (components/training/process.py) so that the global dtype policy of
one trainer never leaks into the other and its peak memory is its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from amp_pipeline.components.training import warm_start
from amp_pipeline.components.training.datasets import eval_dataset, train_dataset
from amp_pipeline.components.training.fitting import (
    check_readiness,
    train_first_seed,
    with_train_label_scale,
    xla_after_readiness,
)
from amp_pipeline.components.training.model_building import distributed, is_regression, model_spec
from amp_pipeline.components.training.options import TrainSpec
from amp_pipeline.components.training.twin_export import (
    category_coverage,
    export_checked,
    export_edge_models,
    predict_every_seed,
    reference_baseline,
)
from amp_pipeline.core import names

logger = logging.getLogger(__name__)


class Phases:
    """Seconds per named phase, in the order they ran; a phase run twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started = time.perf_counter()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times the block as `name` and logs `phase <name>: 1.2 s` when it ends."""
        started = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - started
            self.seconds[name] = self.seconds.get(name, 0.0) + took
            logger.info("phase %s: %.1f s", name, took)

    def summary(self) -> dict[str, float]:
        """{phase: seconds, ..., "total": seconds since this clock started}, rounded to 0.1 s."""
        total = time.perf_counter() - self._started
        return {**{k: round(v, 1) for k, v in self.seconds.items()}, "total": round(total, 1)}


def train_and_export(spec: TrainSpec, strategy=None) -> dict:
    """Trains (data-parallel under `strategy`, when given), evaluates, exports the serving
    SavedModel, and returns the measured figures."""
    from amp_pipeline.components.models.builtin import embedding_widths

    clock = Phases()
    with clock.phase("warm start"):  # production's weights, read before this run builds
        warm_start.prepare(spec)
    # A warm-started model keeps production's embedding widths (warm_start.py): every build
    # below (readiness, twins, float32 rebuilds, seeds) gives the same shapes.
    with embedding_widths(warm_start.widths(spec)):
        return _train_and_export(spec, strategy, clock)


def _train_and_export(spec: TrainSpec, strategy, clock: Phases) -> dict:
    from amp_pipeline.components.amp import fp32_math

    # The float32 twin's matmuls as --fp32-math asks (strict: no TF32); the AMP twin keeps
    # TensorFlow's default for the parts it runs in float32.
    math_record = fp32_math.apply(spec.fp32_math if spec.policy == "float32" else fp32_math.TF32)
    with clock.phase("reading"):  # a streamed split's shuffled copy, an in-memory split's arrays
        spec = with_train_label_scale(spec)
        spec, distribution_figures = distributed(spec, strategy)
        train_ds = train_dataset(spec, spec.batch_size, spec.seed, strategy)
        eval_ds = eval_dataset(spec, strategy)
    readiness = None
    if spec.readiness:
        with clock.phase("readiness"):
            readiness = check_readiness(spec, train_ds)
    xla, xla_fallback = xla_after_readiness(spec, readiness)
    with clock.phase("fitting"):  # building, compiling on the first step, fit and evaluate
        trained = train_first_seed(spec, strategy, train_ds, eval_ds, xla)
    with clock.phase("exporting"):
        serving, layers = export_checked(
            spec, trained["model"], readiness, trained["dtype_warnings"]
        )
    with clock.phase("tflite"):
        tflite = export_edge_models(spec, trained["model"], train_ds)
    reference = None
    if is_regression(spec):
        with clock.phase("reference baseline"):
            reference = reference_baseline(spec, eval_ds)
    with clock.phase("category coverage"):
        category_figures = category_coverage(spec, eval_ds)
    with clock.phase("seeds and eval predictions"):
        seed_runs = predict_every_seed(spec, xla, eval_ds, serving, trained, strategy, reference)
    diagnostics = None
    if spec.diagnose:
        from amp_pipeline.components.amp import diagnosis as amp_diagnosis

        mspec = model_spec(spec)
        with clock.phase("diagnosis"):
            diagnostics = amp_diagnosis.measure(
                trained["model"],
                train_ds,
                spec.policy,
                spec.batch_size,
                mspec.input_width,
                mspec.output_width,
            )
    timer, monitor = trained["timer"], trained["monitor"]
    figures = {
        "policy": spec.policy,
        "xla": xla,
        "xla_requested": spec.xla,
        "xla_fallback": xla_fallback,
        "loss_scaling": spec.loss_scaling,
        "model": spec.model,
        "model_module": spec.model_module,
        "train_steps": spec.train_steps,
        "batch_size": spec.batch_size,
        "threads": spec.intra_op_threads,
        "device": spec.device,
        "accuracy": (None if is_regression(spec) else float(trained["results"]["accuracy"])),
        "metrics": seed_runs[0].get("metrics"),  # regression: MAE, RMSE, R² in label units
        "loss": float(trained["results"]["loss"]),
        **timer.summary(),
        "peak_memory_mb": trained["peak_mb"],
        "memory_method": trained["memory"].method,
        "history": {k: [float(v) for v in vs] for k, vs in trained["history"].history.items()},
        "layers": layers,
        "dtype_warnings": trained["dtype_warnings"],
        "output_fix": trained["output_fix"].to_dict(),
        "readiness": readiness,
        "diagnostics": diagnostics,
        "loss_scale": monitor.summary(),
        # Per step: Keras' running means over the (single) epoch.
        "curve": {"loss": monitor.losses, "accuracy": monitor.accuracies},
        "serving_precision": spec.serving_precision,
        "fp32_math": math_record,
        # A regression label's train-split mean and std (Transform's): the mean baseline's.
        "label_scale": None
        if not is_regression(spec)
        else {
            "mean": spec.data_spec.get("label_mean"),
            "std": spec.data_spec.get("label_std"),
            "from": "the train split (Transform's analyzers)",
        },
        "tflite": tflite,
        "reference": None if reference is None else reference["figures"],
        "categories": category_figures,
        "process_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seeds": seed_runs,
        "distribution": distribution_figures,
        "warm_start": trained["warm_start"],
        "embedding_widths": warm_start.built_widths(spec, trained["model"]),
        "phases": clock.summary(),
    }
    (Path(spec.model_run_dir) / names.FIGURES_JSON).write_text(
        json.dumps(figures, indent=2, default=_json_default)
    )
    return figures


def _json_default(value):
    """numpy scalars in figures.json."""

    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")

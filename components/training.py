"""Training under one precision policy: small pure units and `train_and_export(spec)`.

This runs inside a fresh process (components/train_worker.py) so that the global dtype policy of
one trainer never leaks into the other and its peak memory is its own.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """One trainer's job, as plain data (it crosses a process boundary as JSON)."""

    train_files: tuple[str, ...]
    eval_files: tuple[str, ...]
    transform_output: str
    serving_model_dir: str
    model_run_dir: str
    data_spec: dict
    model: str = "cnn"
    model_options: dict = dataclasses.field(default_factory=dict)
    policy: str = "float32"
    xla: bool = False
    loss_scaling: bool = False
    device: str = "cpu"
    train_steps: int = 300
    eval_steps: int = 20
    batch_size: int = 64
    learning_rate: float = 1e-3
    seed: int = 42
    loss_scale_initial: float = 2.0**15
    loss_scale_growth_interval: int = 2000
    collapse_patience: int = 20
    serving_precision: str = "float32"
    tflite_variants: tuple[str, ...] = ("float32", "float16", "dynamic_int8", "int8")
    tflite_min_agreement: float = 0.995
    tflite_max_int8_drop: float = 0.01

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> TrainSpec:
        d = json.loads(text)
        d["train_files"] = tuple(d["train_files"])
        d["eval_files"] = tuple(d["eval_files"])
        d["tflite_variants"] = tuple(d.get("tflite_variants", ()))
        return cls(**d)


def make_dataset(file_patterns, transform_output: str, batch_size: int, seed: int, train: bool):
    """Batches of (x, label) from Transform's gzipped TFRecords."""
    import tensorflow as tf
    import tensorflow_transform as tft

    from components.preprocessing import FEATURES_KEY, LABEL_KEY

    feature_spec = tft.TFTransformOutput(transform_output).transformed_feature_spec()
    files = sorted(f for p in file_patterns for f in tf.io.gfile.glob(p))
    ds = tf.data.TFRecordDataset(files, compression_type="GZIP")
    if train:
        ds = ds.shuffle(10_000, seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=train)
    ds = ds.map(lambda s: tf.io.parse_example(s, feature_spec))
    ds = ds.map(lambda f: (f[FEATURES_KEY], f[LABEL_KEY]))
    return ds.prefetch(tf.data.AUTOTUNE)


def make_optimizer(spec: TrainSpec):
    import keras

    optimizer = keras.optimizers.Adam(spec.learning_rate)
    if spec.loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(
            optimizer,
            initial_scale=spec.loss_scale_initial,
            dynamic_growth_steps=spec.loss_scale_growth_interval,
        )
    return optimizer


def build_under_policy(spec: TrainSpec, policy: str):
    """The spec's model architecture, built under `policy`."""
    import keras

    from components.models import build_model
    from components.preprocessing import feature_width
    from pipeline.ingest import DataSpec

    data = DataSpec.from_dict(spec.data_spec)
    keras.mixed_precision.set_global_policy(policy)
    return build_model(
        spec.model, feature_width(data), data.num_classes, data.image_shape, **spec.model_options
    )


def float32_rebuild(spec: TrainSpec, model):
    """The same architecture under the float32 policy, holding the trained weights.

    Under mixed_float16/mixed_bfloat16 the variables are float32 already, so the weights carry
    over unchanged; only the compute dtype changes.
    """
    rebuilt = build_under_policy(spec, "float32")
    rebuilt.set_weights(model.get_weights())
    return rebuilt


def build_and_compile(spec: TrainSpec):
    """The model under `spec.policy`, compiled with the recipe's optimizer and XLA setting."""
    import keras

    keras.utils.set_random_seed(spec.seed)
    model = build_under_policy(spec, spec.policy)
    model.compile(
        optimizer=make_optimizer(spec),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=spec.xla,
    )
    return model


def dtype_report(model) -> list[dict]:
    """Per layer: compute dtype and variable dtype."""
    return [
        {
            "layer": layer.name,
            "class": type(layer).__name__,
            "compute_dtype": layer.compute_dtype,
            "variable_dtype": layer.variable_dtype,
        }
        for layer in model.layers
    ]


def dataset_arrays(ds, max_rows: int) -> tuple:
    """(x, y) numpy arrays of up to `max_rows` rows of a batched dataset."""
    import numpy as np

    xs, ys, n = [], [], 0
    for x, y in ds:
        xs.append(x.numpy())
        ys.append(y.numpy())
        n += len(ys[-1])
        if n >= max_rows:
            break
    return np.concatenate(xs)[:max_rows], np.concatenate(ys)[:max_rows]


def export_edge_models(spec: TrainSpec, model, train_ds, eval_ds) -> dict:
    """TFLite variants under `<serving_model_dir>/tflite/`, with parity on the eval split."""
    from components.tflite_export import ParityThresholds, export_tflite
    from pipeline.ingest import DataSpec

    if not spec.tflite_variants:
        return {"variants": {}}
    data = DataSpec.from_dict(spec.data_spec)
    reference = float32_rebuild(spec, model)
    keras_dir = str(Path(spec.model_run_dir) / "keras_float32")
    reference.export(keras_dir, verbose=False)
    eval_x, eval_y = dataset_arrays(eval_ds, 100_000)
    train_x, _ = dataset_arrays(train_ds, 200)
    return export_tflite(
        keras_dir,
        Path(spec.serving_model_dir) / "tflite",
        eval_x,
        eval_y,
        reference.predict(eval_x, verbose=0),
        train_x,
        list(data.classes),
        {
            "name": "x",
            "shape": [None, int(eval_x.shape[1])],
            "dtype": "float32",
            "preprocessing": "the Transform output `x` (see the SavedModel's "
            "transform_features signature): images divided by their pixel scale, numeric "
            "features standardised, strings one-hot",
            "image_shape": list(data.image_shape) if data.image_shape else None,
        },
        variants=tuple(spec.tflite_variants),
        thresholds=ParityThresholds(spec.tflite_min_agreement, spec.tflite_max_int8_drop),
    )


def variable_dtype_warnings(model, policy: str) -> list[str]:
    """Names every layer with non-float32 variables under a mixed policy (they lose updates)."""
    if policy == "float32":
        return []
    warnings = []
    for layer in model.layers:
        odd = sorted({str(v.dtype) for v in layer.weights} - {"float32"})
        if odd:
            warnings.append(
                f"layer {layer.name!r} has {', '.join(odd)} variables under {policy}: small "
                "updates are lost in low precision; keep variables float32"
            )
    for w in warnings:
        logger.warning(w)
    return warnings


def train_and_export(spec: TrainSpec) -> dict:
    """Trains, evaluates, exports the serving SavedModel, and returns the measured figures."""
    from components.export import export_serving_model
    from components.loss_scale import LossScaleCollapse, LossScaleMonitor
    from components.perf import PeakMemory, StepTimer

    model = build_and_compile(spec)
    dtype_warnings = variable_dtype_warnings(model, spec.policy)
    monitor = LossScaleMonitor(patience=spec.collapse_patience, learning_rate=spec.learning_rate)
    train_ds = make_dataset(
        spec.train_files, spec.transform_output, spec.batch_size, spec.seed, train=True
    )
    eval_ds = make_dataset(
        spec.eval_files, spec.transform_output, spec.batch_size, spec.seed, train=False
    )
    timer = StepTimer(spec.batch_size, warmup_steps=min(5, max(spec.train_steps - 1, 0)))
    memory = PeakMemory(spec.device)
    memory.start()
    history = model.fit(
        train_ds, steps_per_epoch=spec.train_steps, epochs=1, callbacks=[timer, monitor], verbose=0
    )
    peak_mb = memory.peak_mb()
    if monitor.collapse:
        raise LossScaleCollapse(monitor.collapse)
    results = model.evaluate(eval_ds, steps=spec.eval_steps, return_dict=True, verbose=0)
    run_dir = Path(spec.model_run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    model.save(run_dir / "model.keras")
    report = {"policy": spec.policy, "layers": dtype_report(model), "warnings": dtype_warnings}
    serving = float32_rebuild(spec, model) if spec.serving_precision == "float32" else model
    export_serving_model(serving, spec.transform_output, spec.serving_model_dir, spec.data_spec)
    (Path(spec.serving_model_dir) / "dtype_report.json").write_text(json.dumps(report, indent=2))
    export = export_edge_models(spec, model, train_ds, eval_ds)
    figures = {
        "policy": spec.policy,
        "xla": spec.xla,
        "loss_scaling": spec.loss_scaling,
        "model": spec.model,
        "train_steps": spec.train_steps,
        "batch_size": spec.batch_size,
        "accuracy": float(results["accuracy"]),
        "loss": float(results["loss"]),
        **timer.summary(),
        "peak_memory_mb": peak_mb,
        "memory_method": memory.method,
        "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
        "layers": report["layers"],
        "dtype_warnings": dtype_warnings,
        "loss_scale": monitor.summary(),
        # Per step: Keras' running means over the (single) epoch.
        "curve": {"loss": monitor.losses, "accuracy": monitor.accuracies},
        "serving_precision": spec.serving_precision,
        "export": export,
    }
    (run_dir / "figures.json").write_text(json.dumps(figures, indent=2))
    return figures

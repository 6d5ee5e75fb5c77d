"""The loss-scale monitor sees overflows and stops a collapsing run with a diagnosis."""

import keras
import numpy as np
import pytest

from amp_pipeline.components.amp.loss_scale import LossScaleMonitor


@pytest.fixture(autouse=True)
def restore_policy():
    yield
    keras.mixed_precision.set_global_policy("float32")


def _mlp(policy: str, kernel_scale: float):
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(0)
    init = keras.initializers.Constant(kernel_scale)
    return keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu", kernel_initializer=init),
            keras.layers.Dense(2, kernel_initializer=init),
            keras.layers.Activation("softmax", dtype="float32"),
        ]
    )


def _data(scale: float = 1.0):
    rng = np.random.default_rng(0)
    return rng.normal(size=(256, 8)).astype("float32") * scale, rng.integers(0, 2, 256)


def test_a_model_made_to_overflow_collapses_and_stops_with_a_diagnosis():
    # float16 tops out at 65504: inputs of 1e3 through weights of 1e2 overflow at every step.
    model = _mlp("mixed_float16", kernel_scale=100.0)
    model.compile(
        keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1)),
        "sparse_categorical_crossentropy",
    )
    monitor = LossScaleMonitor(patience=5, learning_rate=0.1)
    x, y = _data(scale=1e3)
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[monitor], verbose=0)
    summary = monitor.summary()
    assert monitor.collapse is not None
    assert monitor.collapse.startswith("training stopped: the loss was NaN/inf for 5 steps")
    assert "learning rate" in monitor.collapse and "initialisation" in monitor.collapse
    # Every step overflowed and was skipped; the run stopped after `patience` of its 32 steps.
    assert len(monitor.scales) == 5
    assert summary["history"] == [2.0**14, 2.0**13, 2.0**12, 2.0**11, 2.0**10]
    assert summary["overflow_steps"] == 4 and summary["collapsed"]


def test_a_scale_stuck_at_its_floor_stops_training():
    model = _mlp("mixed_float16", kernel_scale=0.05)
    model.compile(
        keras.optimizers.LossScaleOptimizer(
            keras.optimizers.SGD(0.01), initial_scale=0.5, dynamic_growth_steps=1000
        ),
        "sparse_categorical_crossentropy",
    )
    monitor = LossScaleMonitor(floor=1.0, patience=4, learning_rate=0.01)
    x, y = _data()
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[monitor], verbose=0)
    assert monitor.collapse and "loss scale stayed at or below 1 for 4 steps" in monitor.collapse
    assert len(monitor.scales) == 4


def test_healthy_float16_training_keeps_its_scale_and_records_every_step():
    model = _mlp("mixed_float16", kernel_scale=0.05)
    model.compile(
        keras.optimizers.LossScaleOptimizer(
            keras.optimizers.SGD(0.01), initial_scale=1024.0, dynamic_growth_steps=10
        ),
        "sparse_categorical_crossentropy",
    )
    monitor = LossScaleMonitor(patience=5)
    x, y = _data()
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[monitor], verbose=0)
    assert monitor.collapse is None
    assert len(monitor.scales) == 32
    assert monitor.overflow_steps == 0
    assert monitor.summary()["final"] == 1024.0 * 2**3  # grew every 10 finite steps


def test_nan_loss_without_loss_scaling_also_stops():
    model = _mlp("float32", kernel_scale=0.05)
    model.compile(keras.optimizers.SGD(0.01), "sparse_categorical_crossentropy")
    # A NaN output bias: every loss is NaN. (NaN inputs are not enough: oneDNN's ReLU turns NaN
    # into 0 on AVX-512 CPUs.)
    model.layers[1].bias.assign(np.full(2, np.nan, dtype="float32"))
    x, y = _data()
    monitor = LossScaleMonitor(patience=3, learning_rate=0.01)
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[monitor], verbose=0)
    assert monitor.collapse and "NaN/inf for 3 steps" in monitor.collapse
    assert len(monitor.scales) == 3 and monitor.summary()["final"] is None


def test_layers_with_non_float32_variables_are_named_under_a_mixed_policy():
    from amp_pipeline.components.amp.rules import variable_dtype_warnings

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    inputs = keras.Input((4,))
    x = keras.layers.Dense(3, name="ok")(inputs)
    x = keras.layers.Dense(2, dtype="bfloat16", name="low_precision_weights")(x)
    model = keras.Model(inputs, x)
    warnings = variable_dtype_warnings(model, "mixed_bfloat16")
    assert len(warnings) == 1
    assert "'low_precision_weights' has bfloat16 variables under mixed_bfloat16" in warnings[0]
    assert variable_dtype_warnings(model, "float32") == []


def test_every_extra_seed_is_watched_as_the_first_one_is(monkeypatch, tmp_path):
    """--seeds K: a seed after the first whose loss stays NaN stops the run with a diagnosis
    naming it, instead of entering the gate's evidence."""
    import dataclasses

    import tensorflow as tf

    from amp_pipeline.components.amp.loss_scale import LossScaleCollapse
    from amp_pipeline.components.training import datasets, fitting
    from amp_pipeline.components.training.options import TrainSpec

    def poisoned(spec, policy, strategy=None):
        model = _mlp(policy, kernel_scale=0.05)
        if spec.seed == 43:  # the second seed only: a NaN output bias, every loss NaN
            model.layers[1].bias.assign(np.full(2, np.nan, dtype="float32"))
        return model, None

    x, y = _data()

    def dataset(files, transform_output, batch_size, seed, train, compression="GZIP"):
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).repeat()

    monkeypatch.setattr(fitting, "build_fresh", poisoned)
    monkeypatch.setattr(datasets, "make_dataset", dataset)
    monkeypatch.setattr(fitting, "compile_model", _compile)
    spec = TrainSpec(
        train_files=(),
        eval_files=(),
        transform_output="",
        serving_model_dir=str(tmp_path / "s"),
        model_run_dir=str(tmp_path / "r"),
        data_spec={},
        model="mlp",
    )
    spec = dataclasses.replace(
        spec, seed=42, seeds=2, train_steps=30, collapse_patience=3, batch_size=8
    )
    served, _ = poisoned(spec, "float32")
    first = {"seed": 42, "accuracy": None}
    with pytest.raises(LossScaleCollapse, match=r"seed 43: training stopped: the loss was NaN"):
        eval_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
        fitting.train_other_seeds(spec, False, eval_ds, served, first)


def _compile(spec, model, jit_compile, strategy=None):
    model.compile(keras.optimizers.SGD(0.01), "sparse_categorical_crossentropy")

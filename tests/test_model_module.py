"""Bring your own model: loading a module, the mixed-precision rules, the readiness probes."""

import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from amp_pipeline.components.amp import readiness
from amp_pipeline.components.amp import rules as amp_rules
from amp_pipeline.components.amp.diagnosis import why_not_faster
from amp_pipeline.components.models import user_module as model_module
from amp_pipeline.components.models.user_module import ModelModuleError, ModelSpec

SPEC = ModelSpec(
    input_width=16,
    feature_names=tuple(f"f{i}" for i in range(16)),
    num_classes=3,
    class_names=("a", "b", "c"),
)


@pytest.fixture(autouse=True)
def float32_policy():
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


def _module(tmp_path, source: str, name: str = "user_model.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return model_module.resolve(str(path))


def test_a_module_file_is_loaded_built_and_hashed(tmp_path):
    ref = _module(
        tmp_path,
        """
        import keras

        def build_model(spec):
            inputs = keras.Input((spec.input_width,))
            return keras.Model(inputs, keras.layers.Dense(spec.num_classes, "softmax")(inputs))

        def optimizer():
            return keras.optimizers.SGD(0.1)
        """,
    )
    assert ref.is_file and len(ref.sha256) == 64
    ref = model_module.inspect(ref)
    assert ref.preprocessing is False
    module = model_module.load(ref)
    model = model_module.build(ref, module, SPEC)
    assert model.output_shape == (None, 3)
    assert isinstance(model_module.call_hook(ref, module, "optimizer"), keras.optimizers.SGD)
    # A changed file is a different module (and a different TFX cache key).
    (tmp_path / "user_model.py").write_text(
        (tmp_path / "user_model.py").read_text() + "\n# changed\n"
    )
    assert model_module.resolve(str(tmp_path / "user_model.py")).sha256 != ref.sha256


def test_an_importable_module_is_found_by_its_dotted_path():
    ref = model_module.resolve("examples.subclassed")
    assert not ref.is_file and ref.sha256
    model = model_module.build(ref, model_module.load(ref), SPEC)
    assert model(np.zeros((4, 16), "float32")).shape == (4, 3)


BAD_MODULES = {
    "no build_model": ("import keras\n", "defines no build_model(spec) function"),
    "raises on import": (
        "import keras\nraise RuntimeError('no GPU config found')\n",
        "raised on import: RuntimeError: no GPU config found at bad.py:2",
    ),
    "imports a missing package": (
        "import not_a_package_xyz\n",
        "raised on import: ModuleNotFoundError: No module named 'not_a_package_xyz'",
    ),
    "raises on build": (
        "def build_model(spec):\n    return 1 / 0\n",
        "build_model() raised ZeroDivisionError: division by zero at bad.py:2",
    ),
    "not a keras.Model": (
        "def build_model(spec):\n    return 'a model'\n",
        "build_model returned str, not a keras.Model",
    ),
    "wrong class count": (
        "import keras\n"
        "def build_model(spec):\n"
        "    i = keras.Input((spec.input_width,))\n"
        "    return keras.Model(i, keras.layers.Dense(7, 'softmax')(i))\n",
        "the model's output has shape (batch, 7), expected (batch, 3)",
    ),
    "two outputs": (
        "import keras\n"
        "def build_model(spec):\n"
        "    i = keras.Input((spec.input_width,))\n"
        "    return keras.Model(i, [keras.layers.Dense(3)(i), keras.layers.Dense(3)(i)])\n",
        "the model has 2 outputs",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_MODULES))
def test_each_broken_module_is_one_line_naming_the_module(case, tmp_path):
    source, expected = BAD_MODULES[case]
    with pytest.raises(ModelModuleError) as raised:
        ref = _module(tmp_path, source, "bad.py")
        model_module.build(ref, model_module.load(ref), SPEC)
    message = str(raised.value)
    assert "\n" not in message
    assert "bad.py" in message and expected in message, message


def test_missing_file_and_missing_import_path():
    with pytest.raises(ModelModuleError, match=r"--model-module nowhere/model\.py: no such file"):
        model_module.resolve("nowhere/model.py")
    with pytest.raises(ModelModuleError, match=r"--model-module no_such_pkg_q: no such module"):
        model_module.resolve("no_such_pkg_q")


def _head_model(final_dtype=None):
    inputs = keras.Input((16,), name="x")
    x = keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(3, "softmax", dtype=final_dtype, name="head")(x))


def test_a_reduced_precision_final_layer_is_moved_to_float32():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model, fix = amp_rules.float32_output(_head_model(), 16, "mixed_bfloat16")
    assert fix.action == "final_layer_float32" and fix.layer == "head"
    assert "'head' (Dense) computed in bfloat16" in fix.detail
    out = model(np.ones((2, 16), "float32"))
    assert out.dtype == tf.float32
    assert model.get_layer("hidden").compute_dtype == "bfloat16"  # the rest stays mixed


def test_a_float32_output_is_left_alone():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = _head_model(final_dtype="float32")
    same, fix = amp_rules.float32_output(model, 16, "mixed_bfloat16")
    assert same is model and fix.action == "none"


def test_a_subclassed_model_is_wrapped_in_a_float32_layer():
    class Net(keras.Model):
        def __init__(self):
            super().__init__(name="net")
            self.hidden = keras.layers.Dense(8)
            self.out = keras.layers.Dense(3, activation="softmax")

        def call(self, x):
            return self.out(self.hidden(x))

    keras.mixed_precision.set_global_policy("mixed_float16")
    net = Net()
    net(np.zeros((1, 16), "float32"))
    wrapped, fix = amp_rules.float32_output(net, 16, "mixed_float16")
    assert fix.action == "wrapped" and "float16" in fix.detail
    assert wrapped.get_layer(amp_rules.FLOAT32_OUTPUT).compute_dtype == "float32"
    assert wrapped(np.ones((2, 16), "float32")).dtype == tf.float32
    # No weights were added: a float32 rebuild of the same module takes the weights as they are.
    assert len(wrapped.get_weights()) == len(net.get_weights())


def test_a_final_layer_shared_with_another_branch_is_wrapped_not_changed():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    inputs = keras.Input((16,))
    shared = keras.layers.Dense(3, activation="softmax", name="shared_head")
    first = shared(keras.layers.Dense(16)(inputs))  # a first use, inside the model
    second = keras.layers.Dense(16)(keras.layers.Concatenate()([first, inputs]))
    model = keras.Model(inputs, shared(second))
    wrapped, fix = amp_rules.float32_output(model, 16, "mixed_bfloat16")
    assert fix.action == "wrapped"
    assert shared.compute_dtype == "bfloat16"  # the other use of the layer is unchanged


def test_layers_with_non_float32_variables_are_named_inside_nested_models():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    inner_in = keras.Input((4,))
    inner = keras.Model(
        inner_in, keras.layers.Dense(4, dtype="bfloat16", name="low_weights")(inner_in)
    )
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inner(inputs)))
    (warning,) = amp_rules.variable_dtype_warnings(model, "mixed_bfloat16")
    assert "'low_weights' has bfloat16 variables under mixed_bfloat16" in warning


class Recenter(keras.layers.Layer):
    """The planted bug: a hard-coded offset that float16 cannot hold."""

    def call(self, x):
        return (x + 1e5) - 1e5


def _builder(fixed: bool):
    def build(policy):
        keras.backend.clear_session()
        keras.utils.set_random_seed(1)
        keras.mixed_precision.set_global_policy(policy)
        inputs = keras.Input((16,))
        x = keras.layers.Dense(16, activation="relu")(inputs)
        x = Recenter(name="recenter", dtype="float32" if fixed else None)(x)
        x = keras.layers.Dense(16, activation="relu")(x)
        return keras.Model(inputs, keras.layers.Dense(3, "softmax", dtype="float32")(x))

    return build


def _batch():
    rng = np.random.default_rng(0)
    return rng.normal(size=(16, 16)).astype("float32"), rng.integers(0, 3, 16)


def test_numeric_probe_finds_the_planted_float16_overflow_and_suggests_float32():
    x, y = _batch()
    loss = keras.losses.SparseCategoricalCrossentropy()
    result = readiness.numeric_probe(_builder(False), x, y, "mixed_float16", loss)
    assert result["ok"] is False
    assert result["first_bad_layer"] == "recenter"
    assert "non-finite values under mixed_float16 but finite ones in float32" in result["reason"]
    assert "with dtype='float32'" in result["suggestion"]
    # Everything before the bad layer was fine.
    first = [row["path"] for row in result["layers"]].index(result["first_bad_path"])
    assert all(row["finite"] for row in result["layers"][:first])


def test_numeric_probe_finds_precision_loss_under_bfloat16_and_passes_the_fixed_model():
    x, y = _batch()
    loss = keras.losses.SparseCategoricalCrossentropy()
    broken = readiness.numeric_probe(_builder(False), x, y, "mixed_bfloat16", loss)
    assert broken["first_bad_layer"] == "recenter"
    assert "differs from float32 by 1.00" in broken["reason"]
    for policy in ("mixed_bfloat16", "mixed_float16"):
        fixed = readiness.numeric_probe(_builder(True), x, y, policy, loss)
        assert fixed["ok"], (policy, fixed["reason"])
        errors = [r["relative_error"] for r in fixed["layers"] if r["relative_error"] is not None]
        assert max(errors) < readiness.RELATIVE_ERROR_BOUND[policy]


class HostOp(keras.layers.Layer):
    """A layer that runs Python on the host: XLA cannot compile it."""

    def call(self, x):
        return tf.reshape(tf.numpy_function(lambda a: a * 1, [x], x.dtype), tf.shape(x))


def test_compile_probe_reports_an_xla_compile_failure_in_one_line():
    def build(policy):
        keras.mixed_precision.set_global_policy(policy)
        inputs = keras.Input((16,))
        return keras.Model(inputs, keras.layers.Dense(3, "softmax")(HostOp()(inputs)))

    def compile_model(model, jit):
        model.compile("adam", "sparse_categorical_crossentropy", jit_compile=jit)

    x, y = _batch()
    result = readiness.compile_probe(build, "mixed_bfloat16", compile_model, x, y)
    assert result["ok"] is False
    assert result["error"] == "unsupported operation PyFunc (no XLA kernel)"
    fine = readiness.compile_probe(_builder(True), "mixed_bfloat16", compile_model, x, y)
    assert fine["ok"] and fine["error"] is None


def test_tensor_core_advice_names_sizes_that_are_not_multiples_of_8():
    keras.mixed_precision.set_global_policy("mixed_float16")
    inputs = keras.Input((30,))
    x = keras.layers.Reshape((5, 6, 1))(inputs)
    x = keras.layers.Conv2D(12, 3, padding="same", name="conv")(x)
    x = keras.layers.Dense(64, name="ok_dense")(keras.layers.Flatten()(x))
    x = keras.layers.Dense(100, name="odd_dense")(x)
    model = keras.Model(inputs, keras.layers.Dense(10, "softmax", name="head")(x))
    advice = readiness.tensor_core_advice(model, batch_size=50, num_classes=10)
    assert "batch size 50 is not a multiple of 8" in advice
    assert "Conv2D 'conv' has 12 channels: use a multiple of 8" in advice
    assert "Dense 'odd_dense' has 100 units: use a multiple of 8" in advice
    assert "Dense 'ok_dense' reads 360 input features" not in " ".join(advice)  # 360 = 8 * 45
    assert not any("'head'" in a or "'ok_dense' has" in a for a in advice)
    assert readiness.tensor_core_advice(model, batch_size=64, num_classes=10)[0].startswith("Conv")


def _figures(step_ms):
    return {"step_time_ms": {"p50": step_ms, "p90": step_ms}}


def _diagnostics(trivial=0.1, data=0.1, large=3.0, small=3.0):
    def gain(g, shape):
        return {"shape": shape, "dtype": "bfloat16", "float32_ms": g, "reduced_ms": 1.0, "gain": g}

    return {
        "trivial_step_ms": trivial,
        "input_ms_per_batch": data,
        "matmul_large": gain(large, [1024, 1024, 1024]),
        "matmul_model": gain(small, [64, 128, 128]),
        "widest_layer": 128,
    }


def test_why_not_faster_gives_only_the_reasons_its_measurements_support():
    fp32, amp = _figures(10.0), _figures(9.0)
    assert why_not_faster(1.5, "mixed_bfloat16", "", fp32, amp, _diagnostics()) is None
    none_apply = why_not_faster(1.1, "mixed_bfloat16", "", fp32, amp, _diagnostics())
    assert none_apply["reasons"][0].startswith("none of the measured causes applies")
    hardware = why_not_faster(
        1.0, "float32", "CPU X has neither AMX-BF16 nor AVX-512 BF16", {}, {}, None
    )
    assert hardware["reasons"] == [
        "no reduced-precision hardware: CPU X has neither AMX-BF16 nor AVX-512 BF16"
    ]
    emulated = why_not_faster(0.5, "mixed_bfloat16", "", fp32, amp, _diagnostics(large=0.4))
    assert emulated["reasons"][0].startswith("no fast bfloat16 units")
    overhead = why_not_faster(1.0, "mixed_bfloat16", "", fp32, amp, _diagnostics(trivial=4.5))
    assert overhead["reasons"] == [
        "per-step overhead dominates: a trivial training step (one small Dense layer, same batch) "
        "takes 4.5 ms of the 9.0 ms AMP step"
    ]
    input_bound = why_not_faster(1.0, "mixed_bfloat16", "", fp32, amp, _diagnostics(data=7.2))
    assert input_bound["reasons"][0].startswith("input-bound: reading one batch takes 7.2 ms")
    small = why_not_faster(1.0, "mixed_bfloat16", "", fp32, amp, _diagnostics(small=0.9))
    assert small["reasons"][0].startswith("the model is too small for the hardware")
    # Just below the boundaries: no reason claimed.
    quiet = why_not_faster(
        1.0, "mixed_bfloat16", "", fp32, amp, _diagnostics(trivial=4.4, data=7.1)
    )
    assert quiet["reasons"][0].startswith("none of the measured causes")

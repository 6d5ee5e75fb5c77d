"""TFLite export of models trained under every policy: each variant loads and matches."""

import keras
import numpy as np
import pytest

from amp_pipeline.components.data.ingest import prepare
from amp_pipeline.components.export import device_graph
from amp_pipeline.components.export.tflite import (
    VARIANTS,
    LiteRTRunner,
    ParityThresholds,
    export_tflite,
    parity,
)
from amp_pipeline.components.gate.device_rules import tflite_rules
from amp_pipeline.components.training.model_building import build_under_policy, float32_rebuild
from amp_pipeline.components.training.options import TrainSpec
from tests.helpers import digits_rows

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    spec = prepare(None, "label", tmp_path_factory.mktemp("data"))
    rows = digits_rows()
    x = np.array([[int(r[f"pixel_{i}"]) for i in range(64)] for r in rows], np.float32) / 16.0
    y = np.array([int(r["label"]) for r in rows])
    return spec, x[:1400], y[:1400], x[1400:], y[1400:]


@pytest.fixture(scope="module")
def float32_weights(digits, tmp_path_factory):
    """Weights of the digits CNN trained in float32: every policy's model starts from them.

    Training from scratch under mixed_float16 takes minutes on a CPU (float16 is emulated);
    each test fine-tunes under its policy instead, which is all the export path depends on.
    """
    data, train_x, train_y, _, _ = digits
    tmp = tmp_path_factory.mktemp("w")
    spec = TrainSpec(
        train_files=(),
        eval_files=(),
        transform_output="",
        serving_model_dir=str(tmp / "s"),
        model_run_dir=str(tmp / "r"),
        data_spec=data.to_dict(),
        model="cnn",
    )
    keras.utils.set_random_seed(0)
    model = build_under_policy(spec, "float32")
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy")
    model.fit(train_x, train_y, batch_size=32, epochs=6, verbose=0)
    weights = model.get_weights()
    keras.mixed_precision.set_global_policy("float32")
    return weights


@pytest.fixture(autouse=True)
def restore_policy():
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_every_variant_converts_and_matches_the_savedmodel(
    policy, digits, float32_weights, tmp_path
):
    data, train_x, train_y, eval_x, eval_y = digits
    spec = TrainSpec(
        train_files=(),
        eval_files=(),
        transform_output="",
        serving_model_dir=str(tmp_path / "serving"),
        model_run_dir=str(tmp_path / "run"),
        data_spec=data.to_dict(),
        model="cnn",
        policy=policy,
    )
    keras.utils.set_random_seed(0)
    model = build_under_policy(spec, policy)
    optimizer = keras.optimizers.Adam(3e-4)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer, "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.set_weights(float32_weights)
    # Two steps: the float32 weights already classify; the export path needs a trained policy.
    model.fit(train_x[:64], train_y[:64], batch_size=32, epochs=1, verbose=0)
    assert model.layers[-1].compute_dtype == "float32"  # softmax stays float32
    if policy != "float32":
        assert model.layers[2].compute_dtype == policy.split("_")[1]

    reference = float32_rebuild(spec, model)
    assert all(w.dtype == "float32" for w in reference.weights)
    # The device graph of `x` itself (what a module's own preprocessing ships): this test is
    # about the policies' float32 rebuild converting, not about Transform.
    graph = device_graph.DeviceGraph(reference, "", data, x_width=64)
    saved = graph.write(tmp_path / "device")
    reference_probs = reference.predict(eval_x, verbose=0)
    report = export_tflite(
        saved,
        tmp_path / "tflite",
        device_graph.inputs_from_x(graph, train_x[:200]),
        graph.sidecar(),
        thresholds=ParityThresholds(min_agreement=0.995, max_int8_accuracy_drop=0.02),
    )
    for variant in VARIANTS:
        r = report["variants"][variant]
        assert r["converted"], r
        runner = LiteRTRunner(r["path"])  # loads in LiteRT on its own
        probs = np.stack([runner({"x": row[None, :]}) for row in eval_x])
        r.update(parity(probs, reference_probs, eval_y))
        assert probs.shape == (len(eval_x), 10) and abs(float(probs[0].sum()) - 1.0) < 0.05
        assert (tmp_path / "tflite" / f"model_{variant}.json").exists()
    assert float(np.mean(reference_probs.argmax(1) == eval_y)) > 0.8
    rules = {rule.name: rule for rule in tflite_rules(report)}
    for variant in VARIANTS:
        assert rules[f"tflite_{variant}"].outcome != "fail", (variant, rules)
    assert report["variants"]["float32"]["max_abs_diff"] < 1e-4


def test_a_variant_that_fails_to_convert_is_reported_with_the_reason(tmp_path):
    (tmp_path / "not_a_model").mkdir()
    report = export_tflite(
        str(tmp_path / "not_a_model"), tmp_path / "out", [], {"output": {}}, variants=("float32",)
    )
    result = report["variants"]["float32"]
    assert result["converted"] is False and result["error"]
    # The gate rejects a variant that did not convert, naming the converter's reason.
    (rule,) = tflite_rules(report)
    assert not rule.passed and rule.detail == f"conversion failed: {result['error']}"

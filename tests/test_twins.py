"""Which twin ships (components/gate/twins.py), on decisions built from real rules."""

import pytest

from amp_pipeline.components.gate import decision_md, twins
from amp_pipeline.components.gate import rules as gate_rules
from amp_pipeline.components.gate.stats import Paired

CFG = gate_rules.GateConfig()
SLOW = {"ratio": {"median": 0.96, "min": 0.9, "max": 1.0, "q1": 0.93, "q3": 0.98, "n": 7},
        "steps_per_burst": 15, "policy": "mixed_bfloat16", "batch_size": 64}  # fmt: skip
FAST = {**SLOW, "ratio": {**SLOW["ratio"], "median": 1.8, "q1": 1.7, "q3": 1.9}}
SERVES = gate_rules.serving_rule(
    {"passed": True, "examples": 64, "config": {"latency_budget_ms": 500},
     "latency": {"grpc": {"p99_ms": 3.0}, "rest": {"p99_ms": 4.0}}}
)  # fmt: skip
NO_SERVER = gate_rules.serving_rule({"passed": False, "reasons": ["no answer on gRPC"]})


def measurements(speed: dict, amp_right: int, fp32_right: int, n: int = 2000):
    """AMP and float32 right on `amp_right` and `fp32_right` of n examples (AMP's wrong ones a
    subset of float32's, or the other way round), 60% majority class."""
    b, c = max(amp_right - fp32_right, 0), max(fp32_right - amp_right, 0)
    return gate_rules.Measurements(
        fp32_accuracy=fp32_right / n,
        amp_accuracy=amp_right / n,
        production_accuracy=None,
        fp32_examples_per_sec=1000.0,
        amp_examples_per_sec=1000.0 * speed["ratio"]["median"],
        amp_policy="mixed_bfloat16",
        majority_share=0.6,
        majority_class="a",
        parity=Paired(n=n, b=b, c=c),
        speed=speed,
    )


def judge(m, fp32_serving=SERVES, require_amp=False) -> dict:
    import dataclasses

    amp = gate_rules.decide(m, CFG, extra=(SERVES,))
    float32_twin = dataclasses.replace(
        m, amp_accuracy=m.fp32_accuracy, parity=None, candidate="float32 twin"
    )
    fp32 = gate_rules.decide_float32(float32_twin, CFG, extra=(fp32_serving,))
    return twins.choose(amp, fp32, require_amp, m.amp_policy)


def test_amp_ships_when_it_passes_every_rule():
    decision = judge(measurements(FAST, 1800, 1800))
    assert decision["shipped_precision"] == "amp" and decision["passed"]
    assert decision["rules"] == decision["twins"]["amp"]["rules"]
    assert twins.headline(decision) == "PROMOTED AMP twin (mixed_bfloat16)"


def test_amp_slower_ships_the_float32_twin_and_says_the_ratio():
    decision = judge(measurements(SLOW, 1800, 1800))
    assert decision["shipped_precision"] == "float32" and decision["decision"] == "promoted"
    assert decision["twins"]["amp"]["failed"] == ["min_speedup"]
    # The float32 twin's own rules: none compares it with itself.
    names = {r["name"] for r in decision["rules"]}
    assert names == {"min_accuracy", "beats_majority", "production_regression", "serving_infra"}
    assert decision["failed"] == []
    assert "float32 twin accuracy 0.9000" in decision["rules"][0]["detail"]
    assert twins.headline(decision).startswith(
        "PROMOTED float32 twin: AMP not faster here (precision ratio 0.96x"
    )


def test_amp_less_accurate_ships_the_float32_twin_with_the_points_lost():
    decision = judge(measurements(FAST, 1783, 1800))  # -0.85 points, beyond 0.5
    assert decision["shipped_precision"] == "float32"
    assert "AMP lost accuracy (-0.85 points)" in twins.headline(decision)


def test_require_amp_ships_nothing_when_amp_loses():
    decision = judge(measurements(SLOW, 1800, 1800), require_amp=True)
    assert decision["shipped_precision"] == "none" and not decision["passed"]
    assert decision["failed"] == ["min_speedup"]
    assert twins.headline(decision) == (
        "REJECTED: failed min_speedup (--require-amp: the float32 twin is not shipped)"
    )


def test_neither_twin_qualifies_rejects_and_names_both_failures():
    decision = judge(measurements(SLOW, 1800, 1800), fp32_serving=NO_SERVER)
    assert decision["shipped_precision"] == "none" and decision["decision"] == "rejected"
    assert twins.headline(decision) == (
        "REJECTED: failed min_speedup; the float32 twin failed serving_infra"
    )


def test_a_float32_twin_no_better_than_the_majority_class_does_not_ship():
    decision = judge(measurements(SLOW, 1100, 1100))  # 55% < 60% majority
    assert decision["shipped_precision"] == "none"
    assert "beats_majority" in decision["twins"]["float32"]["failed"]


def test_decision_md_shows_both_twins_side_by_side():
    decision = judge(measurements(SLOW, 1800, 1800))
    md = decision_md.to_markdown(decision)
    assert md.startswith("# Promotion gate: PROMOTED float32 twin: AMP not faster here")
    assert "| rule | AMP twin | float32 twin |" in md
    assert "| accuracy_parity | pass" in md and "n/a (the reference) |" in md
    assert "| **decision** | fails | passes |" in md
    assert "## AMP twin" in md and "## float32 twin" in md


@pytest.mark.parametrize("probe_gain,no_gain", [(0.97, True), (1.9, False)])
def test_the_recipe_probe_says_when_amp_is_unlikely_to_pay(probe_gain, no_gain):
    from amp_pipeline.components.amp.diagnosis import probe_text

    probe = {"shape": [64, 128, 128], "dtype": "bfloat16", "gain": probe_gain,
             "no_gain": no_gain}  # fmt: skip
    text = probe_text(probe)
    assert f"gains {probe_gain:.2f}x in bfloat16" in text
    assert ("AMP is unlikely to be faster" in text) is no_gain


def test_largest_gemm_reads_dense_and_conv_shapes():
    import keras

    from amp_pipeline.components.amp.diagnosis import largest_gemm

    inputs = keras.Input((16, 16, 1))
    x = keras.layers.Conv2D(32, 3, padding="same")(inputs)  # (64*256, 9, 32)
    x = keras.layers.Conv2D(64, 3, padding="same")(x)  # (64*256, 288, 64): the largest
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, keras.layers.Dense(10)(x))
    assert largest_gemm(model, 64) == (64 * 256, 288, 64)
    dense = keras.Sequential([keras.Input((20,)), keras.layers.Dense(128), keras.layers.Dense(3)])
    assert largest_gemm(dense, 64) == (64, 20, 128)

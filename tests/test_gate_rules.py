"""Each promotion rule on crafted inputs, boundaries included."""

import dataclasses

import pytest

from amp_pipeline.components.gate.decision_md import to_markdown
from amp_pipeline.components.gate.rules import GateConfig, Measurements, decide

CFG = GateConfig(accuracy_tolerance=0.01, min_accuracy=0.9, min_speedup=1.5)
GOOD = Measurements(
    fp32_accuracy=0.95,
    amp_accuracy=0.95,
    production_accuracy=0.94,
    fp32_examples_per_sec=100.0,
    amp_examples_per_sec=300.0,
    amp_policy="mixed_bfloat16",
)


def rule(decision, name):
    return next(r for r in decision["rules"] if r["name"] == name)


def test_everything_passes():
    d = decide(GOOD, CFG)
    assert d["passed"] and d["decision"] == "promoted" and d["failed"] == []
    assert [r["name"] for r in d["rules"]] == [
        "accuracy_parity",
        "min_accuracy",
        "beats_majority",
        "production_regression",
        "min_speedup",
    ]
    assert rule(d, "beats_majority")["skipped"]  # no class shares given


@pytest.mark.parametrize(("amp", "passed"), [(0.0, False), (0.6, False), (0.6001, True)])
def test_a_model_must_beat_always_answering_the_majority_class(amp, passed):
    # Both twins equally useless: parity alone would promote 0.0 vs 0.0.
    m = dataclasses.replace(
        GOOD,
        amp_accuracy=amp,
        fp32_accuracy=amp,
        production_accuracy=None,
        majority_share=0.6,
        majority_class="no",
    )
    d = decide(m, GateConfig(0.01, 0.0, 1.0))
    r = rule(d, "beats_majority")
    assert r["passed"] is passed and r["threshold"] == 0.6
    assert rule(d, "accuracy_parity")["passed"]
    assert d["passed"] is passed
    assert "always predicting the most common class ('no')" in r["detail"]
    assert "beats_majority" in to_markdown(d)


@pytest.mark.parametrize(("amp", "passed"), [(0.94, True), (0.9399, False), (0.96, True)])
def test_accuracy_parity_boundary(amp, passed):
    m = dataclasses.replace(GOOD, amp_accuracy=amp, fp32_accuracy=0.95, production_accuracy=None)
    r = rule(decide(m, GateConfig(0.01, 0.0, 1.0)), "accuracy_parity")
    assert r["passed"] is passed
    assert r["value"] == pytest.approx(amp - 0.95)
    assert r["threshold"] == -0.01


@pytest.mark.parametrize(("amp", "passed"), [(0.9, True), (0.8999, False)])
def test_min_accuracy_boundary(amp, passed):
    m = dataclasses.replace(GOOD, amp_accuracy=amp, fp32_accuracy=amp, production_accuracy=None)
    d = decide(m, CFG)
    assert rule(d, "min_accuracy")["passed"] is passed
    assert d["passed"] is passed


def test_production_regression_blocks_promotion():
    m = dataclasses.replace(GOOD, production_accuracy=0.97)
    d = decide(m, CFG)
    assert d["decision"] == "rejected" and d["failed"] == ["production_regression"]
    assert rule(d, "production_regression")["value"] == pytest.approx(-0.02)


def test_production_boundary_passes():
    m = dataclasses.replace(GOOD, production_accuracy=0.96)
    assert rule(decide(m, CFG), "production_regression")["passed"]


def test_first_push_has_no_production_model_and_says_so():
    r = rule(
        decide(dataclasses.replace(GOOD, production_accuracy=None), CFG), "production_regression"
    )
    assert r["passed"] and r["skipped"] and "no model in production yet" in r["detail"]


@pytest.mark.parametrize(("amp_eps", "passed"), [(150.0, True), (149.99, False)])
def test_min_speedup_boundary(amp_eps, passed):
    d = decide(dataclasses.replace(GOOD, amp_examples_per_sec=amp_eps), CFG)
    assert rule(d, "min_speedup")["passed"] is passed
    assert rule(d, "min_speedup")["value"] == pytest.approx(amp_eps / 100.0)


def test_speedup_rule_does_not_apply_when_amp_runs_float32():
    m = dataclasses.replace(GOOD, amp_policy="float32", amp_examples_per_sec=80.0)
    r = rule(decide(m, CFG), "min_speedup")
    assert r["passed"] and r["skipped"] and r["value"] is None


def test_nan_accuracy_never_passes():
    m = dataclasses.replace(GOOD, amp_accuracy=float("nan"))
    d = decide(m, CFG)
    assert not d["passed"]
    assert {"accuracy_parity", "min_accuracy"} <= set(d["failed"])


def test_several_failures_are_all_named_in_markdown():
    m = dataclasses.replace(GOOD, amp_accuracy=0.5, amp_examples_per_sec=90.0)
    d = decide(m, CFG)
    assert d["failed"] == [
        "accuracy_parity",
        "min_accuracy",
        "production_regression",
        "min_speedup",
    ]
    md = to_markdown(d)
    assert md.startswith("# Promotion gate: REJECTED")
    assert md.count("**FAIL**") == 4
    assert "Rejected by: accuracy_parity, min_accuracy, production_regression, min_speedup." in md


def test_config_validation_says_what_it_received():
    with pytest.raises(ValueError, match=r"Received: accuracy_tolerance=2"):
        GateConfig(accuracy_tolerance=2)
    with pytest.raises(ValueError, match=r"Received: min_speedup=-1"):
        GateConfig(min_speedup=-1)


def _speed(ratios):
    from amp_pipeline.components.amp.perf import median_and_spread

    return {"ratio": median_and_spread(ratios), "steps_per_burst": 20, "ratios": ratios}


@pytest.mark.parametrize(
    ("ratios", "outcome"),
    [
        ([1.3, 1.4, 1.35, 1.45, 1.38], "pass"),
        ([0.9, 0.95, 0.92, 0.97, 0.93], "fail"),  # no round reaches 1.0
        # The median is below the minimum though some rounds reach it: the median decides.
        ([0.95, 0.97, 1.02, 0.96, 1.05], "fail"),
        ([0.9, 0.95, 1.0, 1.2, 1.3], "pass"),  # the median exactly at it (inclusive)
    ],
)
def test_min_speedup_decides_on_the_median_of_the_side_by_side_rounds(ratios, outcome):
    speed = {**_speed(ratios), "policy": "mixed_bfloat16", "batch_size": 64, "xla": False}
    m = dataclasses.replace(GOOD, speed=speed, amp_examples_per_sec=1.0)
    r = rule(decide(m, GateConfig(0.01, 0.0, 1.0)), "min_speedup")
    assert r["outcome"] == outcome and r["passed"] is (outcome == "pass")
    assert r["value"] == pytest.approx(sorted(ratios)[2]) and r["n"] == 5
    assert "over 5 side-by-side rounds of 20 steps" in r["detail"]
    # The rule says which ratio it uses, and at what.
    assert r["detail"].startswith(
        "precision ratio (mixed_bfloat16 vs float32, both at batch 64, xla off, threads default)"
    )
    strict = rule(decide(m, GateConfig(0.01, 0.0, 1.0, strict=True)), "min_speedup")
    assert strict["passed"] is (outcome == "pass")


def test_without_a_side_by_side_measurement_the_recipe_ratio_decides_and_says_so():
    m = dataclasses.replace(GOOD, amp_examples_per_sec=90.0)
    r = rule(decide(m, GateConfig(0.01, 0.0, 1.0)), "min_speedup")
    assert not r["passed"] and r["detail"].startswith("recipe ratio (the trainers as they ran")


def test_accuracy_parity_uses_paired_evidence_when_there_is_some():
    from amp_pipeline.components.gate.stats import Paired

    noisy = dataclasses.replace(GOOD, parity=Paired(n=360, b=3, c=4))
    r = rule(decide(noisy, CFG), "accuracy_parity")
    assert r["outcome"] == "unproven" and r["passed"] and r["n"] == 360
    assert r["interval"][0] < -0.01 < 0 < r["interval"][1]
    assert r["detail"].startswith("parity not proven at n=360, about ")
    strict = decide(noisy, dataclasses.replace(CFG, strict=True))
    assert rule(strict, "accuracy_parity")["outcome"] == "fail"
    assert "accuracy_parity" in strict["failed"]
    clear = dataclasses.replace(GOOD, parity=Paired(n=1000, b=0, c=40))
    assert rule(decide(clear, CFG), "accuracy_parity")["outcome"] == "fail"
    md = to_markdown(decide(noisy, CFG))
    assert "| accuracy_parity |" in md and "not proven (does not reject)" in md
    assert "Not proven: accuracy_parity" in md
    assert "an estimate beyond its threshold rejects" in md


def _old_percentile_interval(n: int, b: int, c: int) -> tuple[float, float]:
    """The interval the gate printed before (plain bootstrap, its fixed seed), to recover the
    discordant counts behind a recorded result."""
    import numpy as np

    rng = np.random.default_rng(20261202)
    draws = rng.multinomial(n, [b / n, c / n, 1 - (b + c) / n], size=4000)
    lo, hi = np.quantile((draws[:, 0] - draws[:, 1]) / n, [0.025, 0.975])
    return float(lo), float(hi)


def test_the_review_case_is_rejected_at_the_defaults():
    """benchmarks/results/gate_noise.json, seed 2: AMP 0.9770 vs float32 0.9856 on 348
    examples, promoted as 'inconclusive' before. Replayed with its recorded evidence through the
    gate's rules at the default thresholds, it is rejected."""
    import json
    from pathlib import Path

    from amp_pipeline.components.gate.stats import Paired

    record = json.loads(
        (Path(__file__).parent.parent / "benchmarks/results/gate_noise.json").read_text()
    )
    seed2 = next(r for r in record["seeds"] if r["seed"] == 2)
    parity = seed2["parity"]
    assert seed2["status"] == "promoted" and parity["outcome"] == "inconclusive"
    n, delta = parity["n"], parity["value"]
    net = round(delta * n)  # wins minus losses: -3
    # The recorded interval pins down the discordant counts behind it.
    counts = [
        (b, b - net)
        for b in range(0, 40)
        if _old_percentile_interval(n, b, b - net)
        == pytest.approx(tuple(parity["interval"]), abs=1e-9)
    ]
    assert counts, "no discordant counts reproduce the recorded interval"
    defaults = GateConfig()
    for b, c in counts:
        m = dataclasses.replace(
            GOOD,
            fp32_accuracy=seed2["fp32_accuracy"],
            amp_accuracy=seed2["amp_accuracy"],
            production_accuracy=None,
            parity=Paired(n=n, b=b, c=c),
        )
        d = decide(m, defaults)
        assert d["decision"] == "rejected" and "accuracy_parity" in d["failed"]
        assert "beyond the 0.50% tolerance" in rule(d, "accuracy_parity")["detail"]


def test_tflite_rules_judge_agreement_and_int8_accuracy_on_their_counts():
    from amp_pipeline.components.gate.device_rules import NOT_SHIPPED, tflite_rules

    report = {
        "reference": {"accuracy": 0.97, "examples": 37},
        "thresholds": {"min_agreement": 0.995, "max_int8_accuracy_drop": 0.01},
        "variants": {
            "float16": {"converted": True, "n": 360, "agreeing": 360, "max_abs_diff": 4e-4},
            # One example of 37 lost: 2.7 points; the data cannot prove it, but it is the estimate.
            "int8": {
                "converted": True, "n": 37, "agreeing": 36, "only_variant_right": 0,
                "only_reference_right": 1, "accuracy": 0.943, "max_abs_diff": 0.3,
            },
            "dynamic_int8": {"converted": False, "error": "unsupported op"},
            "float32": {"converted": True, "n": 360, "agreeing": 340, "max_abs_diff": 0.9},
        },
    }  # fmt: skip
    rules = {r.name: r for r in tflite_rules(report)}
    # 360 of 360 cannot prove 0.995: not proven, and not a rejection.
    assert rules["tflite_float16"].outcome == "unproven" and rules["tflite_float16"].passed
    assert "largest probability difference 0.0004" in rules["tflite_float16"].detail
    # The int8 estimate loses 2.7 points against a 1-point allowance: that variant is not
    # shipped (the twin is not rejected for it), and the reason stays.
    assert rules["tflite_int8"].outcome == NOT_SHIPPED and rules["tflite_int8"].passed
    assert "loses" in rules["tflite_int8"].detail or "changes" in rules["tflite_int8"].detail
    assert rules["tflite_dynamic_int8"].outcome == NOT_SHIPPED
    assert "conversion failed: unsupported op" in rules["tflite_dynamic_int8"].detail
    # A float32 variant that disagrees rejects the twin: the device deployment is broken.
    assert rules["tflite_float32"].outcome == "fail" and not rules["tflite_float32"].passed
    strict = {r.name: r for r in tflite_rules(report, strict=True)}
    assert strict["tflite_int8"].outcome == NOT_SHIPPED and not strict["tflite_float16"].passed


def test_a_variant_the_twin_cannot_ship_is_not_run_and_says_so():
    from amp_pipeline.components.gate.device_rules import tflite_rules

    report = {"variants": {"float32": {"converted": True, "path": "m.tflite", "size_bytes": 9}}}
    (rule,) = tflite_rules(report)
    assert rule.skipped and "not run on LiteRT" in rule.detail


def test_the_pusher_leaves_out_the_variants_the_gate_did_not_ship(tmp_path):
    from amp_pipeline.components.gate.device_rules import not_shipped_variants
    from amp_pipeline.serving.pusher import publish

    result = {
        "shipped_precision": "amp",
        "twins": {"amp": {"rules": [
            {"name": "tflite_float32", "outcome": "pass"},
            {"name": "tflite_int8", "outcome": "not shipped"},
        ]}},
    }  # fmt: skip
    assert not_shipped_variants(result) == ["int8"]
    source = tmp_path / "model" / "tflite"
    source.mkdir(parents=True)
    for name in ("model_float32.tflite", "model_float32.json", "model_int8.tflite",
                 "model_int8.json", "labels.txt"):  # fmt: skip
        (source / name).write_text("x")
    target = publish(tmp_path / "model", tmp_path / "serving", now=5,
                     left_out=("model_int8.tflite", "model_int8.json"))  # fmt: skip
    assert sorted(p.name for p in (target / "tflite").iterdir()) == [
        "labels.txt", "model_float32.json", "model_float32.tflite",
    ]  # fmt: skip


def test_a_float32_amp_trainer_skips_the_speed_rule_with_the_true_reason():
    from amp_pipeline.components.speed.side_by_side import float32_reason

    winner = {"key": "float32/xla=off/batch=256/threads=2", "reason": "fastest of 4 candidates"}
    tuned = {"policy": "float32", "autotune": {"winner": winner}}
    m = dataclasses.replace(GOOD, amp_policy="float32", speed={"skipped": float32_reason(tuned)})
    r = rule(decide(m, CFG), "min_speedup")
    assert r["skipped"] and r["passed"]
    assert r["detail"].startswith("autotune chose float32 (float32/xla=off/batch=256/threads=2")
    assert "no faster precision" not in r["detail"]

"""The speed record: two ratios that say what they were measured at, and which one gates."""

import pytest

from amp_pipeline.components.amp.perf import median_and_spread
from amp_pipeline.components.speed import record as speed_record
from amp_pipeline.components.speed.side_by_side import float32_reason

FP32 = {
    "policy": "float32",
    "batch_size": 64,
    "xla": False,
    "threads": 0,
    "examples_per_sec": 1000.0,
    "peak_memory_mb": 400.0,
    "memory_method": "VmHWM growth",
}
# Autotune's recipe: bfloat16 at 4x the batch, 2 threads.
AMP = {
    "policy": "mixed_bfloat16",
    "batch_size": 256,
    "xla": False,
    "threads": 2,
    "examples_per_sec": 3000.0,
    "peak_memory_mb": 600.0,
}
SPEED = {
    "ratio": median_and_spread([1.3, 1.4, 1.35]),
    "policy": "mixed_bfloat16",
    "batch_size": 256,
    "xla": False,
    "threads": 2,
    "method": "3 rounds",
}


def test_precision_and_recipe_ratios_are_kept_apart_and_labelled():
    record = speed_record.build(FP32, AMP, SPEED)
    assert record["gate_uses"] == "precision"
    assert record["precision"]["ratio"] == pytest.approx(1.35)
    assert record["precision"]["at"] == {
        "policy": "mixed_bfloat16",
        "batch_size": 256,
        "xla": False,
        "threads": 2,
    }
    # The recipe ratio compares AMP at 256 with float32 at 64, and says so.
    assert record["recipe"]["ratio"] == pytest.approx(3.0)
    assert not record["recipe"]["same_recipe"]
    assert record["memory"]["ratio"] == pytest.approx(1.5) and record["memory"]["kind"] == "recipe"
    text = speed_record.lines(record)
    assert text[0].startswith(
        "precision ratio 1.35x (mixed_bfloat16 vs float32, both at batch 256, xla off, threads 2"
    )
    assert text[1].startswith(
        "recipe ratio 3.00x (AMP as trained: mixed_bfloat16, batch 256, xla off, threads 2; "
    )
    assert "float32 as trained: float32, batch 64, xla off, threads default" in text[1]
    assert "AMP at batch 256, float32 at batch 64" in text[2]


def test_without_a_side_by_side_measurement_the_recipe_ratio_gates_and_the_reason_is_true():
    tuned = {
        **FP32,
        "batch_size": 256,
        "examples_per_sec": 1800.0,
        "autotune": {
            "winner": {
                "key": "float32/xla=off/batch=256/threads=2",
                "reason": "fastest of 4 candidates that kept parity",
            }
        },
    }
    skipped = {"skipped": float32_reason(tuned)}
    assert skipped["skipped"].startswith(
        "autotune chose float32 (float32/xla=off/batch=256/threads=2: fastest of 4"
    )
    assert "not a precision gain" in skipped["skipped"]
    assert "no faster precision on this hardware" not in skipped["skipped"]
    record = speed_record.build(FP32, tuned, skipped)
    assert record["gate_uses"] == "recipe" and record["precision"]["ratio"] is None
    assert record["recipe"]["ratio"] == pytest.approx(1.8)
    assert speed_record.lines(record)[0].startswith("precision ratio not measured: autotune chose")


def test_no_side_by_side_rounds_leave_the_gate_the_recipe_ratio(tmp_path):
    """--speed-rounds 0: nothing is timed (no child process); the record says why, and the
    gate's speed rule judges the trainers' own throughputs."""
    import json

    from amp_pipeline.components.gate import rules
    from amp_pipeline.components.speed import side_by_side

    fp32, amp = FP32, {**AMP, "examples_per_sec": 1500.0}
    for name, figures in (("fp32", fp32), ("amp", amp)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "figures.json").write_text(json.dumps(figures))
    speed = side_by_side.compare(
        str(tmp_path / "fp32"), str(tmp_path / "amp"), str(tmp_path / "out"), rounds=0
    )
    assert speed["skipped"].startswith("--speed-rounds 0: no side-by-side timing")
    record = speed_record.build(fp32, amp, speed)
    assert record["gate_uses"] == "recipe" and record["recipe"]["ratio"] == 1.5
    assert speed_record.lines(record)[0] == f"precision ratio not measured: {speed['skipped']}"
    m = rules.Measurements(0.9, 0.9, None, 1000.0, 1500.0, "mixed_bfloat16", speed=speed)
    rule = rules.min_speedup(m, rules.GateConfig(min_speedup=1.2))
    assert rule.passed and rule.value == 1.5 and rule.detail.startswith("recipe ratio")

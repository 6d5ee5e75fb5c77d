"""The benchmark interleaves, takes medians, and writes its three files."""

import json

import pytest

from amp_pipeline.benchmarks.speed.bench import bench_configs, run_bench
from tests.conftest import run_cli


def test_rounds_interleave_float32_and_amp_and_report_medians():
    configs = bench_configs(["cnn", "mlp"], ["float32", "mixed_bfloat16"], [False], 8, 32, 2)
    calls = []
    speeds = iter([10, 30, 100, 100, 12, 33, 90, 95, 11, 36, 95, 110])

    def fake(config):
        calls.append(config.key)
        return {
            "examples_per_sec": next(speeds),
            "step_time_ms": {"p50": 1.0, "p90": 2.0},
            "peak_memory_mb": 50.0 if config.policy == "float32" else 30.0,
            "memory_method": "fake",
        }

    result = run_bench(configs, repeats=3, progress=lambda _: None, runner=fake)
    one_round = [
        "cnn/float32/xla=off",
        "cnn/mixed_bfloat16/xla=off",
        "mlp/float32/xla=off",
        "mlp/mixed_bfloat16/xla=off",
    ]
    assert calls == one_round * 3  # each round runs every configuration once, side by side
    by_key = {r["key"]: r for r in result["results"]}
    assert by_key["cnn/float32/xla=off"]["examples_per_sec"] == 11  # median of 10, 12, 11
    assert by_key["cnn/mixed_bfloat16/xla=off"]["examples_per_sec"] == 33
    (cnn,) = [c for c in result["comparisons"] if c["model"] == "cnn"]
    assert cnn["speedup"] == pytest.approx(3.0) and cnn["memory_ratio"] == pytest.approx(0.6)


@pytest.mark.e2e
def test_bench_command_writes_json_markdown_and_png(tmp_path):
    out = tmp_path / "bench"
    result = run_cli(
        "bench",
        "--models",
        "mlp",
        "--policies",
        "float32,mixed_bfloat16",
        "--steps",
        "3",
        "--warmup-steps",
        "1",
        "--repeats",
        "1",
        "--batch-size",
        "8",
        "--output",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    bench = json.loads((out / "bench.json").read_text())
    assert [r["key"] for r in bench["results"]] == [
        "mlp/float32/xla=off",
        "mlp/mixed_bfloat16/xla=off",
    ]
    for r in bench["results"]:
        assert r["examples_per_sec"] > 0 and r["peak_memory_mb"] >= 0
        assert r["step_time_ms"]["p50"] > 0
    assert bench["comparisons"][0]["model"] == "mlp"
    assert bench["machine"]["cores"] >= 1
    md = (out / "bench.md").read_text()
    assert "| mlp | mixed_bfloat16 | off | 1 | float32 | " in md  # the comparison row
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.e2e
def test_bench_needs_a_float32_baseline():
    result = run_cli("bench", "--policies", "mixed_bfloat16")
    assert result.returncode == 2
    assert "--policies must include float32" in result.stderr

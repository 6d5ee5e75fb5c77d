"""The bench under Keras 3's JAX backend (the GPU path of benchmarks/gpu/run.sh, run here on CPU
with tiny sizes, through the device script itself), and the largest-batch search."""

from __future__ import annotations

import json

import pytest

from amp_pipeline.benchmarks.speed.bench import batch_ratios, bench_configs, compare
from amp_pipeline.benchmarks.speed.max_batch import jax_memory_env, search


def test_jax_configs_measure_float32_twice_and_always_compile_with_xla():
    configs = bench_configs(["mlp"], ["float32", "mixed_float16"], [False], 8, 32, 2, backend="jax")
    assert [c.key for c in configs] == [
        "jax:mlp/float32/xla=on",
        "jax:mlp/float32@highest/xla=on",
        "jax:mlp/mixed_float16/xla=on",
    ]
    results = [
        {**c.__dict__, "examples_per_sec": eps, "peak_memory_mb": mb, "ran_on": "NVIDIA H200"}
        for c, eps, mb in zip(configs, (100.0, 50.0, 260.0), (10.0, 10.0, 6.0), strict=True)
    ]
    by_baseline = {c["baseline"]: c["speedup"] for c in compare(results)}
    assert by_baseline == {
        "float32 (JAX default: TF32 on tensor cores)": pytest.approx(2.6),
        "float32 (highest: true FP32)": pytest.approx(5.2),
    }


def test_search_doubles_then_bisects_to_the_largest_batch_that_fits():
    seen = []

    def fits(batch):
        seen.append(batch)
        return {"fits": batch <= 700}

    found = search(fits, start=64, limit=8192, budget_s=60)
    assert found.max_batch >= 700 - 700 // 16 and found.max_batch <= 700
    assert found.first_failed > 700 and not found.bounded
    assert seen[:5] == [64, 128, 256, 512, 1024]  # doubling first
    assert len(seen) == len(set(seen))  # each batch tried once


def test_search_edges_start_fails_limit_fits_and_time_runs_out():
    assert search(lambda b: {"fits": False}, 64, 1024, 60).max_batch is None
    assert search(lambda b: {"fits": True}, 64, 1024, 60).max_batch == 1024
    ticks = iter(range(100))
    found = search(lambda b: {"fits": True}, 1, 10**9, budget_s=3, clock=lambda: next(ticks))
    assert found.bounded and found.max_batch is not None  # a lower bound, said so
    with pytest.raises(ValueError):
        search(lambda b: {"fits": True}, 0, 10, 1)


def test_memory_cap_is_a_fraction_of_the_card_and_nothing_on_cpu():
    assert jax_memory_env(16, 140.0) == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.1143"}
    assert jax_memory_env(16, None) == {}
    found = [
        {
            "model": "m",
            "policy": "float32",
            "matmul_precision": "",
            "max_batch": 256,
            "bounded": False,
        },
        {
            "model": "m",
            "policy": "mixed_float16",
            "matmul_precision": "",
            "max_batch": 480,
            "bounded": False,
        },
    ]
    (ratio,) = batch_ratios(found)
    assert ratio["ratio"] == pytest.approx(1.875)


def test_the_tests_install_the_optional_jax_lock_so_the_jax_path_always_runs():
    """`make test` installs requirements-jax.lock (the pipeline's own lock leaves JAX out):
    the JAX path is never skipped here."""
    from amp_pipeline.benchmarks import cli
    from tests.conftest import ROOT

    assert cli._jax_installed()
    assert "jax" not in (ROOT / "requirements.lock").read_text()
    assert "jax==0.4.30" in (ROOT / "requirements-jax.lock").read_text()


@pytest.mark.e2e
def test_the_prepared_gpu_script_runs_its_stages_and_writes_its_files(tmp_path):
    """benchmarks/gpu/run.sh itself, at toy sizes on this CPU (SMOKE=1): the script that is
    run on the lent GPU is tested here, not only the code it calls."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT, clean_env

    env = {**clean_env(), "SMOKE": "1", "PYTHON": sys.executable, "OUT": str(tmp_path)}
    env.pop("KERAS_BACKEND", None)
    result = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu" / "run.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "== done" in result.stdout
    assert "jax" in (tmp_path / "versions.txt").read_text()
    for stage, model in (("resnet50", "mlp"), ("bert", "bert-tiny@8")):  # at toy sizes
        bench = json.loads((tmp_path / stage / "bench.json").read_text())
        rows = {r["key"]: r for r in bench["results"]}
        assert set(rows) == {
            f"jax:{model}/float32/xla=on",
            f"jax:{model}/float32@highest/xla=on",
            f"jax:{model}/mixed_float16/xla=on",
        }
        assert all(r["examples_per_sec"] > 0 and r["versions"]["jax"] for r in rows.values())
        assert {c["baseline"] for c in bench["comparisons"]} == {
            "float32 (JAX default)",
            "float32 (highest: true FP32)",
        }
    searches = json.loads((tmp_path / "resnet50" / "bench.json").read_text())["max_batch"]
    # float32 at `highest` holds float32's buffers: searched once, with float16. On a CPU the
    # measured peak decides; the mlp fits up to the limit.
    assert [s["policy"] for s in searches["searches"]] == ["float32", "mixed_float16"]
    for s in searches["searches"]:
        assert s["max_batch"] == 4 and s["cap"].startswith("none (CPU)")
    assert "largest batch" in (tmp_path / "resnet50" / "bench.md").read_text()
    assert os.access(ROOT / "benchmarks" / "gpu" / "run.sh", os.X_OK)

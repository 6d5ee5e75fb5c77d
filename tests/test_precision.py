"""The precision recipe follows the hardware; overrides warn where they are unwise."""

import pytest

from amp_pipeline.components.amp.precision import Hardware, choose_recipe, cpu_flags

AMX_CPU = Hardware("cpu", "Xeon with AMX", features=("amx_bf16", "avx512_bf16", "avx512f"))
AVX2_CPU = Hardware("cpu", "AMD EPYC (AVX2 only)", features=())


def gpu(cc):
    return Hardware("gpu", f"NVIDIA test GPU sm_{cc[0]}{cc[1]}", compute_capability=cc)


@pytest.mark.parametrize("cc", [(7, 0), (8, 0), (9, 0)])
def test_tensor_core_gpus_get_float16_with_loss_scaling_and_xla(cc):
    recipe = choose_recipe(gpu(cc))
    assert (recipe.policy, recipe.loss_scaling, recipe.xla) == ("mixed_float16", True, True)
    assert "compute capability" in recipe.reason
    assert not recipe.warnings


def test_pre_volta_gpu_stays_float32():
    recipe = choose_recipe(gpu((6, 1)))
    assert (recipe.policy, recipe.loss_scaling) == ("float32", False)
    assert "6.1 < 7.0" in recipe.reason


def test_bf16_cpu_gets_bfloat16_without_xla_or_loss_scaling():
    recipe = choose_recipe(AMX_CPU)
    assert (recipe.policy, recipe.loss_scaling, recipe.xla) == ("mixed_bfloat16", False, False)
    assert "amx_bf16" in recipe.reason


def test_cpu_without_bf16_stays_float32():
    recipe = choose_recipe(AVX2_CPU)
    assert recipe.policy == "float32"
    assert not recipe.is_mixed
    assert "neither AMX-BF16 nor AVX-512 BF16" in recipe.reason


def test_tpu_gets_bfloat16():
    assert choose_recipe(Hardware("tpu", "TPU")).policy == "mixed_bfloat16"


def test_float16_on_cpu_warns_loudly_but_runs():
    recipe = choose_recipe(AMX_CPU, policy="mixed_float16")
    assert recipe.policy == "mixed_float16"
    assert recipe.loss_scaling
    assert any("emulated" in w and "minutes per step" in w for w in recipe.warnings)
    assert "auto would pick mixed_bfloat16" in recipe.reason


def test_bfloat16_forced_on_a_cpu_without_bf16_warns():
    recipe = choose_recipe(AVX2_CPU, policy="mixed_bfloat16")
    assert recipe.policy == "mixed_bfloat16"
    assert any("without AMX-BF16" in w for w in recipe.warnings)


def test_xla_override():
    assert choose_recipe(gpu((8, 0)), xla="off").xla is False
    recipe = choose_recipe(AMX_CPU, xla="on")
    assert recipe.xla is True
    assert any("XLA" in w for w in recipe.warnings)


def test_unknown_policy_is_rejected_with_what_was_received():
    with pytest.raises(ValueError, match=r"policy.*Received: policy='fp8'"):
        choose_recipe(AVX2_CPU, policy="fp8")


def test_cpu_flags_parsed_from_cpuinfo():
    info = "processor : 0\nflags\t\t: fpu avx2 amx_bf16 avx512_bf16\nmodel name : X\n"
    assert {"amx_bf16", "avx512_bf16", "avx2"} <= cpu_flags(info)


def test_an_amp_trainer_running_float32_never_claims_xla():
    """--policy float32 --xla on: the AMP trainer runs the float32 twin's program, without XLA,
    and the recipe (which the summary, MLflow and the warnings read) says so."""
    cpu = Hardware("cpu", "AMD EPYC", features=("avx512_bf16",))
    recipe = choose_recipe(cpu, "float32", "on")
    assert recipe.policy == "float32" and recipe.xla is False and recipe.loss_scaling is False
    assert any(
        "--xla on applies to the AMP trainer's reduced precision" in w for w in recipe.warnings
    )
    assert not any("XLA on a CPU" in w for w in recipe.warnings)

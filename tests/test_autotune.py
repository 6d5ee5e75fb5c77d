"""Autotune's decisions on crafted measurements: candidates, dropping, parity, cache, choice."""

import pytest

from amp_pipeline.components.training import autotune
from amp_pipeline.components.training.autotune import Candidate


def test_candidates_cover_policy_xla_batch_and_threads_within_memory():
    cands = autotune.candidates(["mixed_bfloat16"], 64, 1e-3, max_batch=200, threads=[1, 2])
    keys = {c.key for c in cands}
    # float32 and bfloat16; without XLA at x1 and x2 (x4 = 256 does not fit), with XLA at x1;
    # two thread counts
    assert len(cands) == 2 * (2 + 1) * 2
    assert "mixed_bfloat16/xla=off/batch=128/threads=2" in keys
    assert "mixed_bfloat16/xla=on/batch=64/threads=1" in keys
    assert not any(c.xla and c.batch_size != 64 for c in cands)
    assert not any(c.batch_size == 256 for c in cands)
    assert {c.learning_rate for c in cands if c.batch_size == 128} == {2e-3}  # linear scaling
    assert cands[0].policy == "float32"


@pytest.mark.parametrize(
    ("device", "cc", "features", "want"),
    [
        ("cpu", None, ("avx512_bf16",), ["mixed_bfloat16"]),
        ("cpu", None, ("avx2",), []),
        ("gpu", (7, 0), (), ["mixed_float16"]),
        ("gpu", (8, 0), (), ["mixed_float16", "mixed_bfloat16"]),
        ("gpu", (6, 1), (), []),
    ],
)
def test_only_the_reduced_precisions_the_hardware_computes(device, cc, features, want):
    assert autotune.reduced_precisions(device, cc, features) == want


def test_clearly_slower_candidates_are_dropped_early():
    dropped = autotune.survivors({"fast": [900, 1000], "ok": [400, 420], "xla": [250, 300]})
    assert set(dropped) == {"xla"}
    assert "under a third of the best (950)" in dropped["xla"]
    assert autotune.survivors({}) == {}


def test_parity_filter_on_loss_curves():
    reference = [2.3, 2.0, 1.8, 1.6, 1.5, 1.4]
    ok, reason = autotune.parity_ok([2.3, 2.01, 1.79, 1.62, 1.49, 1.41], reference)
    assert ok and reason.startswith("loss within")
    ok, reason = autotune.parity_ok([2.3, 2.2, 2.2, 2.2, 2.2, 2.2], reference)
    assert not ok and "apart, tolerance 15%" in reason
    ok, reason = autotune.parity_ok([2.3, float("nan"), 1.0, 1.0, 1.0, 1.0], reference)
    assert not ok and reason == "non-finite loss during the parity probe"


def test_cache_key_changes_with_hardware_model_input_and_batch():
    base = autotune.cache_key({"device": "cpu", "name": "EPYC"}, "cnn", 64, 64)
    assert base == autotune.cache_key({"name": "EPYC", "device": "cpu"}, "cnn", 64, 64)
    for changed in (
        autotune.cache_key({"device": "gpu", "name": "EPYC"}, "cnn", 64, 64),
        autotune.cache_key({"device": "cpu", "name": "EPYC"}, "mlp", 64, 64),
        autotune.cache_key({"device": "cpu", "name": "EPYC"}, "cnn", 80, 64),
        autotune.cache_key({"device": "cpu", "name": "EPYC"}, "cnn", 64, 128),
    ):
        assert changed != base


def _result(c: Candidate, median, dropped=None):
    return {"candidate": c.to_dict(), "median": median, "rates": [median], "dropped": dropped}


def test_the_fastest_candidate_that_kept_parity_wins():
    f32 = Candidate("float32", False, 64, 1e-3)
    bf16 = Candidate("mixed_bfloat16", False, 128, 2e-3)
    bf16_xla = Candidate("mixed_bfloat16", True, 64, 1e-3)
    results = {
        f32.key: _result(f32, 3000),
        bf16.key: _result(bf16, 5000),
        bf16_xla.key: _result(bf16_xla, 900, dropped="slow"),
    }
    parity = {("mixed_bfloat16", False): (True, "ok"), ("mixed_bfloat16", True): (True, "ok")}
    winner = autotune.choose(results, parity)
    assert (
        winner["key"] == bf16.key and winner["reason"] == "fastest of 2 candidates that kept parity"
    )


def test_float32_wins_and_says_why_when_every_reduced_candidate_fails_parity():
    f32 = Candidate("float32", False, 64, 1e-3)
    bf16 = Candidate("mixed_bfloat16", False, 64, 1e-3)
    results = {f32.key: _result(f32, 3000), bf16.key: _result(bf16, 6000)}
    parity = {("mixed_bfloat16", False): (False, "loss 2.1 vs float32's 1.2 (75% apart)")}
    winner = autotune.choose(results, parity)
    assert winner["candidate"]["policy"] == "float32"
    assert winner["reason"].startswith("float32: every reduced-precision candidate failed parity")
    assert "75% apart" in winner["reason"]


def test_nothing_measured_is_reported_not_guessed():
    f32 = Candidate("float32", False, 64, 1e-3)
    with pytest.raises(autotune.NoMeasurement):
        autotune.choose({f32.key: _result(f32, None, dropped="not measured")}, {})


def test_the_winner_keeps_the_examples_seen_by_scaling_steps_with_the_batch():
    from amp_pipeline.components.training.options import TrainSpec

    spec = TrainSpec(
        train_files=(),
        eval_files=(),
        transform_output="",
        serving_model_dir="",
        model_run_dir="",
        data_spec={},
        batch_size=64,
        learning_rate=1e-3,
        train_steps=300,
    )
    c = Candidate("mixed_bfloat16", False, 256, 4e-3, threads=1)
    tuned = autotune.apply(spec, {"candidate": c.to_dict()})
    assert (tuned.policy, tuned.batch_size, tuned.learning_rate, tuned.train_steps) == (
        "mixed_bfloat16",
        256,
        4e-3,
        75,
    )
    assert tuned.intra_op_threads == 1
    assert "4x fewer steps" in autotune.scaling_note(spec, {"candidate": c.to_dict()})


def test_a_failed_cache_write_leaves_the_cache_as_it_was(tmp_path, monkeypatch):
    import json
    from pathlib import Path

    cache = tmp_path / "autotune_cache.json"
    autotune.write_cache(cache, "a", {"winner": {"key": "one"}, "cached": True})
    before = cache.read_text()
    real = Path.write_text

    def half_then_fail(self, text, *args, **kwargs):
        real(self, text[: len(text) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_fail)
    with pytest.raises(OSError):
        autotune.write_cache(cache, "b", {"winner": {"key": "two"}})
    monkeypatch.undo()
    assert cache.read_text() == before  # a reader sees the old cache whole, never half
    assert json.loads(before) == {"a": {"winner": {"key": "one"}}}
    assert [p.name for p in tmp_path.iterdir()] == [cache.name]  # no staging file left


def test_a_crashed_probe_is_reported_as_a_crash_not_as_the_budget():
    from amp_pipeline.components.amp.precision import Hardware

    class Spec:
        batch_size, learning_rate = 64, 1e-3

    hardware = Hardware(device="cpu", name="test", features=("avx512_bf16",))
    crashed = autotune.fallback(
        Spec, hardware, 60, ["the probe with default threads crashed (exit -6; log: x.log)"]
    )
    assert "crashed (exit -6" in crashed["reason"] and "budget" not in crashed["reason"]
    timed_out = autotune.fallback(Spec, hardware, 60)
    assert (
        "within 60 s" in timed_out["reason"] and "raise --autotune-budget-s" in timed_out["reason"]
    )

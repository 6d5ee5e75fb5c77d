"""examples/own_tfx_pipeline.py: a user's own TFX pipeline (TFX's CsvExampleGen, StatisticsGen,
SchemaGen, ExampleValidator and Transform with the example's module) with amp_pipeline.tfx's
twins, judges and Pusher, and a step conditioned on the gate's `promoted` output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, clean_env

EXAMPLE = ROOT / "examples" / "own_tfx_pipeline.py"


def run_example(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=clean_env(),
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.e2e
def test_the_compiled_kfp_spec_guards_a_step_on_the_gate_output(tmp_path):
    """`python examples/own_tfx_pipeline.py --compile-kfp`, the script as a user runs it."""
    spec_path = tmp_path / "pipeline.json"
    result = run_example("--output", str(tmp_path / "out"), "--compile-kfp", str(spec_path))
    assert result.returncode == 0, result.stderr[-3000:]
    spec = json.loads(spec_path.read_text())
    tasks = spec.get("pipelineSpec", spec)["root"]["dag"]["tasks"]
    assert {"TrainerFp32", "TrainerAmp", "SideBySide", "PromotionGate", "Pusher"} <= set(tasks)
    condition = tasks["PromotionNotice"]["triggerPolicy"]["condition"]
    assert "_PromotionGate.blessing" in condition and "metadata['promoted'] == 1.0" in condition
    # Nothing else waits on the decision: the gate and the push run unconditionally.
    assert "triggerPolicy" not in tasks["Pusher"] and "triggerPolicy" not in tasks["PromotionGate"]
    # The user's own Transform module, not the project's preprocessing; the notice step by its
    # module's name (an image that holds the example can run it), not __main__'s.
    executors = json.dumps(spec.get("pipelineSpec", spec).get("deploymentSpec", {}))
    assert "own_tfx_pipeline" in executors and "__main__" not in executors


@pytest.mark.e2e
def test_the_users_pipeline_trains_the_twins_gates_and_pushes(tmp_path, monkeypatch, capsys):
    """The example's main() in this process: LocalDagRunner in process as in the script (the
    trainers still run in their own processes)."""
    import importlib

    monkeypatch.syspath_prepend(str(EXAMPLE.parent))
    example = importlib.import_module("own_tfx_pipeline")
    out = tmp_path / "out"
    code = example.main(
        ["--output", str(out), "--train-steps", "20", "--speed-rounds", "0", "--tflite", "none"]
    )
    assert code in (0, 3)
    decision = json.loads((out / "decision.json").read_text())
    promoted = decision["passed"]
    assert code == (0 if promoted else 3)
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(decision["decision"])
    # Both twins learned from the user's Transform output (its class ids line up with the
    # raw labels the gate reads: chance is 0.1).
    figures = {
        p.parts[-4]: json.loads(p.read_text())
        for p in (out / "tfx").glob("Trainer*/model_run/*/figures.json")
    }
    # The AMP twin ran the policy --policy auto resolved to on this CPU (float32 on one with
    # neither AVX-512 BF16 nor AMX), the float32 twin float32.
    assert figures["TrainerFp32"]["policy"] == "float32"
    assert figures["TrainerAmp"]["policy"] == decision["measurements"]["amp_policy"]
    assert all(f["accuracy"] > 0.3 for f in figures.values())
    amp_rules = {r["name"] for r in decision["twins"]["amp"]["rules"]}
    assert amp_rules >= {"accuracy_parity", "min_speedup", "serving_infra"}
    # The step behind the condition ran exactly when the gate promoted, and read its outputs.
    notices = list((out / "tfx" / "PromotionNotice").glob("notice/*/notice.json"))
    versions = list((out / "serving" / "digits").glob("[0-9]*"))
    if promoted:
        (notice,) = (json.loads(p.read_text()) for p in notices)
        assert notice["promoted"] == 1 and notice["shipped_precision"] in ("amp", "float32")
        assert notice["precision_ratio"] > 0 and abs(notice["accuracy_change"]) <= 1
        assert notice["promoted"] == 1
        assert len(versions) == 1 and (versions[0] / "saved_model.pb").is_file()
    else:
        assert notices == [] and versions == []

"""The gate at its defaults, end to end on the embedded digits: `make run` as a user runs it.

Whether a given machine ships AMP, the float32 twin or nothing depends on its hardware
(bfloat16 or float32) and on the training, so this test does not expect one verdict: it checks
that the verdict follows from the evidence the run printed, rule by rule and twin by twin, by
the documented semantics (an estimate beyond
its threshold rejects; within it, an interval that does not clear it is "not proven" and
promotes; the speed rule compares the median with --min-speedup)."""

import json

import pytest

from amp_pipeline.components.gate.rules import GateConfig
from amp_pipeline.pipeline.summary import contract_violations
from tests.conftest import run_cli

pytestmark = pytest.mark.e2e
EPS = 1e-9
DEFAULTS = GateConfig()


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("defaults") / "out"
    result = run_cli("run", "--output", str(out))
    return out, result


def expected_outcome(rule: dict) -> str:
    """The outcome the documented semantics give this rule's own printed evidence."""
    if rule["skipped"]:
        return "skipped"
    value, threshold, interval = rule["value"], rule["threshold"], rule.get("interval")
    name = rule["name"]
    if name == "beats_majority":
        return "pass" if value > threshold + EPS else "fail"
    if name == "serving_infra":
        return "pass" if rule["passed"] else "fail"
    if name in ("min_accuracy", "min_speedup"):
        return "pass" if value >= threshold - EPS else "fail"
    # Evidence rules: accuracy_parity, production_regression, tflite_* (all "at least").
    if value < threshold - EPS:
        return "fail"
    if interval is None or interval[0] >= threshold - EPS:
        return "pass"
    return "unproven"


def test_the_decision_follows_from_the_printed_evidence(default_run):
    out, result = default_run
    assert result.returncode in (0, 3), result.stdout + result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    assert contract_violations(summary) == []  # docs/ARCHITECTURE.md, "run_summary.json"
    decision = json.loads((out / "decision.json").read_text())
    assert decision["thresholds"]["accuracy_tolerance"] == DEFAULTS.accuracy_tolerance
    assert decision["thresholds"]["min_speedup"] == DEFAULTS.min_speedup
    assert decision["thresholds"]["strict"] is False
    assert decision["thresholds"]["require_amp"] is False
    marks = {"skipped": "skip", "pass": "pass", "fail": "FAIL", "unproven": "unproven"}
    failed = {}
    for twin in ("amp", "float32"):
        record = decision["twins"][twin]
        for rule in record["rules"]:
            want = expected_outcome(rule)
            assert rule["outcome"] == want, rule
            assert rule["passed"] is (want != "fail"), rule
        failed[twin] = [r["name"] for r in record["rules"] if r["outcome"] == "fail"]
        assert record["failed"] == failed[twin]
    # The AMP twin ships when it passes every rule, else the float32 twin when it passes its
    # own, else none (components/gate/twins.py).
    shipped = "amp" if not failed["amp"] else ("float32" if not failed["float32"] else "none")
    assert decision["shipped_precision"] == summary["shipped_precision"] == shipped
    rules = decision["rules"]
    assert rules == decision["twins"]["float32" if shipped == "float32" else "amp"]["rules"]
    # The table shows the same outcome and evidence, rule by rule.
    shown = decision["twins"]["amp"]["rules"] + (rules if shipped != "amp" else [])
    for rule in shown:
        mark = marks[rule["outcome"]]
        assert f"    {mark:<8} {rule['name']:<22} {rule['detail']}" in result.stdout
    status = "rejected" if shipped == "none" else "promoted"
    assert summary["status"] == decision["decision"] == status
    assert result.returncode == (3 if shipped == "none" else 0)
    assert summary["exit_code"] == result.returncode
    md = (out / "decision.md").read_text()
    assert md.startswith(f"# Promotion gate: {status.upper()}")
    assert "How it decides: an estimate beyond its threshold rejects" in md
    assert "| rule | AMP twin" in md and "float32 twin |" in md
    if shipped == "float32":
        assert "gate         PROMOTED float32 twin: " in result.stdout
    # The speed record: both ratios, labelled with what they were measured at.
    record = summary["speed_record"]
    assert summary["speedup_kind"] == record["gate_uses"]
    assert "recipe ratio" in result.stdout and "memory ratio" in result.stdout
    assert "precision ratio" in result.stdout and "precision ratio" in md
    if record["gate_uses"] == "precision":
        speed = next(r for r in decision["twins"]["amp"]["rules"] if r["name"] == "min_speedup")
        assert speed["value"] == pytest.approx(record["precision"]["ratio"])
        assert speed["detail"].startswith("precision ratio (")
        batch = record["precision"]["at"]["batch_size"]
        assert f"both at batch {batch}, xla " in result.stdout
    # What was pushed is what the decision says.
    assert (summary["exports"]["saved_model"] is not None) is (status == "promoted")


def test_parity_intervals_are_never_zero_width(default_run):
    out, _ = default_run
    decision = json.loads((out / "decision.json").read_text())
    parity = next(r for r in decision["twins"]["amp"]["rules"] if r["name"] == "accuracy_parity")
    lo, hi = parity["interval"]
    assert lo <= parity["value"] <= hi
    # A few hundred eval examples cannot pin a difference to within half a point.
    assert hi - lo > 0.005 and parity["n"] < 1000

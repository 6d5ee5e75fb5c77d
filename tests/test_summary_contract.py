"""run_summary.json's contract: written once in code, listed in docs/ARCHITECTURE.md, checked."""

import re
from pathlib import Path

from amp_pipeline.pipeline.summary import CONTRACT, contract_keys, contract_violations

ROOT = Path(__file__).resolve().parent.parent


def test_the_architecture_document_lists_exactly_the_contract():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## run_summary.json", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^- `([^`]+)`: ", section, re.M)
    assert documented == contract_keys()


def test_the_contract_check_names_what_is_missing_or_of_another_type():
    summary = {
        "status": "promoted",
        "exit_code": "0",  # a string
        "xla": 1,  # not a boolean
        "gate": {"passed": True, "failed": [], "rules": [{"name": "min_speedup", "value": True}]},
    }
    problems = contract_violations(summary)
    assert "exit_code: str, not int" in problems
    assert "xla: int, not bool" in problems
    assert "policy: missing" in problems
    assert "gate.rules[0].value: bool, not int or float or NoneType" in problems
    assert "gate.rules[0].threshold: missing" in problems
    assert "speed_record.precision: missing" not in problems  # only the top-level miss is named
    assert "speed_record: missing" in problems
    assert set(CONTRACT) >= {"status", "exit_code", "hardware", "fp32", "amp", "gate", "exports"}

"""The production comparison when the label's classes change between runs in one output folder:
the models are matched by class name, the change is named, and the comparison is on the
classes both models know (never on renumbered ids)."""

import json

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.helpers import CHEAP, LOOSE_GATE, write_csv

pytestmark = pytest.mark.e2e


def rows(classes: tuple[str, ...], n: int = 360) -> list[dict[str, str]]:
    """Three well-separated clusters of two features, labelled by name."""
    rng = np.random.default_rng(0)
    centres = {"ant": (-3.0, 0.0), "bee": (0.0, 3.0), "cat": (3.0, 0.0)}
    out = []
    for i in range(n):
        name = list(centres)[i % 3]
        if name not in classes:
            continue
        x, y = rng.normal(centres[name], 0.6)
        out.append({"x": f"{x:.3f}", "y": f"{y:.3f}", "kind": name})
    return out


def decision_n(summary: dict) -> int:
    """The eval examples of the second run (all of them: both models know ant and cat)."""
    return next(
        r for r in summary["gate"]["twins"]["amp"]["rules"] if r["name"] == "accuracy_parity"
    )["n"]


def test_a_dropped_class_is_named_by_the_production_rule(tmp_path):
    out = tmp_path / "out"
    args = ("--label", "kind", "--output", str(out), "--train-steps", "150", "--model-name",
            "kinds", *LOOSE_GATE, *CHEAP)  # fmt: skip
    first = run_cli(
        "run", "--data", str(write_csv(tmp_path / "v1.csv", rows(("ant", "bee", "cat")))), *args
    )
    assert first.returncode == 0, first.stdout + first.stderr
    # 'bee' is gone from the second table: the candidate numbers 'cat' 1, production numbered
    # it 2. By id, production would look wrong on every 'cat'; by name it is compared fairly.
    second = run_cli(
        "run", "--data", str(write_csv(tmp_path / "v2.csv", rows(("ant", "cat")))), *args
    )
    assert second.returncode in (0, 3), second.stdout + second.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    for twin in ("amp", "float32"):
        (rule,) = [
            r
            for r in summary["gate"]["twins"][twin]["rules"]
            if r["name"] == "production_regression"
        ]
        assert rule["detail"].startswith("classes changed since production: dropped 'bee'")
        assert "of the classes both models know (0 left out)" in rule["detail"]
        # Both models know ant and cat and separate them: no regression is read into ids.
        assert rule["outcome"] != "fail", rule
        assert rule["n"] == decision_n(summary), rule
    decision = json.loads((out / "decision.json").read_text())
    assert decision["production_classes"]["dropped"] == ["bee"]
    assert decision["tfma_failures"]["production"] == []

"""Two runs in one output folder, the second on a table whose label lost a class and with an AMP
twin trained for 3 steps: the production comparison matches the models by class name, names the
change and compares on the classes both know (never on renumbered ids), and the degraded AMP
twin's float32 twin ships in its place."""

import json

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.helpers import CHEAP, LOOSE_GATE, csv_rows, predict_classes, pushed_versions, write_csv
from tests.test_cli import tree_digest

pytestmark = pytest.mark.e2e


def rows(classes: tuple[str, ...], n: int = 300) -> list[dict[str, str]]:
    """Three well-separated clusters of two features, labelled by name."""
    rng = np.random.default_rng(0)
    centres = {"ant": (-3.0, 0.0), "bee": (0.0, 3.0), "cat": (3.0, 0.0)}
    out = []
    for i in range(n):
        name = list(centres)[i % 3]
        x, y = rng.normal(centres[name], 0.6)
        if name in classes:
            out.append({"x": f"{x:.3f}", "y": f"{y:.3f}", "kind": name})
    return out


def test_a_dropped_class_and_a_degraded_amp_twin(tmp_path):
    out = tmp_path / "out"
    common = ("--label", "kind", "--output", str(out), "--train-steps", "100",
              "--model-name", "kinds", *LOOSE_GATE)  # fmt: skip
    v1 = write_csv(tmp_path / "v1.csv", rows(("ant", "bee", "cat")))
    first = run_cli("run", "--data", str(v1), *common, *CHEAP)
    assert first.returncode == 0, first.stdout + first.stderr
    serving = out / "serving" / "kinds"
    (old_version,) = pushed_versions(serving)
    old_digest = tree_digest(serving / old_version)
    # 'bee' is gone: this run numbers 'cat' 1, production numbered it 2. By id, production
    # would look wrong on every 'cat'. And the AMP twin trains 3 steps only.
    v2 = write_csv(tmp_path / "v2.csv", rows(("ant", "cat")))
    second = run_cli(
        "run", "--data", str(v2), *common, "--amp-train-steps", "3",
        "--tflite", "float32", "--speed-rounds", "0",
    )  # fmt: skip
    assert second.returncode == 0, second.stdout + second.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    decision = json.loads((out / "decision.json").read_text())
    for twin in ("amp", "float32"):
        (rule,) = [
            r
            for r in summary["gate"]["twins"][twin]["rules"]
            if r["name"] == "production_regression"
        ]
        assert rule["detail"].startswith("classes changed since production: dropped 'bee'")
        assert "of the classes both models know (0 left out)" in rule["detail"]
        assert rule["n"] == decision["production_classes"]["compared"] > 0
    assert decision["production_classes"]["dropped"] == ["bee"]
    assert decision["tfma_failures"]["production"] == []  # TFMA compares ids: not shown
    # Both models know ant and cat: the float32 twin is compared fairly and is no worse, so it
    # ships in place of the degraded AMP twin.
    assert "gate         PROMOTED float32 twin: AMP lost accuracy (-" in second.stdout
    assert summary["status"] == "promoted" and summary["shipped_precision"] == "float32"
    assert "accuracy_parity" in summary["gate"]["twins"]["amp"]["failed"]
    assert summary["gate"]["failed"] == []
    # Pushed: the float32 twin's SavedModel, with its own TFLite model; the version pushed
    # before is untouched.
    versions = pushed_versions(serving)
    assert versions[0] == old_version and len(versions) == 2
    assert tree_digest(serving / old_version) == old_digest
    pushed = serving / versions[-1]
    assert summary["exports"]["saved_model"] == str(pushed)
    trained = (out / "tfx" / "TrainerFp32" / "model").glob("*/Format-Serving")
    newest = max(trained, key=lambda p: int(p.parent.name))  # this run's float32 twin
    assert tree_digest(pushed) == tree_digest(newest)
    assert (pushed / "tflite" / "model_float32.tflite").is_file()
    assert (pushed / "classes.txt").read_text() == "ant\ncat\n"
    table = csv_rows(v2)
    answers = predict_classes(pushed, table, "kind")
    assert np.mean(answers == np.array([r["kind"] for r in table])) > 0.9
    # MLflow: the registered version is the float32 twin, tagged so, and the champion.
    from mlflow import MlflowClient

    client = MlflowClient(summary["mlflow"]["tracking_uri"])
    reg = summary["mlflow"]["registered_model"]
    version = client.get_model_version(reg["name"], str(reg["version"]))
    assert version.tags["twin"] == "float32" and version.tags["precision"] == "float32"
    assert client.get_model_version_by_alias(reg["name"], "champion").version == version.version
    md = (out / "decision.md").read_text()
    assert "## float32 twin" in md and "| **decision** | fails | passes |" in md

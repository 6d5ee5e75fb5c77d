"""The dependency rule of docs/ARCHITECTURE.md: no package imports one above it.

    core  <  serving  <  components  <  pipeline  <  kubeflow, benchmarks

`pipeline/cli.py` is the one deliberate exception: it assembles every package's commands.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"core": 0, "serving": 1, "components": 2, "pipeline": 3, "kubeflow": 4, "benchmarks": 4}
EXCEPTIONS = {Path("pipeline/cli.py")}


def project_imports(path: Path) -> set[tuple[str, int]]:
    """(imported top-level project package, line) of every import in `path`, lazy ones too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in LAYERS:
                found.add((top, node.lineno))
    return found


def violations(root: Path = ROOT) -> list[str]:
    out = []
    for package, layer in LAYERS.items():
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel in EXCEPTIONS:
                continue
            for imported, line in sorted(project_imports(path)):
                if imported != package and LAYERS[imported] >= layer:
                    out.append(f"{rel}:{line} imports {imported} (layer {LAYERS[imported]})")
    return out


def test_no_package_imports_one_above_it():
    assert violations() == []


def test_the_rule_catches_upward_and_sideways_imports(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "probe.py").write_text("from pipeline.config import RunConfig\n")
    (tmp_path / "kubeflow").mkdir()
    (tmp_path / "kubeflow" / "probe.py").write_text(
        "def f():\n    import benchmarks.bench\n    from core import names\n"
    )
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "cli.py").write_text("import kubeflow.cli\n")  # the exception
    assert violations(tmp_path) == [
        "core/probe.py:1 imports pipeline (layer 3)",
        "kubeflow/probe.py:2 imports benchmarks (layer 4)",
    ]


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_package_is_in_the_table(package):
    assert (ROOT / package / "__init__.py").exists()

"""The dependency rule of docs/ARCHITECTURE.md: no package imports one above it.

    core  <  serving  <  components  <  pipeline  <  kubeflow, benchmarks

and inside them, data flows down and reports flow up:

    components:  models  <  data  <  amp, export  <  training  <  gate
    pipeline:    the run  <  cli

`pipeline/cli/__init__.py` is the one deliberate exception: it assembles every package's commands.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"core": 0, "serving": 1, "components": 2, "pipeline": 3, "kubeflow": 4, "benchmarks": 4}
EXCEPTIONS = {Path("pipeline/cli/__init__.py")}
# Sub-packages and their layer inside their package ("": the package's own top-level modules).
SUBLAYERS = {
    "components": {"models": 0, "data": 1, "amp": 2, "export": 2, "training": 3, "gate": 4},
    "pipeline": {"": 0, "cli": 1},
}


def project_imports(path: Path) -> set[tuple[str, int]]:
    """(imported project module, line) of every import in `path`, lazy ones too; `from a import
    b` counts as importing `a.b` (b may be a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in LAYERS:
                found.add((name, node.lineno))
    return found


def sublayer(package: str, parts: tuple[str, ...]) -> tuple[str, int] | None:
    """(sub-package, its layer) of a module path inside `package`, or None where the package
    has no sub-layers or the name is not one of its modules."""
    table = SUBLAYERS.get(package)
    if table is None:
        return None
    if parts and parts[0] in table:
        return parts[0], table[parts[0]]
    return ("", table[""]) if "" in table else None


def violations(root: Path = ROOT) -> list[str]:
    out = []
    for package, layer in LAYERS.items():
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel in EXCEPTIONS:
                continue
            own = sublayer(package, rel.parts[1:-1] or ("",))
            for name, line in sorted(project_imports(path)):
                imported, *rest = name.split(".")
                if imported != package:
                    if LAYERS[imported] >= layer:
                        out.append(f"{rel}:{line} imports {imported} (layer {LAYERS[imported]})")
                    continue
                theirs = sublayer(package, tuple(rest[:1]) if rest else ("",))
                if own and theirs and theirs[0] != own[0] and theirs[1] >= own[1]:
                    out.append(
                        f"{rel}:{line} imports {package}.{theirs[0] or '<top>'} "
                        f"(inside {package}: layer {theirs[1]} >= {own[1]})"
                    )
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
    (tmp_path / "pipeline" / "cli").mkdir(parents=True)
    (tmp_path / "pipeline" / "cli" / "__init__.py").write_text("import kubeflow.cli\n")  # exception
    assert violations(tmp_path) == [
        "core/probe.py:1 imports pipeline (layer 3)",
        "kubeflow/probe.py:2 imports benchmarks (layer 4)",
    ]


def test_the_rule_catches_imports_against_the_flow_inside_components_and_pipeline(tmp_path):
    for folder, text in {
        "components/data": "from components.training import job\n",  # data imports training
        "components/gate": "from components.data import ingest\nfrom core import names\n",
        "components/amp": "from components.export import tflite\n",  # side by side: same layer
        "pipeline": "from pipeline.cli import flags\n",  # the run imports the CLI
        "pipeline/cli": "from pipeline import summary\n",
    }.items():
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "probe.py").write_text(text)
    assert violations(tmp_path) == [
        "components/amp/probe.py:1 imports components.export (inside components: layer 2 >= 2)",
        "components/data/probe.py:1 imports components.training (inside components: layer 3 >= 1)",
        "pipeline/probe.py:1 imports pipeline.cli (inside pipeline: layer 1 >= 0)",
    ]


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_package_is_in_the_table(package):
    assert (ROOT / package / "__init__.py").exists()

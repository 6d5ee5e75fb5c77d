"""The dependency rule of docs/ARCHITECTURE.md: no package imports one above it.

    core  <  serving  <  components  <  pipeline  <  kubeflow, benchmarks

and inside them, data flows down and reports flow up:

    components:  models  <  data  <  amp, export  <  training  <  speed  <  gate
    pipeline:    tracking  <  the run  <  monitor  <  cli

Above them all sits the composition root, `amp_pipeline/cli.py`: it assembles every package's
commands, and no package imports it. Every import of the project goes through its one namespace,
`amp_pipeline`; a bare `import core` would find whatever else is installed under that name.

The layout's size limits are here too: no package folder holds more than 15 modules, and no
module more than 500 lines.
"""

import ast
from pathlib import Path

import pytest

NAMESPACE = "amp_pipeline"
ROOT = Path(__file__).resolve().parent.parent / NAMESPACE
LAYERS = {"core": 0, "serving": 1, "components": 2, "pipeline": 3, "kubeflow": 4, "benchmarks": 4}
# The modules at the namespace's top: the composition root above every package, and the library
# API for TFX pipelines of one's own (pipeline's layer: it hands out the pipeline's halves).
TOP_MODULES = {"__main__": 6, "cli_docs": 6, "cli": 5, "tfx": 3.5}
# Sub-packages and their layer inside their package ("": the package's own top-level modules).
SUBLAYERS = {
    "components": {
        "models": 0,
        "data": 1,
        "amp": 2,
        "export": 2,
        "training": 3,
        "speed": 4,
        "gate": 5,
    },
    "pipeline": {"tracking": 0, "": 1, "monitor": 2, "cli": 3},
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
            first, _, rest = name.partition(".")
            if first == NAMESPACE and rest.split(".")[0] in LAYERS | TOP_MODULES:
                found.add((rest, node.lineno))
            elif first in LAYERS:  # the folder's name, outside the namespace
                found.add((f"bare:{name}", node.lineno))
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
    for name, layer in TOP_MODULES.items():
        path = root / f"{name}.py"
        for imported, line in sorted(project_imports(path) if path.is_file() else ()):
            top = imported.split(".")[0]
            if not top.startswith("bare:") and {**LAYERS, **TOP_MODULES}[top] >= layer:
                out.append(f"{name}.py:{line} imports {top}")
    for package, layer in LAYERS.items():
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            own = sublayer(package, rel.parts[1:-1] or ("",))
            for name, line in sorted(project_imports(path)):
                if name.startswith("bare:"):
                    bare = name.removeprefix("bare:").split(".")[0]
                    out.append(f"{rel}:{line} imports {bare} outside the {NAMESPACE} namespace")
                    continue
                imported, *rest = name.split(".")
                if imported in TOP_MODULES:
                    out.append(f"{rel}:{line} imports the top module {imported}")
                    continue
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
    (tmp_path / "core" / "probe.py").write_text(
        "from amp_pipeline.pipeline.config import RunConfig\n"
    )
    (tmp_path / "kubeflow").mkdir()
    (tmp_path / "kubeflow" / "probe.py").write_text(
        "def f():\n"
        "    import amp_pipeline.benchmarks.speed.bench\n"
        "    from amp_pipeline.core import names\n"
    )
    (tmp_path / "pipeline" / "cli").mkdir(parents=True)
    (tmp_path / "pipeline" / "cli" / "__init__.py").write_text("import amp_pipeline.kubeflow.cli\n")
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "probe.py").write_text("from amp_pipeline.cli import main\n")
    (tmp_path / "cli.py").write_text("from amp_pipeline.kubeflow import cli\n")  # the root: fine
    (tmp_path / "tfx.py").write_text("from amp_pipeline.kubeflow import runner\n")
    assert violations(tmp_path) == [
        "tfx.py:1 imports kubeflow",
        "core/probe.py:1 imports pipeline (layer 3)",
        "serving/probe.py:1 imports the top module cli",
        "pipeline/cli/__init__.py:1 imports kubeflow (layer 4)",
        "kubeflow/probe.py:2 imports benchmarks (layer 4)",
    ]


def test_the_rule_catches_imports_outside_the_namespace(tmp_path):
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "probe.py").write_text("from core import names\nimport serving.rest\n")
    assert violations(tmp_path) == [
        "serving/probe.py:1 imports core outside the amp_pipeline namespace",
        "serving/probe.py:2 imports serving outside the amp_pipeline namespace",
    ]


def test_the_rule_catches_imports_against_the_flow_inside_components_and_pipeline(tmp_path):
    ns = "amp_pipeline"
    for folder, text in {
        "components/data": f"from {ns}.components.training import job\n",  # data imports training
        "components/gate": f"from {ns}.components.data import ingest\nimport {ns}.core.names\n",
        "components/amp": f"from {ns}.components.export import tflite\n",  # side by side
        "pipeline": f"from {ns}.pipeline.cli import flags\n",  # the run imports the CLI
        "pipeline/cli": f"from {ns}.pipeline import summary\n",
    }.items():
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "probe.py").write_text(text)
    assert violations(tmp_path) == [
        "components/amp/probe.py:1 imports components.export (inside components: layer 2 >= 2)",
        "components/data/probe.py:1 imports components.training (inside components: layer 3 >= 1)",
        "pipeline/probe.py:1 imports pipeline.cli (inside pipeline: layer 3 >= 1)",
    ]


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_package_is_in_the_table(package):
    assert (ROOT / package / "__init__.py").exists()


MAX_MODULES_PER_FOLDER = 15
MAX_LINES_PER_MODULE = 500


def package_folders(root: Path = ROOT) -> list[Path]:
    """Every folder the wheel installs (tests/ and examples/ are not shipped)."""
    return sorted(init.parent for init in root.rglob("__init__.py"))


def test_no_package_folder_holds_more_than_15_modules():
    crowded = {
        str(folder.relative_to(ROOT)): n
        for folder in package_folders()
        if (n := len(list(folder.glob("*.py")))) > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def test_no_module_is_longer_than_500_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for folder in package_folders()
        for path in folder.glob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES_PER_MODULE
    }
    assert long == {}

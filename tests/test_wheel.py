"""The wheel installs one top-level package, `amp_pipeline`. Installed into a fresh virtualenv,
it runs the whole pipeline: tests/test_pipeline_e2e.py's first run, which also checks that no
bare `core`, `pipeline`, ... name is importable there."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomli as tomllib  # Python 3.10: tomllib arrived in 3.11; tomli is in the lock file

from tests.conftest import ROOT
from tests.wheel_env import PACKAGE_FOLDERS, build_wheel, top_level_names


def test_every_code_folder_is_a_package_the_wheel_finds():
    """setuptools' find skips a folder without __init__.py: the wheel would lack it, silently."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["packages"]["find"]["include"] == ["amp_pipeline", "amp_pipeline.*"]
    assert "package-dir" not in config
    code_folders = {
        py.parent for py in (ROOT / "amp_pipeline").rglob("*.py") if "__pycache__" not in py.parts
    }
    assert [f for f in code_folders if not (f / "__init__.py").is_file()] == []


def test_the_root_folders_point_into_the_one_package():
    """The design card's folders stay at the top as symlinks, so no file has two homes."""
    for top in PACKAGE_FOLDERS:
        assert (ROOT / top).is_symlink(), top
        assert (ROOT / top).resolve() == (ROOT / "amp_pipeline" / top).resolve(), top
    assert "__path__" not in (ROOT / "amp_pipeline" / "__init__.py").read_text()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_one_top_level_package_and_the_embedded_data(wheel):
    assert top_level_names(wheel) == {"amp_pipeline", "amp_pipeline-0.1.0.dist-info"}
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    assert "amp_pipeline/components/data/digits.csv.gz" in names
    assert "amp_pipeline/components/gate/rules.py" in names
    assert not any(n.startswith(("tests/", "examples/")) for n in names)

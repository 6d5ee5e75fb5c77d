"""The wheel installs one top-level package, `amp_pipeline`. Installed into a fresh virtualenv,
it runs the whole pipeline: tests/test_pipeline_e2e.py's first run, which also checks that no
bare `core`, `pipeline`, ... name is importable there."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomli as tomllib  # Python 3.10: tomllib arrived in 3.11; tomli is in the lock file

from tests.conftest import ROOT
from tests.wheel_env import PACKAGE_FOLDERS, build_wheel, top_level_names


def test_pyproject_lists_every_package_folder():
    """A folder missing from the list would be left out of the wheel, silently."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {"amp_pipeline"} | {
        "amp_pipeline." + ".".join(init.parent.relative_to(ROOT).parts)
        for top in PACKAGE_FOLDERS
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert set(config["packages"]) == on_disk
    assert config["package-dir"] == {"amp_pipeline": "amp_pipeline"} | {
        f"amp_pipeline.{top}": top for top in PACKAGE_FOLDERS
    }


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

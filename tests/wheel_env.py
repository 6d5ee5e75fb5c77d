"""The project as a user installs it: `pip wheel .`, then that wheel in a fresh virtualenv beside
the locked dependencies (this environment's site-packages, added as a path: its .pth files, the
editable install's among them, are not run)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.conftest import ROOT, clean_env

# The packages under amp_pipeline/ that the repository root points to with a symlink each.
PACKAGE_FOLDERS = (
    "core",
    "pipeline",
    "components",
    "serving",
    "kubeflow",
    "benchmarks",
    "user_models",
)


SOURCES = ("pyproject.toml", "amp_pipeline")


def build_wheel(out: Path) -> Path:
    """`pip wheel .` on a copy of the sources: setuptools builds in the tree, and a build/ folder
    left in the checkout would carry modules since moved or deleted into the next wheel."""
    source = out / "source"
    source.mkdir(parents=True)
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
         "--quiet", "-w", str(out)],
        check=True, capture_output=True, text=True, env=clean_env(),
    )  # fmt: skip
    (wheel,) = out.glob("amp_pipeline-*.whl")
    return wheel


def top_level_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {name.split("/")[0] for name in z.namelist()}


def site_packages(folder: Path) -> Path:
    """The purelib folder of the virtualenv at `folder`."""
    paths = sysconfig.get_paths(vars={"base": str(folder), "platbase": str(folder)})
    return Path(paths["purelib"])


def fresh_venv(wheel: Path, folder: Path) -> Path:
    """A virtualenv at `folder` with `wheel` installed, uncompiled (a module's .pyc then shows
    that something imported it from there); returns its bin/ folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    purelib = site_packages(folder)
    (purelib / "locked_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(folder / "bin" / "python"), "install",
         "--no-deps", "--no-index", "--no-compile", "--quiet", str(wheel)],
        check=True, capture_output=True, text=True, env=clean_env(),
    )  # fmt: skip
    return folder / "bin"

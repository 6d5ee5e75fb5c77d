"""Shared fixtures: tiny inputs built inline with fixed seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent
# The environment as the session started, before any test imported a library that writes to
# os.environ: tensorflow-transform sets TF_USE_LEGACY_KERAS, TF2_BEHAVIOR, KMP_INIT_AT_FORK,
# KMP_DUPLICATE_LIB_OK and more on import, and `mlflow.set_tracking_uri` exports
# MLFLOW_TRACKING_URI. A child process must not depend on which tests ran before it.
SESSION_ENV = dict(os.environ)


def clean_env() -> dict[str, str]:
    """The environment a user's shell would give a command: the session's, as it started."""
    return {k: v for k, v in SESSION_ENV.items() if not k.startswith("MLFLOW_")}


def run_cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Runs `amp-pipeline ARGS` in a fresh process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def cli():
    return run_cli

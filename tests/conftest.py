"""Shared fixtures: tiny inputs built inline with fixed seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent


def clean_env() -> dict[str, str]:
    """The environment without MLflow's URIs: `mlflow.set_tracking_uri` in a test exports
    MLFLOW_TRACKING_URI, which a CLI started afterwards would otherwise inherit."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}


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
    )


@pytest.fixture
def cli():
    return run_cli

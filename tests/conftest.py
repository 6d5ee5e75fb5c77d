"""Shared fixtures: tiny inputs built inline with fixed seeds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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
        [sys.executable, "-m", "amp_pipeline", *args],
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


def _descendants(pid: int) -> dict[int, str]:
    """Live (not zombie) descendant processes of `pid`, with their command lines (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        try:
            found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        todo.extend(children.get(child, []))
    return found


@pytest.fixture(scope="module", autouse=True)
def no_left_over_processes():
    """Every test file stops what it started: a server, a trainer or a probe that outlives its
    file would share the machine's cores and memory with the files that run after it."""
    yield
    if not Path("/proc/self/stat").exists():
        return
    deadline = time.monotonic() + 20
    while (left := _descendants(os.getpid())) and time.monotonic() < deadline:
        time.sleep(0.5)
    if left:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        pytest.fail(f"processes left running after this file: {left}")


# The test files by their seconds in one pytest run of the whole suite (--junitxml, 2-core AMD
# Zen 4, 2026-12-08), longest first. A file not listed runs after these; a stale order only
# schedules worse. `make test` passes --no-loadscope-reorder, or xdist would hand out the files
# with the most tests first and this order would not count.
LONGEST_FIRST = (
    "test_byom_e2e.py",
    "test_pipeline_e2e.py",
    "test_inputs_e2e.py",
    "test_reliability_e2e.py",
    "test_spans_e2e.py",
    "test_data_e2e.py",
    "test_mlflow_e2e.py",
    "test_text_e2e.py",
    "test_regression_e2e.py",
    "test_gate_defaults_e2e.py",
    "test_class_change_e2e.py",
    "test_bench_jax.py",
    "test_edges_e2e.py",
    "test_autotune_e2e.py",
    "test_cli.py",
    "test_distribution_e2e.py",
    "test_example_gen.py",
    "test_own_tfx_pipeline.py",
    "test_kubeflow.py",
    "test_serving_e2e.py",
    "test_bench.py",
    "test_gate_stats.py",
    "test_beam_e2e.py",
    "test_device_graph.py",
    "test_regression.py",
    "test_export.py",
)


def pytest_collection_modifyitems(session, config, items) -> None:
    """The longest files first. `make test` hands whole files to its three workers (`--dist
    loadfile --no-loadscope-reorder`) in collection order; alphabetical order left long e2e
    files for the end, one worker running them while the others idled. Longest first, the
    short files fill the gaps."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))

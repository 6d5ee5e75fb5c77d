"""Children that die with their parent, started without fork handlers that can abort them."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, clean_env

# A parent with gRPC's poller running (as every run's driver has: Beam, TFX, MLflow) starts many
# children through run_module. With a preexec_fn, Python forks and gRPC's fork handlers run in
# the child: since grpcio 1.81 (grpc/grpc#43055) about 2% of such children died of SIGABRT before
# exec (6 of 300 on the AMX Xeon, measured). run_module must start every child, each with
# SIGTERM as its death signal.
MANY_CHILDREN = """
import collections, sys
from pathlib import Path
import grpc
from amp_pipeline.core.child_process import run_module

channel = grpc.insecure_channel("127.0.0.1:1")  # starts gRPC's event engine and its poller
try:
    grpc.channel_ready_future(channel).result(timeout=0.2)
except grpc.FutureTimeoutError:
    pass
log = Path(sys.argv[1])
outcomes = collections.Counter()
for _ in range(int(sys.argv[2])):
    proc = run_module("tests.child_probe", [], log)
    last = (log.read_text().strip().splitlines() or ["(no output)"])[-1]
    outcomes[f"exit {proc.returncode}: {last}"] += 1
print(dict(outcomes))
"""


@pytest.mark.e2e
def test_children_of_a_grpc_process_start_and_get_sigterm_as_death_signal(tmp_path):
    n = 120
    out = subprocess.run(
        [sys.executable, "-c", MANY_CHILDREN, str(tmp_path / "child.log"), str(n)],
        cwd=ROOT,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    # Every child exited 0 and reported SIGTERM (15) as its death signal.
    assert out.stdout.strip().splitlines()[-1] == str({"exit 0: 15": n}), out.stdout[-2000:]


def test_a_child_whose_parent_is_gone_does_not_run(tmp_path):
    """The death signal is set after exec; a parent that died before that is caught too."""
    env = {**clean_env(), "PYTHONPATH": str(ROOT)}
    # Claim a parent that is not ours: the bootstrap sees it is re-parented and exits 143.
    env["AMP_PIPELINE_PARENT_PID"] = str(os.getpid() + 10_000_000)
    out = subprocess.run(
        [sys.executable, "-m", "amp_pipeline.core.child_process", "tests.child_probe"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 143 and out.stdout == ""


def test_run_module_finds_the_project_from_any_folder_and_logs_the_output(tmp_path, monkeypatch):
    """The trainers, autotune's probes and the speed measurement start `python -m` children
    through it: the project must import in the child whatever the working folder."""
    from amp_pipeline.core.child_process import PROJECT_ROOT, run_module

    assert (PROJECT_ROOT / "amp_pipeline" / "__init__.py").is_file()
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "child.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = run_module("amp_pipeline.core.names", [], log, env=env)  # importable, runs nothing
    assert proc.returncode == 0, log.read_text()
    proc = run_module("amp_pipeline.components.gate.no_such_module", [], log, env=env)
    assert (
        proc.returncode != 0
        and "No module named amp_pipeline.components.gate.no_such_module" in (log.read_text())
    )

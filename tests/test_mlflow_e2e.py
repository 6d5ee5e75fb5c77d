"""Pipeline runs tracked on a real `mlflow server` on loopback, read back through MlflowClient."""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from mlflow import MlflowClient

from tests.conftest import ROOT, clean_env, run_cli
from tests.helpers import LOOSE_GATE, check_tracked_run, free_port

pytestmark = pytest.mark.e2e
STEPS = 60


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """`mlflow server` on a free 127.0.0.1 port, SQLite backend, local artifact store."""
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = open(root / "server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            os.path.join(os.path.dirname(sys.executable), "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--workers",
            "2",
        ],
        cwd=root,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"mlflow server did not start: {(root / 'server.log').read_text()}")
        time.sleep(0.5)
    yield uri
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_two_concurrent_runs_land_complete_on_a_real_server(mlflow_server, tmp_path):
    outs = [tmp_path / "a", tmp_path / "b"]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "amp_pipeline.pipeline.cli",
                "run",
                "--output",
                str(out),
                "--train-steps",
                str(STEPS),
                "--tracking-uri",
                mlflow_server,
                "--experiment",
                "concurrent",
                *LOOSE_GATE,
                # One TFLite variant still goes to the server's artifact store.
                "--tflite",
                "float32",
                "--speed-rounds",
                "0",
            ],
            cwd=ROOT,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    results = [p.communicate(timeout=900) for p in procs]
    for p, (stdout, stderr) in zip(procs, results, strict=True):
        assert p.returncode == 0, stdout + stderr
    summaries = [json.loads((out / "run_summary.json").read_text()) for out in outs]
    assert summaries[0]["mlflow"]["run_id"] != summaries[1]["mlflow"]["run_id"]
    versions = {s["mlflow"]["registered_model"]["version"] for s in summaries}
    assert len(versions) == 2  # two versions of 'digits', one per run
    for summary in summaries:
        # Both were promoted; the champion alias is on whichever registered last.
        check_tracked_run(mlflow_server, summary, STEPS, champion=False)
        # Each registered version points back at its own run's model.
        client = MlflowClient(mlflow_server)
        reg = summary["mlflow"]["registered_model"]
        version = client.get_model_version(reg["name"], str(reg["version"]))
        assert version.run_id == summary["mlflow"]["run_id"]
    champion = MlflowClient(mlflow_server).get_model_version_by_alias("digits", "champion")
    assert int(champion.version) in versions


def test_a_run_that_fails_after_tracking_started_ends_failed_with_its_reason(
    mlflow_server, tmp_path
):
    lines = ["x,color,label"] + [
        f"{i * 0.1:.1f},{['red', 'blue'][i % 2] if i < 386 else f'c{i}'},{i % 2}"
        for i in range(400)
    ]
    data = tmp_path / "drift.csv"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    result = run_cli(
        "run",
        "--data",
        str(data),
        "--output",
        str(out),
        "--tracking-uri",
        mlflow_server,
        "--experiment",
        "failing",
        "--closed-columns",  # a new value in it is drift, which stops the run
        "color",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    run = MlflowClient(mlflow_server).get_run(summary["mlflow"]["run_id"])
    assert run.info.status == "FAILED"
    assert "ExampleValidator found anomalies" in run.data.tags["error"]
    running = MlflowClient(mlflow_server).search_runs(
        [run.info.experiment_id], "attributes.status = 'RUNNING'"
    )
    assert running == []

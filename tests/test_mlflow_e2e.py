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


@pytest.fixture(scope="module")
def concurrent_runs(mlflow_server, tmp_path_factory):
    """Two digits runs at once, tracked on the one server: (their output folders, processes,
    and each one's (stdout, stderr))."""
    tmp_path = tmp_path_factory.mktemp("runs")
    outs = [tmp_path / "a", tmp_path / "b"]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "amp_pipeline",
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
                # The MLP: what is tested is the tracking, and the CNN's fitting took 6-9 s
                # of each twin (2-core Zen 4); the CNN runs at the defaults elsewhere.
                "--model",
                "mlp",
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
    return outs, procs, results


def test_two_concurrent_runs_land_complete_on_a_real_server(mlflow_server, concurrent_runs):
    outs, procs, results = concurrent_runs
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


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())


def test_mlflow_models_serve_answers_the_champion_as_tf_serving_rest(
    mlflow_server, concurrent_runs
):
    """`mlflow models serve -m models:/digits@champion --env-manager local` on 127.0.0.1: its
    /invocations gives the probabilities TF Serving's REST predict gives for the same raw rows
    (the pushed champion served by `amp-pipeline serve`), and the model carries a signature."""
    import numpy as np

    from amp_pipeline.benchmarks.load.serving import stop_server, wait_ready
    from amp_pipeline.serving.client import ClientConfig
    from tests.helpers import digits_rows

    outs, procs, _ = concurrent_runs
    assert all(p.returncode == 0 for p in procs)
    champion = MlflowClient(mlflow_server).get_model_version_by_alias("digits", "champion")
    (out,) = [
        o for o in outs
        if json.loads((o / "run_summary.json").read_text())["mlflow"]["registered_model"][
            "version"] == int(champion.version)
    ]  # fmt: skip
    model_uri = "models:/digits@champion"
    env = {**clean_env(), "MLFLOW_TRACKING_URI": mlflow_server}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    port, grpc_port, rest_port = free_port(), free_port(), free_port()
    rows = digits_rows()[:64]
    columns = [f"pixel_{i}" for i in range(64)]
    data = [[int(r[c]) for c in columns] for r in rows]
    mlflow_proc = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "mlflow"), "models", "serve", "-m",
         model_uri, "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port)],
        cwd=out, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    tf_serving = subprocess.Popen(
        [sys.executable, "-m", "amp_pipeline", "serve", "--model-dir",
         str(out / "serving" / "digits"), "--grpc-port", str(grpc_port), "--rest-port",
         str(rest_port)],
        cwd=ROOT, env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_ready(ClientConfig(grpc_port=grpc_port, rest_port=rest_port), tf_serving, "digits")
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2):
                    break
            except OSError:
                assert mlflow_proc.poll() is None, "mlflow models serve exited"
                assert time.monotonic() < deadline, "mlflow models serve did not answer /ping"
                time.sleep(0.5)
        served = _post(
            f"http://127.0.0.1:{port}/invocations",
            {"dataframe_split": {"columns": columns, "data": data}},
        )["predictions"]
        rest = _post(
            f"http://127.0.0.1:{rest_port}/v1/models/digits:predict",
            {"signature_name": "predict_raw",
             "instances": [dict(zip(columns, row, strict=True)) for row in data]},
        )["predictions"]  # fmt: skip
    finally:
        mlflow_proc.terminate()
        mlflow_proc.wait(timeout=30)
        stop_server(tf_serving)
    mlflow_probs = np.array([[p[f"p_{i}"] for i in range(10)] for p in served])
    rest_probs = np.array([p["probabilities"] for p in rest])
    np.testing.assert_allclose(mlflow_probs, rest_probs, atol=1e-6)
    assert [p["class"] for p in served] == [p["classes"] for p in rest]
    # The registered model says what to send: the 64 pixel columns, typed, with an example.
    import mlflow
    from mlflow.models import Model

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(mlflow_server)
    try:
        model = Model.load(model_uri)
    finally:  # set_tracking_uri also exports MLFLOW_TRACKING_URI: undo both
        mlflow.set_tracking_uri(previous)
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    assert model.signature is not None
    inputs = model.signature.inputs.to_dict()
    assert [c["name"] for c in inputs] == columns and {c["type"] for c in inputs} == {"long"}
    assert model.saved_input_example_info is not None

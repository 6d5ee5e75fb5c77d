"""`amp-pipeline serve` as a user runs it: a real process on free loopback ports, spoken to with
tensorflow-serving-api's own stubs and with plain HTTP JSON."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from amp_pipeline.benchmarks.load.serving import grpc_call_factory, load, stop_server, wait_ready
from amp_pipeline.serving.client import ClientConfig
from tests import serving_models
from tests.conftest import ROOT, clean_env
from tests.helpers import free_port

pytestmark = pytest.mark.e2e

MODEL = "toy"
MAX_REQUEST_BYTES = 64 * 1024
X = np.random.default_rng(0).normal(size=(5, serving_models.N_FEATURES)).astype("float32")


class Server:
    def __init__(self, base, grpc_port, rest_port, process):
        self.logs = base.parent / "requests"
        self.base, self.grpc_port, self.rest_port, self.process = (
            base,
            grpc_port,
            rest_port,
            process,
        )
        self.channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        self.stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.rest_port}{path}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serving")
    base = root / MODEL
    serving_models.build(base / "1", seed=1)
    grpc_port, rest_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "amp_pipeline", "serve",
            "--model-dir", str(base),
            "--grpc-port", str(grpc_port),
            "--rest-port", str(rest_port),
            "--poll-seconds", "0.5",
            "--max-request-mb", str(MAX_REQUEST_BYTES / 1024 / 1024),
            # Every request this module sends is logged (README "After the push"), and the
            # features f3 never are.
            "--log-requests", str(root / "requests"), "--log-exclude", "f3",
        ],
        cwd=ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_ready(ClientConfig(grpc_port=grpc_port, rest_port=rest_port), process, MODEL)
        yield Server(base, grpc_port, rest_port, process)
    finally:
        stop_server(process)
    assert process.returncode == 0, process.stderr.read()[-2000:]


def in_process(path, signature: str, **inputs) -> dict:
    fn = tf.saved_model.load(str(path)).signatures[signature]
    return {k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in inputs.items()}).items()}


def predict_request(signature="serving_default", version=None, **inputs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return request


def http(server, method: str, path: str, body: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(server.url(path), data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def raw_inputs(x=X) -> dict:
    return {name: x[:, i] for i, name in enumerate(serving_models.FEATURES)}


def assert_healthy(server) -> None:
    status, body = http(server, "GET", f"/v1/models/{MODEL}")
    assert status == 200 and body["model_version_status"][0]["state"] == "AVAILABLE"
    response = server.stub.Predict(predict_request("predict_raw", **raw_inputs()), timeout=10)
    assert tf.make_ndarray(response.outputs["probabilities"]).shape == (5, 3)


def test_metadata_over_grpc_and_rest_lists_the_signatures(server):
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = MODEL
    request.metadata_field.append("signature_def")
    response = server.stub.GetModelMetadata(request, timeout=10)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signatures)
    assert set(signatures.signature_def) == {"serving_default", "predict_raw"}
    assert set(signatures.signature_def["predict_raw"].inputs) == set(serving_models.FEATURES)
    assert response.model_spec.version.value == 1

    status, body = http(server, "GET", f"/v1/models/{MODEL}/metadata")
    assert status == 200
    assert body["model_spec"]["version"] == "1"
    rest_signatures = body["metadata"]["signature_def"]["signature_def"]
    assert rest_signatures["serving_default"]["inputs"]["examples"]["dtype"] == "DT_STRING"

    model_stub = model_service_pb2_grpc.ModelServiceStub(server.channel)
    status_request = get_model_status_pb2.GetModelStatusRequest()
    status_request.model_spec.name = MODEL
    (version,) = model_stub.GetModelStatus(status_request, timeout=10).model_version_status
    assert (
        version.version == 1 and version.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
    )


def test_predictions_over_grpc_and_rest_equal_the_savedmodel_in_process(server):
    want = in_process(server.base / "1", "predict_raw", **raw_inputs())
    examples = serving_models.examples(X)

    response = server.stub.Predict(
        predict_request(examples=np.array(examples, dtype=object)), timeout=10
    )
    assert response.model_spec.signature_name == "serving_default"
    np.testing.assert_allclose(
        tf.make_ndarray(response.outputs["probabilities"]), want["probabilities"], atol=1e-6
    )
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["class_ids"]), want["class_ids"])

    rows = [{"b64": base64.b64encode(e).decode()} for e in examples]
    status, body = http(
        server, "POST", f"/v1/models/{MODEL}:predict", json.dumps({"instances": rows}).encode()
    )
    assert status == 200
    np.testing.assert_allclose(
        [p["probabilities"] for p in body["predictions"]], want["probabilities"], atol=1e-6
    )
    assert [p["classes"] for p in body["predictions"]] == [c.decode() for c in want["classes"]]

    status, body = http(server, "POST", f"/v1/models/{MODEL}/versions/1:predict", raw_body())
    assert status == 200
    np.testing.assert_allclose(body["outputs"]["probabilities"], want["probabilities"], atol=1e-6)
    assert body["outputs"]["class_ids"] == want["class_ids"].tolist()


GRPC_BAD = {
    "wrong shape": (
        lambda: predict_request("predict_raw", **{**raw_inputs(), "f0": X[:, :2]}),
        "expects shape",
    ),
    "wrong dtype": (
        lambda: predict_request("predict_raw", **{**raw_inputs(), "f0": X[:, 0].astype("int32")}),
        "expects float32, got int32",
    ),
    "unknown signature": (lambda: predict_request("nope", **raw_inputs()), "'nope' not found"),
    "unknown input": (
        lambda: predict_request("predict_raw", **raw_inputs(), extra=X[:, 0]),
        "'extra' is not an input",
    ),
    "malformed tensor": (lambda: _malformed(), "malformed TensorProto"),
}


def _malformed():
    request = predict_request("predict_raw", **raw_inputs())
    request.inputs["f0"].tensor_content = b"\x00\x01\x02"  # 3 bytes for 5 float32 values
    return request


@pytest.mark.parametrize("case", sorted(GRPC_BAD))
def test_bad_grpc_requests_are_invalid_argument_and_the_server_keeps_serving(server, case):
    make, message = GRPC_BAD[case]
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Predict(make(), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in e.value.details()
    assert_healthy(server)


@pytest.mark.parametrize(
    "version, code", [(None, grpc.StatusCode.NOT_FOUND), (99, grpc.StatusCode.NOT_FOUND)]
)
def test_unknown_model_or_version_over_grpc_is_not_found(server, version, code):
    request = predict_request("predict_raw", version=version, **raw_inputs())
    if version is None:
        request.model_spec.name = "no-such-model"
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Predict(request, timeout=10)
    assert e.value.code() == code
    assert_healthy(server)


def raw_body(signature="predict_raw", **override) -> bytes:
    columns = {k: v.tolist() for k, v in raw_inputs().items()}
    return json.dumps({"signature_name": signature, "inputs": {**columns, **override}}).encode()


PREDICT = f"/v1/models/{MODEL}:predict"
REST_BAD = {
    "not json": (PREDICT, b"{not json", 400, "not JSON"),
    "wrong shape": (PREDICT, raw_body(f0=[[1.0, 2.0]] * 5), 400, "expects shape"),
    "wrong dtype": (
        PREDICT,
        raw_body(f0=["a"] * 5),
        400,
        "expects float32 values, got JSON strings",
    ),
    "unknown signature": (PREDICT, raw_body("nope"), 400, "'nope' not found"),
    "neither instances nor inputs": (PREDICT, b"{}", 400, "exactly one"),
    "unknown model": ("/v1/models/no-such-model:predict", raw_body(), 404, "not found"),
    "unknown version": (f"/v1/models/{MODEL}/versions/99:predict", raw_body(), 404, "not found"),
    "too large": (PREDICT, b" " * (MAX_REQUEST_BYTES + 1), 413, "over this server's limit"),
}


@pytest.mark.parametrize("case", sorted(REST_BAD))
def test_bad_rest_requests_get_an_error_status_with_a_message_and_the_server_keeps_serving(
    server, case
):
    path, body, want_status, message = REST_BAD[case]
    status, payload = http(server, "POST", path, body)
    assert status == want_status
    assert message in payload["error"]
    assert_healthy(server)


def test_a_grpc_request_over_the_size_limit_is_refused(server):
    big = np.zeros(MAX_REQUEST_BYTES // 4 + 1024, dtype="float32")
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Predict(
            predict_request("predict_raw", **{**raw_inputs(), "f0": big}), timeout=10
        )
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert_healthy(server)


def test_load_of_bounded_count_and_time_has_no_errors(server):
    factory = grpc_call_factory(
        ClientConfig(grpc_port=server.grpc_port, rest_port=server.rest_port),
        MODEL,
        serving_models.examples(X[:1]),
    )
    result = load(factory, clients=4, duration_s=3.0, max_requests=300)
    assert result["errors"] == 0, result["first_errors"]
    assert 0 < result["requests"] <= 300
    assert result["p99_ms"] is not None
    assert_healthy(server)


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_predict_command_prints_the_served_classes(server, tmp_path, cli, protocol):
    rows = tmp_path / "rows.csv"
    rows.write_text(
        ",".join(serving_models.FEATURES)
        + "\n"
        + "\n".join(",".join(f"{v:.6f}" for v in row) for row in X)
        + "\n"
    )
    result = cli(
        "predict", "--model-name", MODEL, "--csv", str(rows), "--protocol", protocol,
        "--grpc-port", str(server.grpc_port), "--rest-port", str(server.rest_port),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    served = int(result.stdout.split("version ")[1].split()[0])
    x = np.loadtxt(rows, delimiter=",", skiprows=1, dtype="float32")
    want = in_process(server.base / str(served), "predict_raw", **raw_inputs(x))
    printed = [line.split()[1] for line in result.stdout.splitlines()[2:]]
    assert printed == [c.decode() for c in want["classes"]]


def test_predict_command_names_a_missing_column_and_an_unreachable_server(server, tmp_path, cli):
    rows = tmp_path / "rows.csv"
    rows.write_text("f0,f1,f2\n1,2,3\n")
    result = cli(
        "predict", "--model-name", MODEL, "--csv", str(rows), "--grpc-port", str(server.grpc_port)
    )
    assert result.returncode == 2
    assert "column 'f3' is missing" in result.stderr

    result = cli(
        "predict", "--model-name", MODEL, "--csv", str(rows), "--grpc-port", str(free_port()),
        "--retries", "1", "--timeout", "2",
    )  # fmt: skip
    assert result.returncode == 1
    assert "UNAVAILABLE" in result.stderr and "after 2 attempts" in result.stderr


def test_a_new_version_is_served_without_a_restart_and_the_old_one_on_request(server):
    # Last in this module: it changes what the server serves.
    new = serving_models.build(server.base.parent / "staging-2", seed=2)
    new.rename(server.base / "2")  # appears whole, as a push does once copied
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        response = server.stub.Predict(predict_request("predict_raw", **raw_inputs()), timeout=10)
        if response.model_spec.version.value == 2:
            break
        time.sleep(0.2)
    assert response.model_spec.version.value == 2
    want = in_process(server.base / "2", "predict_raw", **raw_inputs())
    np.testing.assert_allclose(
        tf.make_ndarray(response.outputs["probabilities"]), want["probabilities"], atol=1e-6
    )

    status, body = http(
        server,
        "POST",
        f"/v1/models/{MODEL}/versions/1:predict",
        raw_body(),
    )
    assert status == 200
    old = in_process(server.base / "1", "predict_raw", **raw_inputs())
    np.testing.assert_allclose(body["outputs"]["probabilities"], old["probabilities"], atol=1e-6)
    status, body = http(server, "GET", f"/v1/models/{MODEL}")
    assert [s["version"] for s in body["model_version_status"]][0] == "2"


def test_a_body_over_the_limit_gets_413_not_a_broken_pipe(server):
    """The 413 is sent before the body is read: a client that sends the whole body first (no
    Expect header) still reads it, and one that asks `Expect: 100-continue` never sends it."""
    import http.client
    import socket

    big = b" " * (MAX_REQUEST_BYTES * 256)  # 16 MB, far more than the socket buffers hold
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)
    connection.request("POST", PREDICT, body=big, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 413
    assert "over this server's limit" in json.loads(response.read())["error"]
    connection.close()

    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=10) as sock:
        sock.sendall(
            f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(big)}\r\n"
            "Expect: 100-continue\r\n\r\n".encode()
        )
        head = sock.recv(4096).decode()
    assert head.startswith("HTTP/1.1 413") and "100 Continue" not in head
    assert_healthy(server)


def test_status_lists_a_failed_version_and_a_model_without_one_is_unavailable(tmp_path):
    base = tmp_path / "serving" / MODEL
    serving_models.build(base / "1", seed=1)
    broken = base / "2"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    grpc_port, rest_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "amp_pipeline", "serve", "--model-dir",
            str(base.parent), "--grpc-port", str(grpc_port), "--rest-port", str(rest_port),
            "--poll-seconds", "0.3",
        ],
        cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        config = ClientConfig(grpc_port=grpc_port, rest_port=rest_port)
        wait_ready(config, process, MODEL)
        fake = Server(base, grpc_port, rest_port, process)
        status, body = http(fake, "GET", f"/v1/models/{MODEL}")
        assert status == 200
        states = {s["version"]: s for s in body["model_version_status"]}
        assert states["1"]["state"] == "AVAILABLE"
        assert states["2"]["state"] == "END" and states["2"]["status"]["error_message"]
        stub = model_service_pb2_grpc.ModelServiceStub(fake.channel)
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = MODEL
        versions = stub.GetModelStatus(request, timeout=10).model_version_status
        assert {v.version: v.state for v in versions} == {
            1: get_model_status_pb2.ModelVersionStatus.AVAILABLE,
            2: get_model_status_pb2.ModelVersionStatus.END,
        }
        # The only good version is deleted: the model is there, but nothing serves.
        import shutil

        shutil.rmtree(base / "1")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status, body = http(fake, "GET", f"/v1/models/{MODEL}")
            if status != 200:
                break
            time.sleep(0.3)
        assert status == 503 and "no servable version" in body["error"]
        with pytest.raises(grpc.RpcError) as e:
            stub.GetModelStatus(request, timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.RpcError) as e:
            fake.stub.Predict(predict_request("predict_raw", **raw_inputs()), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        stop_server(process)


def test_requests_over_both_protocols_are_logged_as_prediction_logs(server, tmp_path, cli):
    """`serve --log-requests` + `predict --csv` over gRPC and REST: PredictionLog records that
    prediction_log_pb2 parses, naming the model, version and signature, in owner-only files,
    without the excluded feature."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    from amp_pipeline.serving.requestlog.records import log_files

    rows = tmp_path / "rows.csv"
    rows.write_text(
        ",".join(serving_models.FEATURES) + "\n"
        + "\n".join(",".join(f"{v:.6f}" for v in row) for row in X) + "\n"
    )  # fmt: skip

    def logged() -> set[str]:
        """The origins of the logged predict --csv requests (the CSV's len(X) rows, predict_raw)."""
        found = set()
        for path in log_files(server.logs):
            for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
                record = prediction_log_pb2.PredictionLog.FromString(raw)
                spec = record.predict_log.request.model_spec
                inputs = record.predict_log.request.inputs
                if spec.signature_name == "predict_raw" and tf.make_ndarray(inputs["f0"]).shape[
                    0
                ] == len(X):
                    found.add(record.log_metadata.request_origin)
                    assert spec.name == MODEL and spec.version.value >= 1
                    assert "f3" not in inputs
                    assert set(record.predict_log.response.outputs) >= {"classes"}
        return found

    time.sleep(1.5)  # the writer flushes within a second when idle
    # The predict tests above sent this CSV over both protocols; run alone, send it here.
    for protocol in {"grpc", "rest"} - logged():
        result = cli(
            "predict", "--model-name", MODEL, "--csv", str(rows), "--protocol", protocol,
            "--grpc-port", str(server.grpc_port), "--rest-port", str(server.rest_port),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + 10
    found = logged()
    while time.monotonic() < deadline and found != {"grpc", "rest"}:
        time.sleep(0.5)
        found = logged()
    assert found == {"grpc", "rest"}
    assert oct(server.logs.stat().st_mode)[-3:] == "700"
    assert all(oct(p.stat().st_mode)[-3:] == "600" for p in log_files(server.logs))


def test_a_shadow_version_answers_off_the_answer_path_and_is_logged_beside_production(tmp_path):
    """`serve --shadow 1` with version 2 in production, in process: the answers are version
    2's; each logged request also has version 1's answer, marked as the shadow's, on the same
    inputs."""
    from amp_pipeline.serving.client import ServingClient
    from amp_pipeline.serving.requestlog.records import read_logs, request_key
    from amp_pipeline.serving.requestlog.writer import RequestLogConfig
    from amp_pipeline.serving.server import LocalServer, ServerConfig

    base = tmp_path / MODEL
    serving_models.build(base / "1", seed=1)
    serving_models.build(base / "2", seed=2)
    config = ServerConfig(
        model_dir=base, grpc_port=0, rest_port=0,
        request_log=RequestLogConfig(tmp_path / "logs"), shadow_version=1,
    )  # fmt: skip
    with LocalServer(config) as local:
        client = ServingClient(ClientConfig(grpc_port=local.grpc_port, rest_port=local.rest_port))
        served = [client.predict(MODEL, raw_inputs(X[i : i + 2]), "predict_raw") for i in (0, 2)]
    want = in_process(base / "2", "predict_raw", **raw_inputs(X[0:2]))
    assert list(served[0]["classes"]) == list(want["classes"])
    records = list(read_logs(tmp_path / "logs"))
    production = [r for r in records if r.log_metadata.request_origin == "grpc"]
    shadow = [r for r in records if r.log_metadata.request_origin == "grpc/shadow"]
    assert len(production) == len(shadow) == 2
    assert {r.log_metadata.model_spec.version.value for r in production} == {2}
    assert {r.log_metadata.model_spec.version.value for r in shadow} == {1}
    assert sorted(map(request_key, production)) == sorted(map(request_key, shadow))
    import tensorflow as tf

    first = next(r for r in shadow if request_key(r) == request_key(production[0]))
    v1 = in_process(base / "1", "predict_raw", **{
        k: tf.make_ndarray(v) for k, v in production[0].predict_log.request.inputs.items()
    })  # fmt: skip
    got = tf.make_ndarray(first.predict_log.response.outputs["classes"])
    assert list(got) == list(v1["classes"])

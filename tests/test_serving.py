"""Serving without a server: deployment files, request parsing, batching, version handling."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import tensorflow as tf
import yaml

from amp_pipeline.serving import deploy
from amp_pipeline.serving.batching import Batcher, BatchingConfig
from amp_pipeline.serving.errors import ServingError
from amp_pipeline.serving.repository import InputSpec, ModelRepository
from amp_pipeline.serving.tensors import check_inputs, parse_rest_request, to_rest_response


def _pushed(root: Path, name: str, versions) -> Path:
    for v in versions:
        (root / name / str(v)).mkdir(parents=True)
        (root / name / str(v) / "saved_model.pb").write_bytes(b"")
    return root / name


# -- deployment files ---------------------------------------------------------------------


def test_models_config_parses_with_tf_servings_own_proto(tmp_path):
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    _pushed(tmp_path / "serving", "digits", [1, 2])
    paths = deploy.write_deployment(tmp_path / "serving", tmp_path / "deploy", keep_versions=2)

    config = text_format.Parse(
        paths["models_config"].read_text(), model_server_config_pb2.ModelServerConfig()
    )
    (model,) = config.model_config_list.config
    assert (model.name, model.base_path, model.model_platform) == (
        "digits",
        "/models/digits",
        "tensorflow",
    )
    assert model.model_version_policy.latest.num_versions == 2


def test_batching_parameters_name_tf_servings_fields(tmp_path):
    text = deploy.batching_parameters(BatchingConfig(max_batch_size=32, batch_timeout_s=0.005))
    fields = dict(line.split(" ", 1) for line in text.strip().splitlines())
    assert fields["max_batch_size"] == "{ value: 32 }"
    assert fields["batch_timeout_micros"] == "{ value: 5000 }"
    assert set(fields) == {
        "max_batch_size",
        "batch_timeout_micros",
        "num_batch_threads",
        "max_enqueued_batches",
        "pad_variable_length_inputs:",
    }


@pytest.mark.parametrize("gpu", [False, True])
def test_kubernetes_manifests_are_valid_yaml_with_ports_probes_and_resources(tmp_path, gpu):
    _pushed(tmp_path / "serving", "digits", [7])
    paths = deploy.write_deployment(tmp_path / "serving", tmp_path / "deploy")
    docs = list(yaml.safe_load_all(paths["kubernetes_gpu" if gpu else "kubernetes"].read_text()))
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"ConfigMap", "Deployment", "Service"}

    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"].startswith("tensorflow/serving:")
    assert container["image"].endswith("-gpu") == gpu
    assert {p["containerPort"] for p in container["ports"]} == {8500, 8501}
    assert container["readinessProbe"]["httpGet"] == {"path": "/v1/models/digits", "port": 8501}
    assert container["livenessProbe"]["tcpSocket"]["port"] == 8500
    assert "--model_config_file=/config/models.config" in container["args"]
    assert ("nvidia.com/gpu" in container["resources"]["limits"]) == gpu
    resources = container["resources"]
    assert resources["requests"] == {"cpu": "1", "memory": "2Gi"}
    assert (resources["limits"]["cpu"], resources["limits"]["memory"]) == ("2", "4Gi")
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/config", "/models"} <= mounts
    assert "models.config" in kinds["ConfigMap"]["data"]
    selector = kinds["Service"]["spec"]["selector"]
    assert selector == kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert {p["port"] for p in kinds["Service"]["spec"]["ports"]} == {8500, 8501}


def test_deploy_files_refuse_a_folder_without_a_pushed_model(tmp_path):
    with pytest.raises(ValueError, match="no pushed model"):
        deploy.write_deployment(tmp_path, tmp_path / "deploy")


# -- REST request parsing -----------------------------------------------------------------

SPECS = {
    "f0": InputSpec("f0", tf.float32, (None,)),
    "f1": InputSpec("f1", tf.float32, (None,)),
}


def test_row_and_columnar_requests_give_the_same_arrays():
    rows, row_format = parse_rest_request(
        {"instances": [{"f0": 1, "f1": 2.5}, {"f0": 3, "f1": 4}]}, "sig", SPECS
    )
    cols, col_format = parse_rest_request({"inputs": {"f0": [1, 3], "f1": [2.5, 4]}}, "sig", SPECS)
    assert row_format and not col_format
    for name in SPECS:
        np.testing.assert_array_equal(rows[name], cols[name])
        assert rows[name].dtype == np.float32


@pytest.mark.parametrize(
    "body, message",
    [
        ([1, 2], "JSON object"),
        ({"instances": []}, "non-empty"),
        ({"instances": [{"f0": 1}], "inputs": {"f0": [1]}}, "exactly one"),
        ({"inputs": {"f0": ["a"], "f1": [1.0]}}, "expects float32 values, got JSON strings"),
        ({"inputs": {"f0": [True], "f1": [1.0]}}, "got JSON booleans"),
        ({"inputs": {"f0": [[1], [1, 2]], "f1": [1.0]}}, "ragged"),
        ({"inputs": {"nope": [1]}}, "'nope' is not an input"),
        ({"instances": [1.0, 2.0]}, "each instance must be an object"),
        ({"instances": [{"f0": 1, "f1": 2}, {"f0": 1}]}, "instance 1 names"),
    ],
)
def test_malformed_rest_bodies_are_invalid_argument_naming_the_problem(body, message):
    with pytest.raises(ServingError, match=message) as e:
        parse_rest_request(body, "sig", SPECS)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.http_status == 400


@pytest.mark.parametrize(
    "arrays, message",
    [
        ({"f0": np.zeros(2)}, r"needs input\(s\) \['f1'\]"),
        ({"f0": np.zeros((2, 3)), "f1": np.zeros(2)}, r"expects shape \[-1\], got \[2,3\]"),
        ({"f0": np.zeros(2), "f1": np.zeros(3)}, "disagree on the batch size"),
    ],
)
def test_wrong_inputs_are_refused_before_the_model_runs(arrays, message):
    with pytest.raises(ServingError, match=message):
        check_inputs("sig", SPECS, arrays)


def test_rest_responses_follow_tf_servings_row_and_columnar_shapes():
    outputs = {"probabilities": np.array([[0.25, 0.75]]), "classes": np.array([b"b"], object)}
    assert to_rest_response(outputs, row_format=True) == {
        "predictions": [{"probabilities": [0.25, 0.75], "classes": "b"}]
    }
    assert to_rest_response(outputs, row_format=False) == {
        "outputs": {"probabilities": [[0.25, 0.75]], "classes": ["b"]}
    }


def test_b64_values_become_bytes_for_string_inputs():
    specs = {"examples": InputSpec("examples", tf.string, (None,))}
    arrays, _ = parse_rest_request({"instances": [{"b64": "AAE="}, {"b64": "AgA="}]}, "s", specs)
    assert arrays["examples"].tolist() == [b"\x00\x01", b"\x02\x00"]  # trailing NUL kept


# -- batching -----------------------------------------------------------------------------


class _CountingServable:
    """Doubles its input; records each call's batch size; fails on negative values."""

    inputs = {"sig": {"x": InputSpec("x", None, (None,))}}

    def __init__(self):
        self.calls: list[int] = []

    def run(self, signature, arrays):
        x = arrays["x"]
        self.calls.append(len(x))
        time.sleep(0.01)
        if (x < 0).any():
            raise ValueError("negative input")
        return {"y": x * 2}


def _concurrently(batcher, servable, values):
    results, threads = {}, []

    def call(v):
        try:
            results[v] = batcher.run(servable, "sig", {"x": np.array([v], dtype=np.float32)})
        except ValueError as e:
            results[v] = e

    for v in values:
        threads.append(threading.Thread(target=call, args=(v,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_concurrent_requests_run_as_fewer_batched_calls_with_their_own_answers():
    servable = _CountingServable()
    batcher = Batcher(BatchingConfig(max_batch_size=16, batch_timeout_s=0.05, num_batch_threads=1))
    try:
        results = _concurrently(batcher, servable, [float(i) for i in range(12)])
    finally:
        batcher.close()
    for v, out in results.items():
        assert out["y"].tolist() == [2 * v]
    assert len(servable.calls) < 12
    assert sum(servable.calls) == 12


def test_a_bad_request_in_a_batch_fails_alone():
    servable = _CountingServable()
    batcher = Batcher(BatchingConfig(max_batch_size=16, batch_timeout_s=0.05, num_batch_threads=1))
    try:
        results = _concurrently(batcher, servable, [1.0, 2.0, -1.0, 3.0])
    finally:
        batcher.close()
    assert isinstance(results[-1.0], ValueError)
    assert [results[v]["y"].tolist() for v in (1.0, 2.0, 3.0)] == [[2.0], [4.0], [6.0]]


# -- versions -----------------------------------------------------------------------------


class _FakeServable:
    def __init__(self, name, version, path):
        if (path / "BROKEN").exists():
            raise OSError("half-copied")
        self.name, self.version, self.path = name, version, path


def test_newest_version_is_served_and_a_new_push_is_picked_up(tmp_path):
    base = _pushed(tmp_path, "digits", [1, 2])
    repo = ModelRepository(tmp_path, loader=_FakeServable)
    repo.refresh()
    assert repo.get("digits").version == 2
    assert repo.get("digits", 1).version == 1  # an older version, loaded on request

    _pushed(tmp_path, "digits", [3])
    (base / "3" / "BROKEN").write_text("")
    repo.refresh()
    assert repo.get("digits").version == 2  # a version that fails to load is not switched to
    (base / "3" / "BROKEN").unlink()
    repo.refresh()
    assert repo.get("digits").version == 3


@pytest.mark.parametrize("name, version", [("other", None), ("digits", 9)])
def test_unknown_model_or_version_is_not_found(tmp_path, name, version):
    _pushed(tmp_path, "digits", [1])
    repo = ModelRepository(tmp_path, loader=_FakeServable)
    repo.refresh()
    with pytest.raises(ServingError) as e:
        repo.get(name, version)
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    assert e.value.http_status == 404


def test_a_version_that_failed_to_load_is_listed_with_its_error(tmp_path):
    base = _pushed(tmp_path, "digits", [1, 2])
    (base / "2" / "BROKEN").write_text("")
    repo = ModelRepository(tmp_path, loader=_FakeServable)
    repo.refresh()
    status = repo.status("digits")
    assert [(s["version"], s["state"]) for s in status] == [("2", "END"), ("1", "AVAILABLE")]
    assert status[0]["status"] == {"error_code": "UNKNOWN", "error_message": "OSError: half-copied"}
    assert repo.status("digits", 2) == [status[0]]


def test_a_model_with_no_servable_version_is_unavailable_not_an_empty_200(tmp_path):
    base = _pushed(tmp_path, "digits", [1])
    (base / "1" / "BROKEN").write_text("")
    repo = ModelRepository(tmp_path, loader=_FakeServable)
    repo.refresh()
    for call in (lambda: repo.status("digits"), lambda: repo.get("digits")):
        with pytest.raises(ServingError) as e:
            call()
        assert e.value.code == grpc.StatusCode.UNAVAILABLE and e.value.http_status == 503
        assert "no servable version (version 1 failed to load: OSError: half-copied)" in (
            e.value.message
        )
    # Every version deleted from disk after it served: unavailable as well.
    (base / "1" / "BROKEN").unlink()
    repo.refresh()
    assert repo.get("digits").version == 1
    import shutil

    shutil.rmtree(base / "1")
    repo.refresh()
    with pytest.raises(ServingError) as e:
        repo.status("digits")
    assert e.value.code == grpc.StatusCode.UNAVAILABLE


def test_a_request_for_the_latest_version_never_names_a_version_it_did_not_ask_for(tmp_path):
    base = _pushed(tmp_path, "digits", [1, 2])
    repo = ModelRepository(tmp_path, loader=_FakeServable, max_loaded=1)
    repo.refresh()
    import shutil

    shutil.rmtree(base / "2")  # gone before the next rescan
    with repo._lock:
        repo._loaded["digits"].pop(2, None)
    with pytest.raises(ServingError) as e:
        repo.get("digits")
    assert "Latest(digits)" in e.value.message and "Specific" not in e.value.message


def test_gate_rule_carries_the_infra_validation_reason():
    from amp_pipeline.components.gate.rules import serving_rule

    failed = serving_rule(
        {
            "passed": False,
            "reasons": ["gRPC Predict: class ids differ from in process"],
            "config": {"latency_budget_ms": 500.0},
        }
    )
    assert not failed.passed and "class ids differ" in failed.detail
    passed = serving_rule(
        {
            "passed": True,
            "reasons": [],
            "examples": 64,
            "config": {"latency_budget_ms": 500.0},
            "latency": {"grpc": {"p99_ms": 3.0}, "rest": {"p99_ms": 4.0}},
        }
    )
    assert passed.passed and passed.value == 4.0


def test_load_errors_are_only_touched_under_the_lock_their_readers_hold(tmp_path):
    """status() and get() read the load errors under the repository's lock while the poller
    writes them: every write and read must hold it too."""
    base = _pushed(tmp_path, "digits", [1, 2, 3])
    for v in (2, 3):
        (base / str(v) / "BROKEN").write_text("")
    repo = ModelRepository(tmp_path, loader=_FakeServable)
    unlocked = []

    class Guarded(dict):
        def _check(self, op):
            if not repo._lock.locked():
                unlocked.append(op)

        def __setitem__(self, key, value):
            self._check("write")
            super().__setitem__(key, value)

        def pop(self, *args):
            self._check("pop")
            return super().pop(*args)

        def get(self, *args):
            self._check("read")
            return super().get(*args)

        def items(self):
            self._check("read")
            return super().items()

    repo._load_errors = Guarded()
    repo.refresh()  # versions 3 and 2 fail, 1 serves
    assert [s["state"] for s in repo.status("digits")] == ["END", "END", "AVAILABLE"]
    with pytest.raises(ServingError):
        repo.get("digits", 3)  # loads on request, fails, names the error
    (base / "3" / "BROKEN").unlink()
    repo.refresh()  # version 3 now loads: its error is dropped
    assert repo.get("digits").version == 3
    assert unlocked == []


def test_the_rest_server_queues_64_connections_that_arrive_at_once():
    """64 clients connecting in the same instant all complete their handshake while the server
    is busy (not accepting): the listen backlog holds them. With socketserver's default of 5,
    the kernel dropped all but about 6 and the rest waited for a SYN retry or were reset."""
    import socket

    from amp_pipeline.serving.rest import RestServer

    server = RestServer(("127.0.0.1", 0), core=None, max_request_bytes=1024)
    clients = []
    try:
        for _ in range(64):
            s = socket.socket()
            s.settimeout(0.5)
            clients.append(s)
        connected = 0
        for s in clients:
            try:
                s.connect(server.server_address)
                connected += 1
            except OSError:
                pass
        assert connected == 64
    finally:
        for s in clients:
            s.close()
        server.server_close()

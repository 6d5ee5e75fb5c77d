"""A client for TF Serving (and the local server): gRPC through tensorflow-serving-api's stubs,
REST through plain HTTP JSON.

    client = ServingClient("127.0.0.1", grpc_port=8500, rest_port=8501)
    outputs = client.predict("digits", {"examples": serialized}, signature="serving_default")

Every call has a timeout. UNAVAILABLE (server starting, restarting, overloaded) is retried a
bounded number of times with exponential backoff; every other error is raised at once as a
`ClientError` whose message names the server, the call and the server's own reason.
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping

import grpc
import numpy as np
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from amp_pipeline.core import names


class ClientError(RuntimeError):
    """A call failed; `code` is the gRPC status (or HTTP status for REST)."""

    def __init__(self, message: str, code=None):
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    host: str = "127.0.0.1"
    grpc_port: int = 8500
    rest_port: int = 8501
    timeout_s: float = 10.0
    retries: int = 3
    backoff_s: float = 0.2


class ServingClient:
    def __init__(self, config: ClientConfig | None = None):
        self.config = config or ClientConfig()
        self._channel: grpc.Channel | None = None
        self._stub = None

    @property
    def grpc_target(self) -> str:
        return f"{self.config.host}:{self.config.grpc_port}"

    @property
    def rest_url(self) -> str:
        return f"http://{self.config.host}:{self.config.rest_port}"

    def _prediction_stub(self):
        if self._stub is None:
            self._channel = grpc.insecure_channel(self.grpc_target)
            self._stub = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        return self._stub

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = self._stub = None

    def __enter__(self) -> ServingClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _retrying(self, what: str, call):
        attempt = 0
        while True:
            try:
                return call()
            except grpc.RpcError as e:
                code = e.code()
                if code == grpc.StatusCode.UNAVAILABLE and attempt < self.config.retries:
                    time.sleep(self.config.backoff_s * 2**attempt)
                    attempt += 1
                    continue
                tried = f" after {attempt + 1} attempts" if attempt else ""
                raise ClientError(
                    f"{what} to {self.grpc_target} failed{tried}: {code.name}: {e.details()}", code
                ) from None

    # -- gRPC --------------------------------------------------------------------------------

    def predict(
        self,
        model: str,
        inputs: Mapping[str, np.ndarray],
        signature: str = names.SERVING_SIGNATURE,
        version: int | None = None,
        output_filter: tuple[str, ...] = (),
    ) -> dict[str, np.ndarray]:
        """gRPC Predict; returns {output name: array}."""
        import tensorflow as tf

        request = predict_pb2.PredictRequest()
        request.model_spec.name = model
        request.model_spec.signature_name = signature
        if version is not None:
            request.model_spec.version.value = version
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        request.output_filter.extend(output_filter)
        stub = self._prediction_stub()
        response = self._retrying(
            "Predict", lambda: stub.Predict(request, timeout=self.config.timeout_s)
        )
        return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}

    def predict_request(self, request: predict_pb2.PredictRequest) -> predict_pb2.PredictResponse:
        """gRPC Predict with a ready request (load tests build it once)."""
        stub = self._prediction_stub()
        return self._retrying(
            "Predict", lambda: stub.Predict(request, timeout=self.config.timeout_s)
        )

    def metadata(self, model: str, version: int | None = None):
        """gRPC GetModelMetadata: {signature name: SignatureDef}, and the served version."""
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        request.model_spec.name = model
        if version is not None:
            request.model_spec.version.value = version
        request.metadata_field.append("signature_def")
        stub = self._prediction_stub()
        response = self._retrying(
            "GetModelMetadata",
            lambda: stub.GetModelMetadata(request, timeout=self.config.timeout_s),
        )
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_map)
        return dict(signature_map.signature_def), response.model_spec.version.value

    # -- REST --------------------------------------------------------------------------------

    def _http(self, method: str, path: str, body: bytes | None = None) -> dict:
        url = self.rest_url + path
        attempt = 0
        while True:
            request = urllib.request.Request(
                url, data=body, method=method, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=self.config.timeout_s) as r:
                    return json.loads(r.read())
            except urllib.error.HTTPError as e:
                try:
                    reason = json.loads(e.read()).get("error", e.reason)
                except ValueError:
                    reason = e.reason
                if e.code == 503 and attempt < self.config.retries:
                    pass
                else:
                    raise ClientError(
                        f"{method} {url} failed: HTTP {e.code}: {reason}", e.code
                    ) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                reason = getattr(e, "reason", e)
                if attempt >= self.config.retries:
                    raise ClientError(
                        f"{method} {url} failed after {attempt + 1} attempts: {reason}"
                    ) from None
            time.sleep(self.config.backoff_s * 2**attempt)
            attempt += 1

    @staticmethod
    def _model_path(model: str, version: int | None) -> str:
        return f"/v1/models/{model}" + (f"/versions/{version}" if version is not None else "")

    def rest_predict(
        self,
        model: str,
        *,
        instances: list | None = None,
        inputs=None,
        signature: str | None = None,
        version: int | None = None,
    ) -> dict:
        """REST `:predict` in the row (`instances`) or columnar (`inputs`) format."""
        if (instances is None) == (inputs is None):
            raise ValueError("rest_predict needs exactly one of instances= or inputs=")
        body: dict = {"instances": instances} if instances is not None else {"inputs": inputs}
        if signature:
            body["signature_name"] = signature
        path = self._model_path(model, version) + ":predict"
        return self._http("POST", path, json.dumps(body).encode())

    def rest_status(self, model: str, version: int | None = None) -> dict:
        return self._http("GET", self._model_path(model, version))

    def rest_metadata(self, model: str, version: int | None = None) -> dict:
        return self._http("GET", self._model_path(model, version) + "/metadata")

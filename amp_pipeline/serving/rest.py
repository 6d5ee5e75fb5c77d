"""TF Serving's REST API: model status, metadata and `:predict`, in its JSON formats.

    GET  /v1/models/<name>[/versions/<n>]
    GET  /v1/models/<name>[/versions/<n>]/metadata
    POST /v1/models/<name>[/versions/<n>]:predict
         {"signature_name": ..., "instances": [...]} or {..., "inputs": ...}

Errors are `{"error": "<message>"}` with 400 (bad request), 404 (unknown model, version or
path), 413 (body over the size limit) or 500.
"""

from __future__ import annotations

import json
import logging
import re
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from google.protobuf import json_format

from amp_pipeline.serving.errors import ServingError, invalid, not_found
from amp_pipeline.serving.service import PredictionCore
from amp_pipeline.serving.tensors import parse_rest_request, to_rest_response

logger = logging.getLogger(__name__)

DRAIN_SECONDS = 30.0  # how long an over-limit body is read and dropped before closing
PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+))?"
    r"(?P<action>/metadata|:predict)?/?$"
)


class RestServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The listen backlog. socketserver's default of 5 made the kernel drop connections beyond
    # the fifth waiting one: 64 concurrent clients saw resets and a 1-second tail (the SYN
    # retry). Connections beyond this many waiting ones are refused by the kernel.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], core: PredictionCore, max_request_bytes: int):
        super().__init__(address, RestHandler)
        self.core = core
        self.max_request_bytes = max_request_bytes


class RestHandler(BaseHTTPRequestHandler):
    server: RestServer
    protocol_version = "HTTP/1.1"
    server_version = "amp-pipeline-serving"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        logger.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self):
        match = PATH.match(self.path.split("?", 1)[0])
        if match is None:
            raise not_found(f"Malformed request: {self.command} {self.path}")
        version = match["version"]
        if version is not None:
            if not version.isdigit():
                raise invalid(f"version must be a number, got '{version}'")
            version = int(version)
        return match["name"], version, match["action"] or ""

    def do_GET(self):  # noqa: N802 - http.server's name
        try:
            name, version, action = self._route()
            if action == ":predict":
                raise invalid(":predict needs POST")
            if action == "/metadata":
                self._send(200, self._metadata(name, version))
            else:
                self._send(
                    200, {"model_version_status": self.server.core.repository.status(name, version)}
                )
        except ServingError as e:
            self._send(e.http_status, {"error": e.message})

    def do_POST(self):  # noqa: N802 - http.server's name
        try:
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                self.close_connection = True
                raise invalid("the request needs a Content-Length header")
            length = int(length)
            if length > self.server.max_request_bytes:
                # The answer goes out before the body is read; the body is then read and thrown
                # away (no memory kept), so that a client still sending it can read the 413
                # instead of a broken pipe.
                self.close_connection = True
                self._send(413, {"error": self._too_large(length).message})
                self._discard(length)
                return
            raw = self.rfile.read(length)
            name, version, action = self._route()
            if action != ":predict":
                raise not_found(f"Malformed request: POST {self.path} (POST is for :predict)")
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise invalid(f"the request body is not JSON: {e}") from None
            self._send(200, self._predict(name, version, body))
        except ServingError as e:
            self._send(e.http_status, {"error": e.message})
        except Exception as e:  # noqa: BLE001 - the server keeps serving; the log has the trace
            logger.exception("REST request failed")
            self._send(500, {"error": f"internal error: {type(e).__name__}: {e}"})

    def _too_large(self, length: int) -> ServingError:
        return ServingError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"request body of {length} bytes is over this server's limit of "
            f"{self.server.max_request_bytes} bytes",
        )

    def handle_expect_100(self) -> bool:
        """`Expect: 100-continue` with a body over the limit: 413 instead of "continue", so the
        client never sends the body."""
        length = self.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self.server.max_request_bytes:
            self.close_connection = True
            self._send(413, {"error": self._too_large(int(length)).message})
            return False
        return super().handle_expect_100()

    def _discard(self, length: int, chunk: int = 1 << 16, timeout_s: float = DRAIN_SECONDS):
        """Reads and drops up to `length` body bytes, for at most `timeout_s` seconds."""
        self.connection.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        try:
            while length > 0 and time.monotonic() < deadline:
                data = self.rfile.read(min(chunk, length))
                if not data:
                    break
                length -= len(data)
        except OSError:
            pass  # the client gave up: nothing left to answer

    def _metadata(self, name: str, version: int | None) -> dict:
        servable = self.server.core.servable(name, version)
        return {
            "model_spec": {
                "name": servable.name,
                "signature_name": "",
                "version": str(servable.version),
            },
            "metadata": {
                "signature_def": json_format.MessageToDict(
                    servable.signature_def_map, preserving_proto_field_name=True
                )
            },
        }

    def _predict(self, name: str, version: int | None, body) -> dict:
        core = self.server.core
        servable = core.servable(name, version)
        signature_name = body.get("signature_name", "") if isinstance(body, dict) else ""
        if not isinstance(signature_name, str):
            raise invalid("'signature_name' must be a string")
        signature = servable.signature(signature_name)
        arrays, row_format = parse_rest_request(body, signature, servable.inputs[signature])
        outputs = core.predict(servable, signature, arrays, "rest")
        return to_rest_response(outputs, row_format)

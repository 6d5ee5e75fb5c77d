"""The local prediction server: TF Serving's gRPC and REST APIs over pushed SavedModels.

    with LocalServer(ServerConfig(model_dir="output/serving")) as server:
        ...  # server.grpc_port, server.rest_port

`amp-pipeline serve` runs one until SIGINT/SIGTERM. Port 0 picks a free port.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from concurrent import futures
from pathlib import Path

import grpc

from amp_pipeline.serving.batching import BatchingConfig
from amp_pipeline.serving.grpc_service import add_services
from amp_pipeline.serving.repository import ModelRepository, discover
from amp_pipeline.serving.requestlog.shadow import Shadow
from amp_pipeline.serving.requestlog.writer import RequestLog, RequestLogConfig
from amp_pipeline.serving.rest import RestServer
from amp_pipeline.serving.service import PredictionCore

logger = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Attributes:
    model_dir: one model base (`<dir>/<version>/saved_model.pb`, served under the folder's
        name or `model_name`) or a folder of model bases.
    host: address both servers bind; 127.0.0.1 keeps them off the network.
    grpc_port / rest_port: 0 picks a free port.
    model_name: serve only this model (or name the single model base).
    poll_s: how often new versions are looked for.
    max_request_bytes: largest gRPC message / REST body accepted.
    batching: server-side batching; None: every request runs on its own.
    grpc_threads: gRPC worker threads (concurrent requests in flight).
    request_log: where and how requests are logged (serving/requestlog/); None: not logged.
    shadow_version: a version run on every logged request beside production, its answers
        logged (needs request_log).
    """

    model_dir: Path
    host: str = "127.0.0.1"
    grpc_port: int = 8500
    rest_port: int = 8501
    model_name: str | None = None
    poll_s: float = 1.0
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    batching: BatchingConfig | None = BatchingConfig()
    grpc_threads: int = 16
    request_log: RequestLogConfig | None = None
    shadow_version: int | None = None


class NoModelError(ValueError):
    """--model-dir holds no servable model."""


class LocalServer:
    """Starts the repository (with its poller), the gRPC server and the REST server."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.repository = ModelRepository(Path(config.model_dir), config.model_name)
        self.core: PredictionCore | None = None
        self._grpc: grpc.Server | None = None
        self._rest: RestServer | None = None
        self.grpc_port = self.rest_port = 0

    def start(self) -> LocalServer:
        cfg = self.config
        if not discover(Path(cfg.model_dir), cfg.model_name):
            which = f"model '{cfg.model_name}'" if cfg.model_name else "model"
            raise NoModelError(
                f"--model-dir {cfg.model_dir}: no {which} there (expected "
                "<dir>/<version>/saved_model.pb or <dir>/<model>/<version>/saved_model.pb)"
            )
        self.repository.refresh()
        if not self.repository.models():
            raise NoModelError(f"--model-dir {cfg.model_dir}: no version could be loaded (see log)")
        shadow_log = self._check_shadow()
        self.repository.start_polling(cfg.poll_s)
        log = RequestLog(cfg.request_log) if cfg.request_log is not None else None
        shadow = (
            Shadow(self.repository, cfg.shadow_version, log)
            if shadow_log and log and cfg.shadow_version is not None
            else None
        )
        self.core = PredictionCore(self.repository, cfg.batching, log, shadow)
        options = [
            ("grpc.max_receive_message_length", cfg.max_request_bytes),
            ("grpc.so_reuseport", 0),
        ]
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=cfg.grpc_threads), options=options
        )
        add_services(self._grpc, self.core)
        self.grpc_port = self._grpc.add_insecure_port(f"{cfg.host}:{cfg.grpc_port}")
        if self.grpc_port == 0:
            raise OSError(f"--grpc-port {cfg.grpc_port}: cannot listen on {cfg.host} (in use?)")
        self._grpc.start()
        try:
            self._rest = RestServer((cfg.host, cfg.rest_port), self.core, cfg.max_request_bytes)
        except OSError as e:
            self.stop()
            raise OSError(f"--rest-port {cfg.rest_port}: cannot listen on {cfg.host} ({e})") from e
        self.rest_port = self._rest.server_address[1]
        threading.Thread(target=self._rest.serve_forever, name="rest", daemon=True).start()
        logger.info(
            "serving %s: gRPC %s:%d, REST http://%s:%d",
            self.repository.models(),
            cfg.host,
            self.grpc_port,
            cfg.host,
            self.rest_port,
        )
        return self

    def _check_shadow(self) -> bool:
        """Whether a shadow version runs; NoModelError naming --shadow when it cannot."""
        version = self.config.shadow_version
        if version is None:
            return False
        if self.config.request_log is None:
            raise NoModelError("--shadow needs --log-requests DIR: the shadow's answers go there")
        for model in self.repository.models():
            try:
                self.repository.get(model, version)
            except Exception as e:  # noqa: BLE001 - the repository's own message says why
                raise NoModelError(f"--shadow {version}: model {model}: {e}") from None
        return True

    def stop(self) -> None:
        if self._rest is not None:
            self._rest.shutdown()
            self._rest.server_close()
            self._rest = None
        if self._grpc is not None:
            self._grpc.stop(grace=1).wait()
            self._grpc = None
        if self.core is not None:
            self.core.close()
        self.repository.stop()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

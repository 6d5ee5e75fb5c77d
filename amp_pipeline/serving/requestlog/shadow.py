"""A shadow version: every logged request also runs on a candidate version, off the answer's
path, and the candidate's answer is logged beside production's (`serve --shadow VERSION`).

The production answer is sent first; the candidate runs later, on one thread, from a bounded
queue (full: the shadow run is skipped and counted). `monitor` pairs the two records by the
request's content (records.request_key) and reports their agreement."""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading

import numpy as np

from amp_pipeline.serving.requestlog.writer import RequestLog

logger = logging.getLogger(__name__)
_CLOSE = object()
# A shadow's record names its request's protocol and itself: "grpc/shadow", "rest/shadow".
SHADOW_ORIGIN = "/shadow"


@dataclasses.dataclass
class ShadowStats:
    runs: int = 0
    skipped: int = 0  # the queue was full
    failed: int = 0


class Shadow:
    """Runs `version` of each model on requests `offer`ed to it, and logs its answers."""

    def __init__(self, repository, version: int, log: RequestLog, queue_size: int = 256):
        self.repository, self.version, self.log = repository, version, log
        self.stats = ShadowStats()
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._thread = threading.Thread(target=self._run, name="shadow", daemon=True)
        self._thread.start()

    def offer(
        self,
        model: str,
        signature: str,
        inputs: dict[str, np.ndarray],
        signature_inputs: set,
        origin: str = "",
    ) -> None:
        try:
            self._queue.put_nowait((model, signature, inputs, signature_inputs, origin))
        except queue.Full:
            self.stats.skipped += 1

    def close(self) -> ShadowStats:
        self._queue.put(_CLOSE)
        self._thread.join()
        logger.info(
            "shadow version %d: %d requests run, %d skipped under load, %d failed",
            self.version,
            self.stats.runs,
            self.stats.skipped,
            self.stats.failed,
        )
        return self.stats

    def _run(self) -> None:
        while (item := self._queue.get()) is not _CLOSE:
            model, signature, inputs, signature_inputs, origin = item
            try:
                servable = self.repository.get(model, self.version)
                outputs = servable.run(signature, inputs)
            except Exception as e:  # noqa: BLE001 - the shadow never affects serving
                self.stats.failed += 1
                if self.stats.failed == 1:
                    logger.warning("shadow version %d failed on a request: %s", self.version, e)
                continue
            self.stats.runs += 1
            self.log.offer(
                model, self.version, signature, inputs, outputs, signature_inputs,
                f"{origin}{SHADOW_ORIGIN}",
            )  # fmt: skip

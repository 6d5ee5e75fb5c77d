"""The request log writer: answers never wait for it.

A request's arrays go into a bounded queue (`offer`: never blocks; when the queue is full the
request is dropped from the log and counted); one thread turns them into PredictionLog records
and appends them to the current file. A file is closed at `file_bytes` and a new one started;
after each rotation the oldest files go until the folder holds at most `max_bytes`, and each
removal is said in the server's log. Files are created 0600 and the folder 0700: the records
hold users' inputs.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import logging
import os
import queue
import random
import threading
import time
from pathlib import Path

import numpy as np

from amp_pipeline.serving.requestlog.records import log_files, prediction_log, without_features

logger = logging.getLogger(__name__)

REPORT_EVERY_S = 30.0  # how often new drops are said while serving
_CLOSE = object()


@dataclasses.dataclass(frozen=True)
class RequestLogConfig:
    """Attributes:
    folder: where the files go (created 0700).
    sample_rate: the share of requests logged, in (0, 1]; each request drawn independently.
    max_mb: the folder's total; the oldest files are removed beyond it.
    exclude: features never written (removed from raw inputs and from serialized examples).
    queue_size: requests waiting for the writer; beyond it, requests are dropped from the log.
    """

    folder: Path
    sample_rate: float = 1.0
    max_mb: float = 512.0
    exclude: tuple[str, ...] = ()
    queue_size: int = 1024

    def __post_init__(self) -> None:
        if not 0.0 < self.sample_rate <= 1.0:
            raise ValueError(
                "Invalid value for argument sample_rate: must be in (0, 1]. "
                f"Received: sample_rate={self.sample_rate!r}"
            )
        if not self.max_mb > 0:
            raise ValueError(
                f"Invalid value for argument max_mb: must be > 0. Received: max_mb={self.max_mb!r}"
            )

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * 2**20)

    @property
    def file_bytes(self) -> int:
        """A file's size before rotation: a quarter of the total (at least 64 KiB, at most
        64 MiB), so that removing the oldest keeps most of the window."""
        return max(64 * 2**10, min(64 * 2**20, self.max_bytes // 4))


@dataclasses.dataclass
class LogStats:
    offered: int = 0
    sampled_out: int = 0
    dropped: int = 0
    written: int = 0
    failed: int = 0
    files_removed: int = 0


SETTINGS = "settings.json"  # what a reader of the folder needs to know: what was left out


def write_settings(config: RequestLogConfig) -> None:
    """settings.json beside the records (0600): the features left out and the sampling rate,
    so that `monitor` does not read an excluded feature as one the traffic lost."""
    path = Path(config.folder) / SETTINGS
    settings = {"exclude": list(config.exclude), "sample_rate": config.sample_rate}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(settings, f)


def read_settings(folder: Path) -> dict:
    path = Path(folder) / SETTINGS
    return json.loads(path.read_text()) if path.is_file() else {"exclude": [], "sample_rate": 1.0}


class RequestLog:
    """`offer(...)` from any thread; `close()` writes what is queued and stops the thread."""

    def __init__(self, config: RequestLogConfig, rng: random.Random | None = None):
        self.config = config
        self.stats = LogStats()
        self._exclude = frozenset(config.exclude)
        self._queue: queue.Queue = queue.Queue(maxsize=config.queue_size)
        self._lock = threading.Lock()
        self._rng = rng or random.Random()
        self._writer = None
        self._file: Path | None = None
        self._file_bytes = 0
        self._sequence = itertools.count()
        self._reported_drops = 0
        self._last_report = time.monotonic()
        folder = Path(config.folder)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(folder, 0o700)
        write_settings(config)
        self._thread = threading.Thread(target=self._run, name="request-log", daemon=True)
        self._thread.start()

    def draw(self) -> bool:
        """Whether this request is logged (`sample_rate`), counted; its shadow's answer, if
        any, follows the same draw."""
        with self._lock:
            self.stats.offered += 1
            if self.config.sample_rate < 1.0 and self._rng.random() >= self.config.sample_rate:
                self.stats.sampled_out += 1
                return False
        return True

    def offer(
        self,
        model: str,
        version: int,
        signature: str,
        inputs: dict[str, np.ndarray],
        outputs: dict[str, np.ndarray],
        signature_inputs: set[str] | frozenset[str] = frozenset(),
        origin: str = "",
    ) -> bool:
        """Queues one answered request (drawn by `draw`) for the log; True when queued. Never
        blocks: with the queue full the request is dropped from the log and counted."""
        item = (
            model, version, signature, inputs, outputs, set(signature_inputs), time.time(), origin
        )  # fmt: skip
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with self._lock:
                self.stats.dropped += 1
            return False
        return True

    def close(self) -> LogStats:
        self._queue.put(_CLOSE)
        self._thread.join()
        self._report_drops(final=True)
        logger.info(
            "request log %s: %d records written (shadow answers included) for %d logged "
            "requests; %d sampled out, %d dropped under load, %d failed; %d old files removed",
            self.config.folder,
            self.stats.written,
            self.stats.offered - self.stats.sampled_out,
            self.stats.sampled_out,
            self.stats.dropped,
            self.stats.failed,
            self.stats.files_removed,
        )
        return self.stats

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=1.0)
            except queue.Empty:
                self._flush()
                self._report_drops()
                continue
            if item is _CLOSE:
                break
            try:
                self._write(item)
            except Exception:  # noqa: BLE001 - a bad record must not stop the log
                logger.exception("request log: a record could not be written")
                with self._lock:
                    self.stats.failed += 1
            self._report_drops()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _write(self, item) -> None:
        model, version, signature, inputs, outputs, signature_inputs, at, origin = item
        inputs = without_features(inputs, signature_inputs, self._exclude)
        record = prediction_log(
            model, version, signature, inputs, outputs, at, origin, self.config.sample_rate
        )
        data = record.SerializeToString()
        if self._writer is None or self._file_bytes >= self.config.file_bytes:
            self._rotate()
        assert self._writer is not None  # _rotate opened one
        self._writer.write(data)
        self._file_bytes += len(data) + 16  # TFRecord framing: length, two CRCs
        with self._lock:
            self.stats.written += 1

    def _rotate(self) -> None:
        import tensorflow as tf

        if self._writer is not None:
            self._writer.close()
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        path = Path(self.config.folder) / f"requests-{stamp}-{next(self._sequence):06d}.tfrecord"
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # owner-only
        self._writer = tf.io.TFRecordWriter(str(path))
        self._file, self._file_bytes = path, 0
        self._remove_oldest()

    def _remove_oldest(self) -> None:
        files = [f for f in log_files(Path(self.config.folder)) if f != self._file]
        total = sum(f.stat().st_size for f in files)
        while files and total + self.config.file_bytes > self.config.max_bytes:
            oldest = files.pop(0)
            total -= oldest.stat().st_size
            oldest.unlink()
            self.stats.files_removed += 1
            logger.warning(
                "request log: removed %s (the folder reached --log-max-mb %g)",
                oldest.name,
                self.config.max_mb,
            )

    def _flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def _report_drops(self, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._last_report < REPORT_EVERY_S:
            return
        self._last_report = now
        with self._lock:
            new = self.stats.dropped - self._reported_drops
            self._reported_drops = self.stats.dropped
        if new:
            logger.warning(
                "request log: %d requests not logged under load (the writer's queue of %d was "
                "full; %d in all); their answers were not delayed",
                new,
                self.config.queue_size,
                self.stats.dropped,
            )

"""Server-side batching: concurrent requests for one signature run as one model call.

TF Serving's semantics: a batch closes when it holds `max_batch_size` rows or when its oldest
request has waited `batch_timeout_s`; `num_batch_threads` batches run at a time. Requests are
batched only with requests of the same servable, signature, and per-row shapes and dtypes; a
request without a batch dimension, or with `max_batch_size` rows or more, runs alone. If a
batched call fails, each request of it runs alone, so a bad request only fails itself.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque

import numpy as np

from amp_pipeline.serving.repository import Servable


@dataclasses.dataclass(frozen=True)
class BatchingConfig:
    """Attributes mirror TF Serving's BatchingParameters.

    The defaults were measured (benchmarks/RESULTS.md, serving section): with a timeout of 0 a
    batch is whatever queued while the previous one ran, so a lone request never waits, and
    under load the requests merge by themselves.
    """

    max_batch_size: int = 64
    batch_timeout_s: float = 0.0
    num_batch_threads: int = 1

    def __post_init__(self) -> None:
        if self.max_batch_size < 1 or self.num_batch_threads < 1 or self.batch_timeout_s < 0:
            raise ValueError(
                "Invalid batching parameters: max_batch_size and num_batch_threads must be >= 1, "
                f"batch_timeout_s >= 0. Received: {self}"
            )


class _Task:
    __slots__ = ("servable", "signature", "arrays", "rows", "enqueued", "done", "result", "error")

    def __init__(self, servable: Servable, signature: str, arrays: dict, rows: int):
        self.servable, self.signature, self.arrays, self.rows = servable, signature, arrays, rows
        self.enqueued = time.monotonic()
        self.done = threading.Event()
        self.result: dict | None = None
        self.error: BaseException | None = None


class Batcher:
    """Runs `servable.run` for concurrent callers, in batches."""

    def __init__(self, config: BatchingConfig):
        self.config = config
        self._cond = threading.Condition()
        self._pending: dict[tuple, deque[_Task]] = {}
        self._closed = False
        self.batches = 0
        self.batched_requests = 0
        self._threads = [
            threading.Thread(target=self._work, name=f"batcher-{i}", daemon=True)
            for i in range(config.num_batch_threads)
        ]
        for t in self._threads:
            t.start()

    def run(self, servable: Servable, signature: str, arrays: dict[str, np.ndarray]) -> dict:
        key = self._key(servable, signature, arrays)
        if key is None:
            return servable.run(signature, arrays)
        rows = next(iter(arrays.values())).shape[0]
        task = _Task(servable, signature, arrays, rows)
        with self._cond:
            if self._closed:
                return servable.run(signature, arrays)
            self._pending.setdefault(key, deque()).append(task)
            self._cond.notify()
        task.done.wait()
        if task.error is not None:
            raise task.error
        assert task.result is not None  # the worker set one or the other
        return task.result

    def _key(self, servable: Servable, signature: str, arrays: dict) -> tuple | None:
        specs = servable.inputs[signature]
        rows = set()
        for name, a in arrays.items():
            shape = specs[name].shape
            if a.ndim == 0 or shape is None or shape[0] is not None:
                return None
            rows.add(a.shape[0])
        if len(rows) != 1 or rows.pop() >= self.config.max_batch_size:
            return None
        per_row = tuple(sorted((k, a.shape[1:], a.dtype.str) for k, a in arrays.items()))
        return (id(servable), signature, per_row)

    def _take(self) -> list[_Task] | None:
        """Waits for a batch that is full or whose oldest request timed out; pops it."""
        with self._cond:
            while True:
                if self._closed and not any(self._pending.values()):
                    return None
                ready_key, wait = None, None
                now = time.monotonic()
                for key, queue in self._pending.items():
                    if not queue:
                        continue
                    rows = sum(t.rows for t in queue)
                    left = queue[0].enqueued + self.config.batch_timeout_s - now
                    if rows >= self.config.max_batch_size or left <= 0 or self._closed:
                        ready_key = key
                        break
                    wait = left if wait is None else min(wait, left)
                if ready_key is not None:
                    queue, batch, rows = self._pending[ready_key], [], 0
                    while queue and rows + queue[0].rows <= self.config.max_batch_size:
                        rows += queue[0].rows
                        batch.append(queue.popleft())
                    if not queue:
                        del self._pending[ready_key]
                    return batch
                self._cond.wait(wait)

    def _work(self) -> None:
        while (batch := self._take()) is not None:
            self._execute(batch)

    def _execute(self, batch: list[_Task]) -> None:
        first = batch[0]
        if len(batch) > 1:
            try:
                merged = {k: np.concatenate([t.arrays[k] for t in batch]) for k in first.arrays}
                outputs = first.servable.run(first.signature, merged)
                total = sum(t.rows for t in batch)
                if all(v.ndim and v.shape[0] == total for v in outputs.values()):
                    offsets = np.cumsum([0] + [t.rows for t in batch])
                    for t, lo, hi in zip(batch, offsets[:-1], offsets[1:], strict=True):
                        t.result = {k: v[lo:hi] for k, v in outputs.items()}
                        t.done.set()
                    self.batches += 1
                    self.batched_requests += len(batch)
                    return
            except Exception:  # noqa: BLE001 - retried one by one below, each with its own error
                pass
        for t in batch:
            try:
                t.result = t.servable.run(t.signature, t.arrays)
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                t.error = e
            t.done.set()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=5)

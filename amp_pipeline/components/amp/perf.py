"""Performance measurement shared by the Trainer and the benchmark: step times and peak memory."""

from __future__ import annotations

import math
import resource
import time
from pathlib import Path

import keras
import numpy as np
import psutil


def timed_steps(model, batches, steps: int) -> float:
    """Seconds for `steps` training steps (`train_on_batch`), cycling through host `batches`."""
    start = time.perf_counter()
    for i in range(steps):
        x, y = batches[i % len(batches)]
        model.train_on_batch(x, y)
    return time.perf_counter() - start


def median(values: list[float]) -> float:
    """The median of repeated measurements (the mean of the middle two for an even count)."""
    import statistics

    return float(statistics.median(values))


def percentile_ms(seconds: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1000.0, q)) if seconds else float("nan")


class StepTimer(keras.callbacks.Callback):
    """Times every training step; the first `warmup_steps` (tracing, compilation) are excluded."""

    def __init__(self, batch_size: int, warmup_steps: int = 5):
        super().__init__()
        self.batch_size = batch_size
        self.warmup_steps = warmup_steps
        self.step_seconds: list[float] = []
        self._start = 0.0
        self._seen = 0
        self._measured_from: float | None = None
        self._measured_to: float | None = None

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()
        if self._seen == self.warmup_steps:
            self._measured_from = self._start

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self._seen >= self.warmup_steps:
            self.step_seconds.append(now - self._start)
            self._measured_to = now
        self._seen += 1

    def summary(self) -> dict:
        """examples/sec over the measured steps' wall time, and step-time percentiles."""
        n = len(self.step_seconds)
        measured = self._measured_from is not None and self._measured_to is not None
        wall = (self._measured_to - self._measured_from) if n and measured else 0.0  # type: ignore[operator]  # narrowed by `measured`
        return {
            "examples_per_sec": (n * self.batch_size / wall) if wall > 0 else float("nan"),
            "step_time_ms": {
                "p50": percentile_ms(self.step_seconds, 50),
                "p90": percentile_ms(self.step_seconds, 90),
            },
            "measured_steps": n,
            "warmup_steps": min(self._seen, self.warmup_steps),
        }


def _vm_hwm_bytes() -> int | None:
    """The process's peak resident set (VmHWM) from /proc, or None where there is no /proc."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_vm_hwm() -> bool:
    """Resets VmHWM to the current resident set (Linux >= 4.0: `5` to clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class PeakMemory:
    """Peak memory of a measured section.

    On GPU: TensorFlow's allocator peak after `reset_memory_stats`. On CPU, where
    `get_memory_info` returns zeros: the process's peak resident set during the section (VmHWM,
    reset at the start through /proc/self/clear_refs) minus the resident set at the start, so
    that neither start-up nor the other trainer counts. Each trainer runs in its own process.
    Where VmHWM cannot be reset, ru_maxrss stands in (it includes start-up's peak).
    """

    def __init__(self, device: str):
        self.device = device
        self._rss_start = 0
        self._hwm_reset = False

    @property
    def method(self) -> str:
        if self.device == "gpu":
            return "tf.config.experimental.get_memory_info('GPU:0')['peak'] after reset"
        if self._hwm_reset:
            return "CPU: peak resident set growth during fit (VmHWM reset at start), own process"
        return "CPU: ru_maxrss minus resident set at start of fit, own process"

    def start(self) -> None:
        if self.device == "gpu":
            import tensorflow as tf

            tf.config.experimental.reset_memory_stats("GPU:0")
        self._hwm_reset = _reset_vm_hwm()
        self._rss_start = psutil.Process().memory_info().rss

    def peak_mb(self) -> float:
        if self.device == "gpu":
            import tensorflow as tf

            return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
        peak = _vm_hwm_bytes() if self._hwm_reset else None
        if peak is None:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
        return max(peak - self._rss_start, 0) / 2**20


def median_and_spread(values: list[float]) -> dict:
    """Median, quartiles, min and max of repeated measurements."""
    a = np.asarray([v for v in values if v is not None and math.isfinite(v)], float)
    if a.size == 0:
        return {"median": None, "q1": None, "q3": None, "min": None, "max": None, "n": 0}
    q1, med, q3 = np.quantile(a, [0.25, 0.5, 0.75])
    return {
        "median": float(med),
        "q1": float(q1),
        "q3": float(q3),
        "min": float(a.min()),
        "max": float(a.max()),
        "n": int(a.size),
    }

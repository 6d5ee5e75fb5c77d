"""A trainer's phases timed and logged as they end (reading, shuffling, compiling and fitting,
exporting, measuring), so that a slowdown shows in `train.log` and in figures.json's `phases`."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

logger = logging.getLogger(__name__)


class Phases:
    """Seconds per named phase, in the order they ran; a phase run twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started = time.perf_counter()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times the block as `name` and logs `phase <name>: 1.2 s` when it ends."""
        started = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - started
            self.seconds[name] = self.seconds.get(name, 0.0) + took
            logger.info("phase %s: %.1f s", name, took)

    def summary(self) -> dict[str, float]:
        """{phase: seconds, ..., "total": seconds since this clock started}, rounded to 0.1 s."""
        total = time.perf_counter() - self._started
        return {**{k: round(v, 1) for k, v in self.seconds.items()}, "total": round(total, 1)}

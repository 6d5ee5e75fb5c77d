"""SIGINT and SIGTERM as an exception the run can clean up after.

While `interruptible()` is active, either signal raises `Interrupted` in the main thread
(wherever it is: inside Beam, inside a wait on a trainer process). `Interrupted` derives from
BaseException, like KeyboardInterrupt, so that no `except Exception` on the way swallows it.
A second signal during the clean-up is ignored: the clean-up is short and must finish.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

# 128 + the signal's number
EXIT_BY_SIGNAL: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Interrupted(BaseException):  # noqa: N818 - named like KeyboardInterrupt
    """The run was stopped by a signal."""

    def __init__(self, signum: int):
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.name}")

    @property
    def exit_code(self) -> int:
        return EXIT_BY_SIGNAL.get(self.signum, 128 + self.signum)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Turns SIGINT/SIGTERM into `Interrupted` inside the block."""
    fired: list[int] = []

    def handler(signum, frame):
        if fired:
            return  # already stopping
        fired.append(signum)
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in EXIT_BY_SIGNAL}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Ignores SIGINT/SIGTERM inside the block (the clean-up after an interruption)."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in EXIT_BY_SIGNAL}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)

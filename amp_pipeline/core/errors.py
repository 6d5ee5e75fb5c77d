"""Errors the CLI turns into exit codes."""

from __future__ import annotations

from collections.abc import Iterator

# Exit codes of `amp-pipeline run` (README "Exit codes"; 130/143 for signals: pipeline/signals.py).
EXIT_PROMOTED = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REJECTED = 3
EXIT_DRIFT = 4  # `amp-pipeline monitor`: skew, drift, an anomaly or prediction drift in traffic


class InputError(ValueError):
    """Bad input or usage (exit code 2). The message is one line naming the file, column or
    flag."""


def causes(error: BaseException | None) -> Iterator[BaseException]:
    """`error`, then what it was raised from or during, and so on (each once): TFX and the
    trainer wrap what a component or a child process raised."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__

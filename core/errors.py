"""Errors the CLI turns into exit codes."""

from __future__ import annotations

# Exit codes of `amp-pipeline run` (README "Exit codes"; 130/143 for signals: pipeline/signals.py).
EXIT_PROMOTED = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REJECTED = 3


class InputError(ValueError):
    """Bad input or usage (exit code 2). The message is one line naming the file, column or
    flag."""

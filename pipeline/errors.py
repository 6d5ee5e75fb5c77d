"""Errors the CLI turns into exit codes."""

from __future__ import annotations

# Exit codes of `amp-pipeline run` (DESIGN.md).
EXIT_PROMOTED = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REJECTED = 3


class InputError(ValueError):
    """Bad input or usage. The message is one line naming the file, column or flag."""

    exit_code = EXIT_BAD_INPUT

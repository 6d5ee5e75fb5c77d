"""argparse `type=` validators shared by every command: a bad value names the rule it broke."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn


def fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port 0-65535 (0: any free port), got {text}")
    return value


DELIMITER_NAMES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}


def delimiter(text: str) -> str:
    value = DELIMITER_NAMES.get(text.lower(), text)
    if len(value) != 1 or value in '\r\n"':
        raise argparse.ArgumentTypeError(
            f"must be one character (or tab, comma, semicolon, pipe), got {text!r}"
        )
    return value


def encoding(text: str) -> str:
    import codecs

    try:
        return codecs.lookup(text).name
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown encoding {text!r}") from None


def names(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return values


class Parser(argparse.ArgumentParser):
    """Usage errors as one line naming the flag, exit code 2. A flag is spelled out in full: a
    prefix (`--out` for `--output`) is refused, so a typo cannot silently set another flag."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # noqa: D102
        import re

        from amp_pipeline.core.errors import EXIT_BAD_INPUT
        from amp_pipeline.core.spelling import did_you_mean

        choice = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)
        if choice:  # argparse quotes each choice: 'a', 'b'
            message += did_you_mean(choice[1], re.findall(r"'([^']*)'", choice[2]), quote=True)
        root = self.prog.split()[0] if self.prog.startswith("amp-pipeline") else self.prog
        self.exit(EXIT_BAD_INPUT, f"{root}: error: {message} (see {self.prog} --help)\n")

"""How a subcommand explains itself: its flags in named groups, its examples and exit codes
under the flags, an old flag spelling that still works but says which one to use, and the
closest flag to a mistyped one."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from amp_pipeline.core.errors import EXIT_BAD_INPUT, EXIT_DRIFT, EXIT_FAILED, EXIT_REJECTED
from amp_pipeline.core.spelling import did_you_mean

PROG = "amp-pipeline"
EXIT_MEANINGS = {
    0: "done (run: a model shipped, the AMP twin or its float32 twin)",
    EXIT_FAILED: "something failed; the line names the log",
    EXIT_BAD_INPUT: "bad input or usage: the line names the file, column or flag",
    EXIT_REJECTED: "the gate shipped nothing: the summary names the failed rules",
    EXIT_DRIFT: "monitor: the traffic moved (skew, drift or an anomaly) or the shadow disagreed",
    130: "interrupted by Ctrl-C (143: by SIGTERM); nothing was pushed",
}


Codes = Mapping[int, str] | Iterable[int]
RUN_CODES = (0, 1, 2, 3, 130)


def epilog(examples: Sequence[str], codes: Codes = (0, 1, 2)) -> str:
    """The text under a subcommand's flags: examples, one per line, then its exit codes (a
    code's meaning is the command's own where `codes` maps it, else the shared one)."""
    meanings = codes if isinstance(codes, Mapping) else {c: EXIT_MEANINGS[c] for c in codes}
    lines = ["examples:", *(f"  {e}" for e in examples), "", "exit codes:"]
    lines += [f"  {code:<3}  {meaning}" for code, meaning in meanings.items()]
    return "\n".join(lines)


class Formatter(argparse.HelpFormatter):
    """Wraps a paragraph (the description) and keeps a text with line breaks as written (the
    epilog: one example per line)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def command(
    sub: Any, name: str, summary: str, description: str, examples: Sequence[str], codes: Codes
) -> argparse.ArgumentParser:
    """A subcommand with its one-line summary (the command list), its description (its own
    --help), and its examples and exit codes under the flags."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=epilog(examples, codes),
        usage=f"{PROG} {name} [flags]",
        formatter_class=Formatter,
    )
    return parser


class AddsFlags(Protocol):
    """A parser, an argument group or a `Grouped`: what the flag builders add flags to."""

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action: ...


class Grouped:
    """Stands in for a parser where flags are added: each flag lands in the help group whose
    list names it, so the shared flag builders need not know which command lays them out how.
    A flag no group lists is a mistake the layout test catches (it would show under
    'options')."""

    def __init__(self, parser: argparse.ArgumentParser, layout: Mapping[str, Sequence[str]]):
        self.parser = parser
        self._group_of: dict[str, Any] = {}
        for title, flags in layout.items():
            group = parser.add_argument_group(title)
            for flag in flags:
                self._group_of[flag] = group

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:
        target = self._group_of.get(names[0], self.parser)
        action: argparse.Action = target.add_argument(*names, **kwargs)
        return action


class _Renamed(argparse.Action):
    """An old spelling of a flag: stores into the new flag's destination, with a warning."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", **kwargs: Any):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option: str | None = None) -> None:
        print(
            f"{PROG}: warning: {option} is deprecated and will be removed; use {self.new}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def renamed(parser: Any, old: str, new: str, dest: str, **kwargs: Any) -> None:
    """Accepts `old` as a deprecated spelling of `new` (same value, same destination), hidden
    from the help, with a warning when used."""
    parser.add_argument(
        old, dest=dest, action=_Renamed, new=new, default=argparse.SUPPRESS,
        help=argparse.SUPPRESS, **kwargs,
    )  # fmt: skip


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings if a.help != argparse.SUPPRESS]


def unrecognized(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The usage error for arguments `parser` does not take, with the closest flag."""
    flags = option_strings(parser)
    hints = [did_you_mean(e.split("=", 1)[0], flags) for e in extras if e.startswith("--")]
    hint = next((h for h in hints if h), "")
    return f"unrecognized arguments: {' '.join(extras)}{hint}"

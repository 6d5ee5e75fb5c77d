"""The CLI reference page (docs/cli.md), generated from the argparse parsers themselves:
`python -m amp_pipeline.cli_docs > docs/cli.md`. `tests/test_cli_docs.py` fails when the page
and the parsers disagree, so the reference cannot go stale."""

from __future__ import annotations

import argparse
import sys

from amp_pipeline.cli import build_parser
from amp_pipeline.core.cli_help import subcommands

HEADER = """# CLI reference

Generated from the parsers by `python -m amp_pipeline.cli_docs > docs/cli.md` (`make docs-cli`);
a test fails when this page and the code disagree. [Commands](cli-overview.md) has an overview
with examples, and [Troubleshooting](troubleshooting.md) every exit code.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flag(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.dest}`"
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{names}`"
    metavar = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    )
    return f"`{names} {metavar}`"


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%" in text:
        try:
            text = text % {**vars(action), "prog": ""}
        except (KeyError, TypeError, ValueError):
            pass
    return _cell(text)


def command_section(name: str, parser: argparse.ArgumentParser, summary: str) -> list[str]:
    lines = [f"## `amp-pipeline {name}`", "", _cell(summary), ""]
    if parser.description:
        lines += [_cell(parser.description), ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.help != argparse.SUPPRESS]
        actions = [a for a in actions if not isinstance(a, argparse._HelpAction)]
        if not actions:
            continue
        title = "arguments" if group.title in ("options", "positional arguments") else group.title
        lines += [f"**{_cell(title or '')}**", "", "| flag | help |", "|---|---|"]
        lines += [f"| {_flag(a)} | {_help(a)} |" for a in actions]
        lines.append("")
    if parser.epilog:  # the examples and exit codes, as --help prints them
        lines += ["```text", parser.epilog, "```", ""]
    return lines


def reference() -> str:
    parser = build_parser()
    helps = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
    lines = [HEADER]
    for name, sub in subcommands(parser).items():
        lines += command_section(name, sub, helps.get(name, ""))
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    sys.stdout.write(reference())


if __name__ == "__main__":
    main()

"""The CLI explains itself: every flag has help, the reference page is the parsers' own, a
mistyped prefix is refused, and `--version` names the stack."""

from __future__ import annotations

import argparse

import pytest

from amp_pipeline.cli import build_parser, main
from amp_pipeline.cli_docs import _subparsers, reference
from tests.conftest import ROOT


def test_every_flag_of_every_command_has_help():
    missing = [
        f"{name} {a.option_strings or a.dest}"
        for name, sub in _subparsers(build_parser()).items()
        for a in sub._actions
        if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()
    ]
    assert missing == []


def test_the_cli_reference_page_is_generated_from_the_parsers():
    page = (ROOT / "docs" / "cli.md").read_text()
    assert page == reference(), "docs/cli.md is stale: run `make docs-cli`"
    for name in _subparsers(build_parser()):
        assert f"## `amp-pipeline {name}`" in page


def test_a_flag_prefix_is_refused_not_read_as_another_flag(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "--outp", "somewhere"])
    assert stop.value.code == 2
    assert "unrecognized arguments: --outp" in capsys.readouterr().err


def test_flags_can_come_from_a_file(tmp_path, capsys):
    args = tmp_path / "ci.args"
    args.write_text("run\n--outp\nx\n")
    with pytest.raises(SystemExit) as stop:
        main([f"@{args}"])
    assert stop.value.code == 2  # the file's flags were read (and the prefix refused)
    assert "--outp" in capsys.readouterr().err


def test_version_names_the_stack(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for name in ("amp-pipeline 0.1.0", "tensorflow 2.16", "tfx 1.16.0", "keras 3", "mlflow"):
        assert name in out

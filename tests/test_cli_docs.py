"""The CLI explains itself: every flag has help, the reference page is the parsers' own, a
mistyped prefix is refused, and `--version` names the stack."""

from __future__ import annotations

import argparse

import pytest

from amp_pipeline.cli import build_parser, main
from amp_pipeline.cli_docs import reference
from amp_pipeline.core.cli_help import subcommands
from tests.conftest import ROOT


def test_every_flag_of_every_command_has_help():
    missing = [
        f"{name} {a.option_strings or a.dest}"
        for name, sub in subcommands(build_parser()).items()
        for a in sub._actions
        if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()
    ]
    assert missing == []


def test_the_cli_reference_page_is_generated_from_the_parsers():
    page = (ROOT / "docs" / "cli.md").read_text()
    assert page == reference(), "docs/cli.md is stale: run `make docs-cli`"
    for name in subcommands(build_parser()):
        assert f"## `amp-pipeline {name}`" in page


def test_a_flag_prefix_is_refused_not_read_as_another_flag(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "--outp", "somewhere"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("amp-pipeline: error: unrecognized arguments: --outp")


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


COMMANDS = subcommands(build_parser())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_description_examples_and_exit_codes(name):
    text = COMMANDS[name].format_help()
    assert COMMANDS[name].description
    examples = text.split("examples:\n", 1)[1].split("\n\nexit codes:\n", 1)
    assert f"amp-pipeline {name}" in examples[0]
    assert examples[1].split()[0] == "0"  # the codes, success first


@pytest.mark.parametrize("name", ["run", "compile", "check-model", "autotune", "inspect"])
def test_the_pipeline_commands_show_every_flag_in_a_named_group(name):
    loose = [
        a.option_strings
        for group in COMMANDS[name]._action_groups
        if group.title == "options"
        for a in group._group_actions
        if not isinstance(a, argparse._HelpAction)
    ]
    assert loose == []
    titles = {g.title for g in COMMANDS[name]._action_groups if g._group_actions}
    assert "data" in titles
    if name in ("run", "compile"):
        assert {"model and training", "AMP recipe", "gate", "export"} <= titles
    if name == "compile":
        assert "cluster" in titles


# Flags whose default differs between commands on purpose, and why.
OWN_DEFAULTS = {
    "--output": "each command writes its own folder",
    "--xla": "bench compares a list of settings; the other commands pick one",
    "--grpc-port": "bench-serving starts its own server, on a free port",
    "--rest-port": "bench-serving starts its own server, on a free port",
}


def test_a_flag_has_one_default_across_commands():
    defaults: dict[str, dict[str, object]] = {}
    for name, parser in COMMANDS.items():
        for a in parser._actions:
            if a.option_strings and a.help != argparse.SUPPRESS and a.default:
                defaults.setdefault(a.option_strings[0], {})[name] = a.default
    differ = {
        flag: by
        for flag, by in defaults.items()
        if len({repr(v) for v in by.values()}) > 1 and flag not in OWN_DEFAULTS
    }
    assert differ == {}


def test_a_mistyped_flag_or_choice_gets_the_closest_one(capsys):
    for argv, hint in (
        (["run", "--trian-steps", "5"], "did you mean --train-steps?"),
        (["run", "--policy", "mixed_bfloat"], "did you mean 'mixed_bfloat16'?"),
        (["rn"], "did you mean 'run'?"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("amp-pipeline: error: ") and hint in line, line


def test_an_old_flag_spelling_still_works_and_says_which_to_use(capsys):
    args = build_parser().parse_args(["deploy-files", "--out", "somewhere"])
    assert str(args.output) == "somewhere"
    assert capsys.readouterr().err.strip() == (
        "amp-pipeline: warning: --out is deprecated and will be removed; use --output"
    )
    args = build_parser().parse_args(["predict", "--model", "digits"])
    assert args.model_name == "digits"


def test_a_label_in_the_wrong_case_is_named_with_the_column_meant(capsys):
    code = main(["inspect", "--data", str(ROOT / "tests/testdata/churn.csv"), "--label", "Churn"])
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no label column 'Churn'" in line and "did you mean 'churn'?" in line


def _make_tree(root):
    for folder in ("out/serving/digits/1", ".venv/bin", "site", ".ruff_cache"):
        (root / folder).mkdir(parents=True)
    (root / "out" / "mlflow.db").write_text("runs")
    return root


def _make(root, target, answer=""):
    import subprocess

    return subprocess.run(
        ["make", "-s", "-C", str(root), "-f", str(ROOT / "Makefile"), target, "OUTPUT=out"],
        input=answer, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_make_clean_keeps_the_pushed_models_and_the_run_history(tmp_path):
    root = _make_tree(tmp_path)
    assert _make(root, "clean").returncode == 0
    assert not (root / ".venv").exists() and not (root / "site").exists()
    assert (root / "out" / "serving" / "digits" / "1").is_dir()
    assert (root / "out" / "mlflow.db").read_text() == "runs"


def test_make_distclean_deletes_them_only_after_a_typed_yes(tmp_path):
    root = _make_tree(tmp_path)
    refused = _make(root, "distclean", "y\n")
    assert refused.returncode != 0 and "nothing deleted" in refused.stdout
    assert (root / "out" / "mlflow.db").exists() and (root / ".venv").exists()
    assert _make(root, "distclean").returncode != 0  # no answer at all: nothing either
    assert (root / "out" / "serving").exists()
    done = _make(root, "distclean", "yes\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (root / "out").exists() and not (root / ".venv").exists()

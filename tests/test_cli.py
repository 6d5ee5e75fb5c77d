"""The CLI as a user meets it: one-line errors, exit code 2, the serving folder untouched."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, clean_env, run_cli


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def output_with_pushed_model(tmp_path):
    """An output folder where an earlier run pushed a model (version 1)."""
    out = tmp_path / "out"
    version = out / "serving" / "digits" / "1"
    (version / "variables").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"earlier model")
    (version / "variables" / "variables.index").write_bytes(b"weights")
    return out


def _csv(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _broken_image_folder(tmp_path):
    from PIL import Image

    root = tmp_path / "imgs"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        Image.fromarray(np.zeros((4, 4), np.uint8)).save(root / cls / "ok.png")
    (root / "b" / "bad.jpg").write_bytes(b"\xff\xd8 truncated")
    return str(root)


BAD_INPUTS = {
    "missing path": (lambda t: ["--data", str(t / "missing.csv")], r"missing.csv: no such file"),
    "empty csv": (
        lambda t: ["--data", _csv(t, "empty.csv", "")],
        "empty.csv: the CSV file is empty",
    ),
    "missing label column": (
        lambda t: ["--data", _csv(t, "nolabel.csv", "a,b\n1,2\n3,4\n"), "--label", "y"],
        "nolabel.csv: no label column 'y'",
    ),
    "single class": (
        lambda t: ["--data", _csv(t, "one.csv", "a,y\n1,k\n2,k\n"), "--label", "y"],
        "label 'y' has a single class ('k')",
    ),
    "text in numeric column": (
        lambda t: ["--data", _csv(t, "num.csv", "a,y\n1,0\n2,1\nten,0\n4,1\n"), "--label", "y"],
        "num.csv: column 'a' is numeric but line 4 holds text 'ten'",
    ),
    "ids into a dense model": (
        lambda t: [
            "--data",
            _csv(
                t,
                "ids.csv",
                "".join(f"{i % 7},item{i % 40},{i % 2}\n" for i in range(200)).join(
                    ["user,item,y\n", ""]
                ),
            ),
            "--label",
            "y",
            "--model",
            "transformer",
        ],  # fmt: skip
        "--model transformer: it reads every column of",
    ),
    "unknown policy": (
        lambda t: ["--policy", "mixed_int4"],
        "argument --policy: invalid choice: 'mixed_int4'",
    ),
    "unreadable image": (
        lambda t: ["--data", _broken_image_folder(t)],
        "b/bad.jpg: cannot read image",
    ),
    "bad tolerance": (
        lambda t: ["--accuracy-tolerance", "5"],
        "argument --accuracy-tolerance: must be between 0 and 1",
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2_and_nothing_is_pushed(
    case, tmp_path, output_with_pushed_model
):
    make_args, expected = BAD_INPUTS[case]
    before = tree_digest(output_with_pushed_model / "serving")
    result = run_cli("run", "--output", str(output_with_pushed_model), *make_args(tmp_path))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]
    assert tree_digest(output_with_pushed_model / "serving") == before
    summary_path = output_with_pushed_model / "run_summary.json"
    if summary_path.exists():  # usage errors stop before the run starts
        summary = json.loads(summary_path.read_text())
        assert summary["exit_code"] == 2
        assert summary["exports"]["saved_model"] is None


def test_bad_input_is_refused_before_tensorflow_or_keras_loads(tmp_path):
    """The data checks come first: a missing file is one line, with neither TensorFlow nor
    Keras imported (importing them was 3.4 s of the 3.7 s it took on a 2-core Zen 4)."""
    script = (
        "import sys\n"
        "from amp_pipeline.cli import main\n"
        f"code = main(['run', '--data', {str(tmp_path / 'missing.csv')!r}, "
        f"'--output', {str(tmp_path / 'out')!r}])\n"
        "print(code, sorted({'keras', 'tensorflow'} & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=clean_env(), capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.stdout.strip().splitlines()[-1] == "2 []", result.stdout + result.stderr
    assert "missing.csv: no such file" in result.stderr


def test_doctor_names_the_hardware_and_the_recipe():
    result = run_cli("doctor")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "device:" in out and "policy:" in out and "reason:" in out
    policy = next(ln.split()[-1] for ln in out.splitlines() if ln.startswith("policy:"))
    assert policy in ("float32", "mixed_bfloat16", "mixed_float16")


def _module_file(tmp_path, case):
    from tests.test_model_module import BAD_MODULES

    path = tmp_path / "bad.py"
    path.write_text(BAD_MODULES[case][0])
    return str(path)


BAD_MODULE_CASES = [
    "no build_model",
    "raises on import",
    "imports a missing package",
    "raises on build",
    "not a keras.Model",
    "wrong class count",
    "two outputs",
]


@pytest.mark.e2e
@pytest.mark.parametrize("case", BAD_MODULE_CASES + ["missing file", "missing import path"])
def test_a_broken_model_module_is_one_line_exit_2_before_any_work(
    case, tmp_path, output_with_pushed_model
):
    from tests.test_model_module import BAD_MODULES

    if case == "missing file":
        module, expected = str(tmp_path / "nope.py"), "--model-module"
    elif case == "missing import path":
        module, expected = "my_team.no_such_models", "my_team.no_such_models: no such module"
    else:
        module, expected = _module_file(tmp_path, case), BAD_MODULES[case][1]
        expected = expected.replace("expected (batch, 3)", "expected (batch, 10)")  # the digits
    before = tree_digest(output_with_pushed_model / "serving")
    result = run_cli("run", "--output", str(output_with_pushed_model), "--model-module", module)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert expected in line and ("bad.py" in line or case.startswith("missing")), line
    assert "CsvExampleGen" not in result.stdout  # stopped before the pipeline started
    assert tree_digest(output_with_pushed_model / "serving") == before
    summary = json.loads((output_with_pushed_model / "run_summary.json").read_text())
    assert summary["status"] == "bad_input" and summary["exports"]["saved_model"] is None

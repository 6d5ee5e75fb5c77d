"""Interrupted, concurrent and hostile runs, reproduced with real processes and real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from tests.conftest import ROOT, clean_env, run_cli
from tests.helpers import CHEAP

pytestmark = pytest.mark.e2e
# Long enough that the trainers are still training when the test acts on them.
SLOW = ("--train-steps", "3000", "--tflite", "none", "--min-speedup", "0")


class Run:
    """`amp-pipeline run` in the background, its output collected line by line."""

    def __init__(self, out: Path, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "amp_pipeline", "run", "--output", str(out), *args],
            cwd=ROOT,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def trainer(self, timeout: float = 240) -> psutil.Process:
        """The trainer process under this run, once it has started."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "".join(self.lines) + self.proc.stderr.read()
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                try:
                    if "amp_pipeline.components.training.process" in " ".join(child.cmdline()):
                        return child
                except psutil.Error:
                    continue
            time.sleep(0.2)
        raise AssertionError("no trainer started: " + "".join(self.lines))

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code, "".join(self.lines), self.proc.stderr.read()


def _gone(proc: psutil.Process, timeout: float = 20) -> bool:
    try:
        proc.wait(timeout=timeout)
    except psutil.TimeoutExpired:
        return False
    except psutil.NoSuchProcess:
        pass
    return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE


def _summary(out: Path) -> dict:
    return json.loads((out / "run_summary.json").read_text())


def _mlflow_run(out: Path, run_id: str):
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{out / 'mlflow.db'}").get_run(run_id)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("reliability") / "out"


def test_a_second_run_on_a_busy_folder_is_refused_and_sigterm_stops_the_first(out):
    first = Run(out, *SLOW)
    trainer = first.trainer()
    second = run_cli("run", "--output", str(out), *SLOW)
    assert second.returncode == 2, second.stdout + second.stderr
    (line,) = second.stderr.strip().splitlines()
    assert f"another amp-pipeline run is using it (pid {first.proc.pid} on" in line
    assert "CsvExampleGen" not in second.stdout

    first.proc.send_signal(signal.SIGTERM)
    code, stdout, stderr = first.finish()
    assert code == 143, stdout + stderr
    (line,) = stderr.strip().splitlines()
    assert "stopped: interrupted by SIGTERM during Trainer" in line
    assert _gone(trainer), "the trainer outlived its run"
    summary = _summary(out)
    assert summary["status"] == "interrupted" and summary["exit_code"] == 143
    assert summary["signal"] == "SIGTERM"
    run = _mlflow_run(out, summary["mlflow"]["run_id"])
    assert run.info.status == "KILLED"
    assert "interrupted by SIGTERM" in run.data.tags["error"]
    assert not (out / "serving").exists()


def test_ctrl_c_stops_with_one_line_and_exit_130(out):
    run = Run(out, *SLOW, "--seed", "7")
    trainer = run.trainer()
    run.proc.send_signal(signal.SIGINT)
    code, stdout, stderr = run.finish()
    assert code == 130, stdout + stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert "interrupted by SIGINT" in stderr
    assert _gone(trainer)
    summary = _summary(out)
    assert summary["status"] == "interrupted" and summary["exit_code"] == 130
    assert _mlflow_run(out, summary["mlflow"]["run_id"]).info.status == "KILLED"


def test_a_killed_driver_takes_its_trainer_and_the_next_run_cleans_up(out):
    run = Run(out, *SLOW, "--seed", "8")
    trainer = run.trainer()
    mlflow_line = next(ln for ln in run.lines if ln.strip().startswith("mlflow:"))
    stale_id = mlflow_line.split()[-1]
    run.proc.kill()  # SIGKILL: no handler runs
    run.finish()
    assert _gone(trainer), "the trainer kept training into an abandoned folder"
    # What a killed run leaves: a summary that says it never finished, never a stale verdict.
    assert _summary(out)["status"] == "running"
    assert _mlflow_run(out, stale_id).info.status == "RUNNING"
    partial = out / "serving" / "digits" / ".push-123-deadbeef"
    partial.mkdir(parents=True)

    result = run_cli(
        "run", "--output", str(out), "--train-steps", "30", *CHEAP,
        "--accuracy-tolerance", "1", "--min-speedup", "0",
    )  # fmt: skip
    assert result.returncode in (0, 3), result.stdout + result.stderr
    assert f"MLflow run {stale_id} was left RUNNING by a killed run; marked FAILED" in (
        result.stdout
    )
    assert "removed" in result.stdout and ".push-123-deadbeef" in result.stdout
    stale = _mlflow_run(out, stale_id)
    assert stale.info.status == "FAILED" and stale.data.tags["error"].startswith("stale:")
    assert not partial.exists()
    summary = _summary(out)
    if summary["status"] == "promoted":
        pushed = Path(summary["exports"]["saved_model"])
        assert pushed.parent == out / "serving" / "digits" and pushed.name.isdigit()
        assert [p.name for p in pushed.parent.iterdir()] == [pushed.name]


def test_unusable_output_and_oversized_batch_are_refused_before_any_work(tmp_path):
    a_file = tmp_path / "taken"
    a_file.write_text("")
    for output, message in (
        (a_file, "is a file, not a folder"),
        (Path("/sys/amp-pipeline-out"), "not writable"),
    ):
        result = run_cli("run", "--output", str(output))
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert f"--output {output}: {message}" in line
    out = tmp_path / "out"
    result = run_cli("run", "--output", str(out), "--batch-size", "100000")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "--batch-size 100000: larger than the train split (about 1,437 of the 1,797" in line
    result = run_cli(
        "run", "--output", str(out), "--model", "resnet50", "--image-size", "224",
        "--batch-size", "1024",
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "--batch-size 1024: a training step would need about" in line and "use at most" in line
    assert _summary(out)["status"] == "bad_input"
    assert not (out / "serving").exists()


def test_a_useless_model_is_rejected_however_close_its_twins_are(tmp_path):
    """200 random classes: both twins learn nothing, so parity holds; the majority-class
    baseline rejects the AMP model."""
    rng = np.random.default_rng(0)
    path = tmp_path / "noise.csv"
    rows = [f"{rng.normal():.4f},{rng.normal():.4f},c{rng.integers(200)}" for _ in range(2000)]
    path.write_text("a,b,label\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    result = run_cli(
        "run", "--data", str(path), "--output", str(out), "--train-steps", "60",
        "--tflite", "none", "--speed-rounds", "0",
        "--accuracy-tolerance", "1", "--min-speedup", "0",
    )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    assert "FAIL     beats_majority" in result.stdout
    decision = json.loads((out / "decision.json").read_text())
    assert "beats_majority" in decision["failed"]
    baseline = decision["majority_baseline"]
    assert baseline["examples"] > 300 and 0 < baseline["share"] < 0.05
    assert "always predicting the most common class" in (out / "decision.md").read_text()
    assert not (out / "serving").exists()


FULL_DISK_MODULE = '''
import errno
import sys

import keras


def build_model(spec):
    """The driver builds it to size the batch; the trainer's process finds its disk full."""
    main = getattr(sys.modules["__main__"].__spec__, "name", "")
    if main == "amp_pipeline.components.training.process":
        raise OSError(errno.ENOSPC, "No space left on device", "/srv/out/model_run/checkpoint")
    inputs = keras.Input((spec.input_width,), name="x")
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(inputs)
    return keras.Model(inputs, outputs)
'''


def test_a_full_disk_in_the_trainer_process_ends_the_run_in_one_line_exit_2(tmp_path):
    """ENOSPC in a child process (simulated: the trainer's model module raises it; a real
    300 MB tmpfs filled mid-run gave the same line, RESULTS.md) reaches the user as one line
    naming the device and the path, exit 2; the log it names exists."""
    module = tmp_path / "full_disk.py"
    module.write_text(FULL_DISK_MODULE)
    data = tmp_path / "t.csv"
    rng = np.random.default_rng(0)
    data.write_text(
        "a,b,label\n" + "".join(f"{rng.normal():.3f},{i % 5},{i % 2}\n" for i in range(300))
    )
    out = tmp_path / "out"
    result = run_cli(
        "run", "--data", str(data), "--output", str(out), "--model-module", str(module),
        "--train-steps", "5", "--tflite", "none", "--speed-rounds", "0",
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("amp-pipeline: error: no space left on ")
    assert "writing /srv/out/model_run/checkpoint: " in line and "this run needs about" in line
    assert _summary(out)["status"] == "bad_input"
    log = (out / "logs" / "tfx.log").read_text()
    assert "Errno 28" in log
    assert not (out / "serving").exists()

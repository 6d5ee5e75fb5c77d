"""Children that die with their parent, set up without unsafe work between fork and exec."""

import subprocess
import sys

PR_GET_PDEATHSIG = (
    "import ctypes, signal; libc = ctypes.CDLL(None); v = ctypes.c_int(); "
    "libc.prctl(2, ctypes.byref(v), 0, 0, 0); print(v.value)"  # 2 = PR_GET_PDEATHSIG
)


def test_the_child_gets_sigterm_as_death_signal_without_a_library_search(monkeypatch):
    import ctypes.util

    from core.child_process import die_with_parent

    def no_search(*args, **kwargs):
        raise AssertionError("find_library runs a subprocess: unsafe in a preexec_fn")

    # Anything that searches for libraries or starts processes in the forked child fails.
    monkeypatch.setattr(ctypes.util, "find_library", no_search)
    out = subprocess.run(
        [sys.executable, "-c", PR_GET_PDEATHSIG],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=die_with_parent,
    )
    assert out.stdout.strip() == "15"  # SIGTERM
    # Without it a child has no death signal: the check above measures something.
    plain = subprocess.run(
        [sys.executable, "-c", PR_GET_PDEATHSIG], capture_output=True, text=True, check=True
    )
    assert plain.stdout.strip() == "0"


def test_run_module_finds_the_project_from_any_folder_and_logs_the_output(tmp_path, monkeypatch):
    """The trainers, autotune's probes and the speed measurement start `python -m` children
    through it: the project must import in the child whatever the working folder."""
    from core.child_process import PROJECT_ROOT, run_module

    assert (PROJECT_ROOT / "components" / "gate" / "speed.py").is_file()
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "child.log"
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    proc = run_module("core.names", [], log, env=env)  # importable, runs nothing
    assert proc.returncode == 0, log.read_text()
    proc = run_module("components.gate.no_such_module", [], log, env=env)
    assert proc.returncode != 0 and "No module named components.gate.no_such_module" in (
        log.read_text()
    )

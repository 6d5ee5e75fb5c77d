"""Child processes (trainers, autotune's probes, the speed measurement) that never outlive the
run that made them.

`run_module` starts `python -m <module>` from this project with its output in a log file;
`die_with_parent` asks Linux to send SIGTERM to the child when its parent dies, however the
parent dies (SIGKILL included); `watch_parent` is the portable fallback inside the child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# The folder that holds the project's packages (core/ is one of them).
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _resolve_prctl():
    """libc's prctl, resolved once in the parent (the symbols already loaded in this process:
    no library search, no subprocess), or None where there is none (not Linux)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _resolve_prctl()
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """`preexec_fn` of a child: SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG).

    It runs between fork and exec, where a multi-threaded parent's child may only do
    async-signal-safe work: one system call through a function pointer resolved at import,
    nothing that searches for libraries or starts processes."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    # else not Linux: watch_parent in the child remains


def watch_parent(interval: float = 1.0) -> None:
    """In the child: exits when the parent process is gone (it is re-parented)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(143)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def run_module(
    module: str, args: list[str], log_path: str | Path, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Runs `python -m module args...` to completion with this project importable, its stdout
    and stderr in `log_path`, no standard input, and SIGTERM when this process dies.

    Waiting is interruptible: subprocess.run kills the child if the wait is interrupted.
    """
    env = dict(os.environ if env is None else env)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    with open(log_path, "w") as log:
        return subprocess.run(
            [sys.executable, "-m", module, *map(str, args)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
            preexec_fn=die_with_parent,
        )

"""Child processes (trainers, autotune's probes, the speed measurement) that never outlive the
run that made them.

`run_module` starts `python -m amp_pipeline.core.child_process <module> ...` from this project with
its output in a log file. That small bootstrap, in the child, asks Linux to send it SIGTERM when its
parent dies, however the parent dies (SIGKILL included), exits if the parent is already gone, and
then runs `<module>` as `__main__`. `watch_parent` is the portable fallback where there is no prctl.

Why not `preexec_fn`: with a `preexec_fn`, Python's subprocess must `fork()` (no vfork), and
fork runs gRPC's atfork handlers. Since grpcio 1.81 (grpc/grpc#43055) the child's handler
restarts gRPC's epoll poller thread, `close_fds` then closes the poller's epoll descriptor, and
the thread aborts the child before it reaches `exec`: the "Epoll1Poller encountered epoll_wait
error: Bad file descriptor" SIGABRT (exit -6) that killed trainers in the test suite now and
then. Every run's driver has gRPC loaded (Beam, TFX, MLflow), so the death signal is set after
`exec`, in the child, where no fork handler runs.
"""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import amp_pipeline

# The folder that holds the `amp_pipeline` package: a checkout's root, or site-packages for a
# wheel. Only that folder goes on a child's path, never the package's own folders: a bare
# `import core` must not start to work in the child.
PROJECT_ROOT = Path(amp_pipeline.__file__).resolve().parent.parent
PARENT_ENV = "AMP_PIPELINE_PARENT_PID"


def _resolve_prctl() -> Callable[..., int] | None:
    """libc's prctl, or None where there is none (not Linux)."""
    import ctypes

    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):
        return None


PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In the child: SIGTERM when `parent` dies; exits at once if it has died already (the
    child was re-parented before the death signal was set)."""
    prctl = _resolve_prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    else:  # not Linux
        watch_parent()
    if os.getppid() != parent:
        os._exit(143)


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
    module: str,
    args: Sequence[str | os.PathLike[str] | int],
    log_path: str | Path,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Runs `module` as `python -m module args...` to completion with this project importable,
    its stdout and stderr in `log_path`, no standard input, and SIGTERM when this process dies.

    Waiting is interruptible: subprocess.run kills the child if the wait is interrupted.
    """
    env = dict(os.environ if env is None else env)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    env[PARENT_ENV] = str(os.getpid())
    with open(log_path, "w") as log:
        return subprocess.run(
            [sys.executable, "-m", "amp_pipeline.core.child_process", module, *map(str, args)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
        )


def main(argv: list[str]) -> None:
    """`python -m amp_pipeline.core.child_process <module> args...`: the death signal, then the
    module."""
    if len(argv) < 2:
        sys.exit("usage: python -m amp_pipeline.core.child_process MODULE [ARGS...]")
    parent = os.environ.pop(PARENT_ENV, None)
    if parent is not None:
        die_with_parent(int(parent))
    module = argv[1]
    sys.argv = [module, *argv[2:]]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except ImportError as e:
        if getattr(e, "name", None) is None and str(e).startswith("No module named"):
            sys.exit(f"{sys.executable}: {e}")  # as `python -m` says it
        raise


if __name__ == "__main__":
    main(sys.argv)

"""Child processes (trainers, the validation server) that never outlive the run that made them.

`die_with_parent` asks Linux to send SIGTERM to the child when its parent dies, however the
parent dies (SIGKILL included); `watch_parent` is the portable fallback inside the child.
"""

from __future__ import annotations

import os
import signal
import threading
import time


def die_with_parent() -> None:
    """`preexec_fn` of a child: SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: watch_parent in the child remains


def watch_parent(interval: float = 1.0) -> None:
    """In the child: exits when the parent process is gone (it is re-parented)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(143)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()

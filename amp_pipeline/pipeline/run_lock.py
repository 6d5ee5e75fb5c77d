"""One run per output folder: an exclusive lock, and the checks that the folder is usable.

The lock is `flock` on `<output>/.amp-pipeline.lock`: the kernel drops it when the holding
process dies, however it dies, so a killed run never leaves the folder locked. The file names
the holder (pid, host, command, start time) for the message the next run prints.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import socket
import sys
from pathlib import Path

from amp_pipeline.core.errors import InputError

LOCK_NAME = ".amp-pipeline.lock"


def check_output(output: Path, flag: str = "--output") -> None:
    """The output folder exists (or can be made) and is writable; InputError otherwise."""
    if output.exists() and not output.is_dir():
        raise InputError(f"{flag} {output}: is a file, not a folder")
    try:
        output.mkdir(parents=True, exist_ok=True)
        probe = output / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise InputError(f"{flag} {output}: not writable ({e.strerror or e})") from None


class OutputLock:
    """Held for a whole run; a second holder gets InputError naming the first."""

    def __init__(self, output: Path, what: str = "run"):
        self.path = output / LOCK_NAME
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise InputError(
                f"--output {self.path.parent}: another amp-pipeline {holder.get('what', 'run')} "
                f"is using it (pid {holder.get('pid', '?')} on {holder.get('host', '?')}, "
                f"started {holder.get('started', '?')}); wait for it, or use another --output"
            ) from None
        os.ftruncate(fd, 0)
        os.write(
            fd,
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "what": self.what,
                    "started": datetime.datetime.now().isoformat(timespec="seconds"),
                    "command": " ".join(sys.argv),
                }
            ).encode(),
        )
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return json.loads(os.read(fd, 65536).decode() or "{}")
    except (OSError, ValueError):
        return {}

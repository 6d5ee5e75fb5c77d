"""Before any work: will a local run fit this machine's memory and disk?

A run that dies of memory or a full disk after half an hour of work is the worst way to learn
the input was too large. This check estimates the run's peak memory and disk from the input's
size before ExampleGen starts, and refuses (exit 2, one line) or warns.

The estimates are the scale benchmark's measurements (benchmarks/RESULTS.md, "Scale"), with
margin:

- **Memory.** Since the driver stopped holding per-example data (ExampleGen's splits, the
  gate's evidence; TFMA on a bounded sample) its peak no longer grows with the rows:
  DRIVER_MB, measured flat from 1M to 3M rows (2.07 and 2.17 GB). Beside it run one trainer
  process at a time (TRAINER_MB plus the train split, which it holds in memory up to 256 MiB)
  and, with `--beam-workers N` > 1, N Beam worker processes of WORKER_MB each.
- **Disk.** The output folder holds ExampleGen's gzipped tf.Examples, Transform's output and the
  models: DISK_PER_INPUT_BYTE times the input's size (a gzipped file counts uncompressed: the
  ratio measured on its first 4 MiB), plus DISK_BASE_MB (the embedded run writes about 15 MB),
  plus, for a train split trained from files, the trainer's shuffled copy of it
  (components/training/datasets.py), float32 rows as they are in memory.

A disk that fills anyway ends the run with one line (disk_full): the device, the path, what is
free and what the run needs, exit 2.

Cluster runners (Dataflow, Flink, Spark) keep the data off this machine: nothing is checked.
"""

from __future__ import annotations

import dataclasses
import errno
import re
import shutil
import zlib
from pathlib import Path

from amp_pipeline.core.errors import InputError, causes

# Measured on a 2-core Zen 4 with a 65-column CSV (benchmarks/RESULTS.md, "Scale"): the
# driver's peak 2,072 MB at 1M rows and 2,165 MB at 3M (1,864 and 1,929 MB before Transform's
# 8,192-row batches); a trainer process 1.1 GB; the output
# folder 1.5 times the input (511 MB for 338 MiB, 1,519 MB for 1,014 MiB). A DirectRunner worker
# at --beam-workers 2 peaked at 3.0 GB at 1M rows before the driver's fixes (not measured since).
DRIVER_MB = 2500
TRAINER_MB = 1300
WORKER_MB = 3000
IN_MEMORY_TRAIN_MB = 256  # components/training/datasets.py IN_MEMORY_MAX_BYTES
DISK_PER_INPUT_BYTE = 2.0
DISK_BASE_MB = 200
GZIP_SAMPLE_BYTES = 4 * 2**20
WARN_SHARE = 0.8  # warn above this share of what is available


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A run's expected peak memory and disk, in MB."""

    memory_mb: float
    disk_mb: float


def uncompressed_bytes(path: Path, sample: int = GZIP_SAMPLE_BYTES) -> int:
    """A gzip file's uncompressed size: exact when the file is within `sample` bytes, else its
    size times the ratio measured on its first `sample` bytes (the gzip trailer's size field
    holds only the last member's size, modulo 4 GiB)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        data = f.read(sample)
    out, consumed = 0, 0
    while data:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += len(member.decompress(data))
        except zlib.error:
            break
        used = len(data) - len(member.unused_data)
        consumed += used
        data = member.unused_data
    if not consumed:
        return size
    return round(out * size / consumed) if size > consumed else out


def input_bytes(path: str | Path) -> int:
    """The input's size: a file's, or every file's under a folder; gzipped files uncompressed."""
    p = Path(path)
    files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
    return sum(uncompressed_bytes(f) if f.name.endswith(".gz") else f.stat().st_size for f in files)


def estimate(size: int, workers: int, train_bytes: int = 0) -> Estimate:
    """The estimate for an input of `size` bytes on `workers` DirectRunner workers; a train
    split of `train_bytes` (float32 rows) past the in-memory bound adds its shuffled copy."""
    beam = workers * WORKER_MB if workers > 1 else 0
    memory = DRIVER_MB + TRAINER_MB + IN_MEMORY_TRAIN_MB + beam
    copy = train_bytes if train_bytes > IN_MEMORY_TRAIN_MB * 2**20 else 0
    return Estimate(memory, (DISK_PER_INPUT_BYTE * size + copy) / 2**20 + DISK_BASE_MB)


def _free_disk_mb(folder: Path) -> float:
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return shutil.disk_usage(existing).free / 2**20


def _available_memory_mb() -> float:
    import psutil

    return psutil.virtual_memory().available / 2**20


def _gb(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:,.0f} MB"


def check(
    data: str | Path,
    output: Path,
    workers: int,
    free_disk_mb: float | None = None,
    available_mb: float | None = None,
    train_bytes: int = 0,
) -> list[str]:
    """Raises InputError when the run will not fit; returns warnings when it is close."""
    size = input_bytes(data)
    need = estimate(size, workers, train_bytes)
    disk = _free_disk_mb(output) if free_disk_mb is None else free_disk_mb
    memory = _available_memory_mb() if available_mb is None else available_mb
    if need.disk_mb > disk:
        raise InputError(
            f"--output {output}: this run needs about {_gb(need.disk_mb)} of disk for "
            f"{data} ({_gb(size / 2**20)}), and {_gb(disk)} is free there; free space, "
            "choose another --output, or run on a cluster runner (--beam dataflow|flink|spark)"
        )
    if need.memory_mb > memory:
        fewer = estimate(size, 1).memory_mb <= memory and workers > 1
        raise InputError(
            f"--beam-workers {workers}: this run needs about {_gb(need.memory_mb)} of memory "
            f"and {_gb(memory)} is available; "
            + (
                "use --beam-workers 1"
                if fewer
                else "free memory or run on a cluster runner (--beam dataflow|flink|spark)"
            )
        )
    warnings = []
    if need.disk_mb > WARN_SHARE * disk:
        warnings.append(
            f"the run needs about {_gb(need.disk_mb)} of the {_gb(disk)} free under {output}"
        )
    if need.memory_mb > WARN_SHARE * memory:
        warnings.append(
            f"the run needs about {_gb(need.memory_mb)} of the {_gb(memory)} of memory "
            f"available (--beam-workers {workers})"
        )
    return warnings


# The OS's words, and SQLite's (ML Metadata's store) for the same thing.
NO_SPACE = re.compile(r"No space left on device|ENOSPC|\[Errno 28\]|database or disk is full")


def _no_space(error: BaseException) -> tuple[bool, str | None]:
    """Whether `error`, or an error it was raised from, is a full disk, and the path named."""
    for cause in causes(error):
        if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
            return True, cause.filename
        text = str(cause)
        if NO_SPACE.search(text):  # a child process's last line, a TensorFlow error
            named = re.search(r"No space left on device: '([^']+)'", text)
            return True, named.group(1) if named else None
    return False, None


def device_of(path: Path) -> str:
    """'DEVICE (mounted on MOUNT)' for the filesystem that holds `path`."""
    import psutil

    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    resolved = str(existing.resolve())
    mounts = [
        p
        for p in psutil.disk_partitions(all=True)
        if resolved.startswith(p.mountpoint.rstrip("/") + "/") or resolved == p.mountpoint
    ]
    if not mounts:
        return resolved
    mount = max(mounts, key=lambda p: len(p.mountpoint))
    return f"{mount.device} (mounted on {mount.mountpoint})"


def disk_full(
    error: BaseException, output: Path, data: str | Path | None, workers: int, train_bytes: int = 0
) -> InputError | None:
    """The one-line error for a run that filled its disk, or None when `error` is not that."""
    full, path = _no_space(error)
    if not full:
        return None
    where = Path(path) if path else output
    need = estimate(input_bytes(data) if data else 0, workers, train_bytes).disk_mb
    return InputError(
        f"no space left on {device_of(where)} writing {where}: {_free_disk_mb(where):,.0f} MB "
        f"free, this run needs about {need:,.0f} MB"
    )

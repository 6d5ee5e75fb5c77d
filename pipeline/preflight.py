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
  models: DISK_PER_INPUT_BYTE times the input's size, plus DISK_BASE_MB.

Cluster runners (Dataflow, Flink, Spark) keep the data off this machine: nothing is checked.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from core.errors import InputError

# Measured on a 2-core Zen 4 with a 65-column CSV (benchmarks/RESULTS.md, "Scale"): the
# driver's peak 2,072 MB at 1M rows and 2,165 MB at 3M (1,864 and 1,929 MB before Transform's
# 8,192-row batches); a trainer process 1.1 GB; the output
# folder 1.5 times the input (511 MB for 338 MiB, 1,519 MB for 1,014 MiB). A DirectRunner worker
# at --beam-workers 2 peaked at 3.0 GB at 1M rows before the driver's fixes (not measured since).
DRIVER_MB = 2500
TRAINER_MB = 1300
WORKER_MB = 3000
IN_MEMORY_TRAIN_MB = 256  # components/training/job.py IN_MEMORY_MAX_BYTES
DISK_PER_INPUT_BYTE = 2.0
DISK_BASE_MB = 200
WARN_SHARE = 0.8  # warn above this share of what is available


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A run's expected peak memory and disk, in MB."""

    memory_mb: float
    disk_mb: float


def input_bytes(path: str | Path) -> int:
    """The input's size: a file's, or every file's under a folder."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def estimate(size: int, workers: int) -> Estimate:
    """The estimate for an input of `size` bytes on `workers` DirectRunner workers."""
    beam = workers * WORKER_MB if workers > 1 else 0
    memory = DRIVER_MB + TRAINER_MB + IN_MEMORY_TRAIN_MB + beam
    return Estimate(memory, DISK_PER_INPUT_BYTE * size / 2**20 + DISK_BASE_MB)


def _free_disk_mb(folder: Path) -> float:
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return shutil.disk_usage(existing).free / 2**20


def _available_memory_mb() -> float:
    import psutil

    return psutil.virtual_memory().available / 2**20


def _gb(mb: float) -> str:
    return f"{mb / 1024:.1f} GB"


def check(
    data: str | Path,
    output: Path,
    workers: int,
    free_disk_mb: float | None = None,
    available_mb: float | None = None,
) -> list[str]:
    """Raises InputError when the run will not fit; returns warnings when it is close."""
    size = input_bytes(data)
    need = estimate(size, workers)
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

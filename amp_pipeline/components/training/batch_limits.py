"""Bounds on the batch size: no larger than the train split, and activations that fit in memory.

An unbounded `--batch-size 100000` grew a trainer to 15 GB before it failed. The driver checks
the user's batch before any work (pipeline/local_runner.py); autotune keeps its larger
candidates within the same bounds (components/training/autotune.py).
"""

from __future__ import annotations

import logging
import math

from amp_pipeline.core.errors import InputError

logger = logging.getLogger(__name__)

TRAIN_SHARE = 0.8  # ExampleGen's split: 4 hash buckets of 5
MEMORY_SHARE = 0.5  # of the memory available now, what one training step may take
ACTIVATION_FACTOR = 3  # forward activations, their gradients, and the optimizer's transients


def activation_bytes_per_example(model) -> int | None:
    """Bytes of every layer output for one example in float32 (None where shapes are unknown:
    a subclassed model)."""
    from amp_pipeline.components.amp.rules import layers_of

    total = 0
    for layer in layers_of(model):
        try:
            shape = layer.output.shape
        except (AttributeError, ValueError):
            return None
        if shape is None or any(d is None for d in shape[1:]):
            return None
        total += math.prod(shape[1:]) * 4
    return total or None


def available_bytes() -> int:
    import psutil

    return psutil.virtual_memory().available


def max_batch(model, rows: int, available: int | None = None) -> int:
    """The largest batch within both bounds (the train split only, where shapes are unknown)."""
    train = max(int(rows * TRAIN_SHARE), 1)
    per_example = activation_bytes_per_example(model) if model is not None else None
    if per_example is None:
        return train
    budget = (available if available is not None else available_bytes()) * MEMORY_SHARE
    return max(1, min(train, int(budget // (per_example * ACTIVATION_FACTOR))))


def check_batch_size(batch_size: int, rows: int, model=None, available: int | None = None) -> None:
    """InputError naming --batch-size when a batch exceeds the train split or memory."""
    train = int(rows * TRAIN_SHARE)
    if batch_size > train:
        raise InputError(
            f"--batch-size {batch_size}: larger than the train split (about {train:,} of the "
            f"{rows:,} examples); use at most {max(train, 1):,}"
        )
    per_example = activation_bytes_per_example(model) if model is not None else None
    if per_example is None:
        return
    budget = (available if available is not None else available_bytes()) * MEMORY_SHARE
    need = batch_size * per_example * ACTIVATION_FACTOR
    if need > budget:
        largest = max(int(budget // (per_example * ACTIVATION_FACTOR)), 1)
        raise InputError(
            f"--batch-size {batch_size}: a training step would need about {need / 2**30:.1f} GB "
            f"({per_example * ACTIVATION_FACTOR / 2**10:,.0f} KB per example: activations, "
            f"their gradients and the optimizer's), more than half of the "
            f"{budget / MEMORY_SHARE / 2**30:.1f} GB available; use at most {largest:,}"
        )
    logger.info("batch %d: about %.1f MB per step for activations", batch_size, need / 2**20)

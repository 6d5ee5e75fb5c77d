"""The largest batch that trains under a memory budget, per precision ("twice the batch on the
same card").

The search doubles the batch from a start until a batch does not fit, then bisects between the
last batch that fit and the first that did not, within a time budget. A batch fits when a fresh
process trains it without running out of memory and its measured peak stays within the budget.
On a GPU under JAX the budget is also a hard cap: XLA_PYTHON_CLIENT_MEM_FRACTION limits JAX's
allocator to it, like a card of that size. A CPU has no such cap; there the measured peak alone
decides.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable


@dataclasses.dataclass
class Search:
    """What the search found: the largest batch that fit, every batch tried, and whether the
    time budget cut it short (then the answer is a lower bound)."""

    max_batch: int | None
    first_failed: int | None
    tried: list[dict]
    bounded: bool

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def search(
    fits: Callable[[int], dict],
    start: int,
    limit: int,
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> Search:
    """Doubling from `start` up to `limit`, then bisection, while `budget_s` lasts.

    `fits(batch)` returns {"fits": bool, ...figures}; it is called at most once per batch.
    """
    if start < 1 or limit < start:
        raise ValueError(f"need 1 <= start <= limit; got start={start}, limit={limit}")
    deadline = clock() + budget_s
    tried: list[dict] = []

    def attempt(batch: int) -> bool:
        result = fits(batch)
        tried.append({"batch": batch, **result})
        return bool(result["fits"])

    good, bad = None, None
    batch = start
    while batch <= limit:
        if clock() > deadline:
            return Search(good, bad, tried, bounded=True)
        if not attempt(batch):
            bad = batch
            break
        good = batch
        batch *= 2
    if good is None or bad is None:  # the start failed, or the limit fit
        return Search(good, bad, tried, bounded=False)
    while bad - good > max(1, good // 16):  # to within 1/16 of the answer
        if clock() > deadline:
            return Search(good, bad, tried, bounded=True)
        mid = (good + bad) // 2
        if attempt(mid):
            good = mid
        else:
            bad = mid
    return Search(good, bad, tried, bounded=False)


def jax_memory_env(budget_gib: float, device_total_gib: float | None) -> dict:
    """The environment that caps JAX's GPU allocator at `budget_gib` (nothing on a CPU)."""
    if not device_total_gib:
        return {}
    fraction = min(budget_gib / device_total_gib, 1.0)
    return {"XLA_PYTHON_CLIENT_MEM_FRACTION": f"{fraction:.4f}"}

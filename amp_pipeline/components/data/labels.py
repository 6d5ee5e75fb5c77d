"""The label column: its values as classes or a regression target, the notices a user should read
about them (a rare class, a label of a few ordered integers that may be a rating)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from amp_pipeline.components.data.csv_format import parse_number
from amp_pipeline.core.errors import InputError


def _classes(values: Iterable[str], where: str, label: str) -> tuple[str, tuple[str, ...]]:
    """Returns (label_kind, classes in class-id order), or raises InputError."""
    distinct = set(values)
    if len(distinct) < 2:
        only = next(iter(distinct), None)
        raise InputError(
            f"{where}: label {label!r} has a single class ({only!r}); at least 2 are needed"
        )
    parsed = {v: parse_number(v) for v in distinct}
    numbers = {v: x for v, x in parsed.items() if x is not None}
    if len(numbers) == len(parsed):
        if not all(float(x).is_integer() for x in numbers.values()):
            raise InputError(
                f"{where}: label {label!r} holds non-integer numbers; classification needs "
                "integer or string classes (--task regression predicts numbers)"
            )
        return "int", tuple(sorted(distinct, key=lambda v: int(float(v))))
    return "string", tuple(sorted(distinct))


def label_notices(label: str, counts: dict[str, int]) -> list[str]:
    """Class imbalance, and classes too small for the eval split to measure."""
    from amp_pipeline.components.data.inspection import EVAL_SHARE, MIN_EVAL_EXAMPLES

    notices = []
    ranked = sorted(counts.items(), key=lambda kv: kv[1])
    (rare, low), (common, high) = ranked[0], ranked[-1]
    if high >= 3 * low:
        notices.append(
            f"label {label!r} is imbalanced: {high:,} examples of {common!r}, {low:,} of "
            f"{rare!r} ({high / low:.0f}x); accuracy then mostly measures the common classes"
        )
    small = [c for c, n in ranked if n * EVAL_SHARE < MIN_EVAL_EXAMPLES]
    if small:
        needed = math.ceil(MIN_EVAL_EXAMPLES / EVAL_SHARE)
        notices.append(
            f"{len(small)} class(es) of {label!r} have fewer than {needed} examples, so about "
            f"{MIN_EVAL_EXAMPLES} or fewer land in the eval split (one in {1 / EVAL_SHARE:.0f}): "
            f"too few to measure their accuracy ({', '.join(map(repr, small[:5]))}"
            f"{', ...' if len(small) > 5 else ''})"
        )
    ordered = ordered_integers(counts)
    if ordered:
        notices.append(
            f"label {label!r} holds the integers {ordered[0]} to {ordered[1]} and is trained as "
            f"{len(counts)} classes; if they are an ordered scale (stars, grades), it can be "
            "trained as a number with --task regression"
        )
    if len(counts) > MAX_SLICED_CLASSES:
        notices.append(
            f"label {label!r} has {len(counts)} classes: they train and are gated as one "
            f"accuracy; per-class slices of the evaluation are kept for at most "
            f"{MAX_SLICED_CLASSES} classes"
        )
    return notices


MAX_SLICED_CLASSES = 50


ORDERED_SCALE = (3, 7)  # classes of a rating scale: 1-3 to 1-7 stars, points, grades


def ordered_integers(counts: dict) -> tuple[int, int] | None:
    """(lowest, highest) when the classes are 3 to 7 consecutive integers (a rating scale;
    ten digits 0-9 are not), else None."""
    try:
        values = sorted(int(str(c)) for c in counts)
    except ValueError:
        return None
    low, high = ORDERED_SCALE
    if low <= len(values) <= high and values == list(range(values[0], values[-1] + 1)):
        return values[0], values[-1]
    return None

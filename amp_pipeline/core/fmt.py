"""Number formatting shared by the terminal table and report.md."""

from __future__ import annotations

import math


def number(v: float | int | None, spec: str, unit: str = "") -> str:
    """`v` formatted with `spec` and `unit`; "n/a" for a missing or NaN value."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:{spec}}{unit}"

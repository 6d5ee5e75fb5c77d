"""The name a user probably meant: a flag, a column or a label spelled nearly right."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice that differs from `word` only in case, else the closest spelling (difflib,
    ratio 0.7 or more), else None."""
    options = list(choices)
    same_case = [c for c in options if c.lower() == word.lower()]
    if same_case:
        return same_case[0]
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.7)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str], quote: bool = False) -> str:
    """'; did you mean X?' naming the closest choice, or '' when none is close."""
    found = closest(word, choices)
    if found is None:
        return ""
    return f"; did you mean {found!r}?" if quote else f"; did you mean {found}?"

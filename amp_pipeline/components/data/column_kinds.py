"""What each CSV column is, from a streamed pass: the per-column tallies (_Column), and the rules
that call a column a number, a one-hot string, a category of IDs, a bag of values or text."""

from __future__ import annotations

import dataclasses
import re

from amp_pipeline.components.data import categories, csv_format, text
from amp_pipeline.core.errors import InputError

ID_NAME = re.compile(r"(^|[_\s-])(id|uuid|guid|key|index|row)$", re.IGNORECASE)


CAMEL_ID = re.compile(r"[a-z]I[dD]$")  # userId, movieID


DATE_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?|^\d{1,2}/\d{1,2}/\d{2,4}$")


ID_MIN_ROWS = 100  # fewer rows prove nothing about uniqueness


SAMPLE_ROWS = 20_000  # rows of the first block that decide ID-like, free-text and date columns


ONE_HOT_MAX = 16  # a string column with more distinct values (in the sample) is embedded


MULTI_MIN_SHARE = 0.1  # a string column with the separator in this share of values is a bag


@dataclasses.dataclass
class _Column:
    """What the pass keeps about one column: a few numbers, never its values."""

    name: str
    original: str
    kind: str = "string"  # int, float, bool, string, date
    nulls: int = 0
    present: int = 0
    first: object = None
    varies: bool = False
    sample_rows: int = 0
    sample_distinct: int = 0
    sample_mean_length: float = 0.0
    sample_mean_tokens: float = 0.0
    sample_token_lengths: list = dataclasses.field(default_factory=list)
    sample_dates: float = 0.0
    sample_numeric: float = 0.0
    sample_multi: float = 0.0  # share of sampled values holding the separator
    sample_parts: int = 0  # most values in one sampled cell, split at the separator
    span: float = 0.0
    maximum: float = 0.0  # largest |value| of a numeric column


def _sample(batch, columns: dict[str, _Column], separator: str = "|") -> None:
    """Figures of the first block that decide ID-like, free-text and date columns."""
    import pyarrow.compute as pc

    batch = batch.slice(0, SAMPLE_ROWS)
    for name in batch.schema.names:
        col = columns[name]
        cells = batch.column(name).to_pylist()
        values = [v for v in cells if v is not None]
        col.sample_rows = len(values)
        if not values:
            continue
        col.sample_distinct = len(set(values))
        if col.kind == "string":
            texts = [str(v) for v in values]
            col.sample_mean_length = sum(map(len, texts)) / len(texts)
            # Words (whitespace-separated) decide whether a column is text; the tokenizer's
            # counts, every sampled row with a missing cell as an empty text, size it.
            col.sample_mean_tokens = sum(len(t.split()) for t in texts) / len(texts)
            col.sample_token_lengths = [0 if v is None else len(text.tokenize(v)) for v in cells]
            col.sample_dates = sum(1 for t in texts if DATE_TEXT.match(t)) / len(texts)
            col.sample_numeric = sum(
                1 for t in texts if csv_format.parse_number(t) is not None
            ) / len(texts)
            col.sample_multi = sum(1 for t in texts if separator in t) / len(texts)
            # A bag's values per cell, by the device rule (components/data/categories.py).
            col.sample_parts = max(len(categories.bag_values(t, separator)) for t in texts)
        elif col.kind == "int":
            mm = pc.min_max(batch.column(name)).as_py()
            col.span = float(mm["max"] - mm["min"] + 1)


def _accumulate(batch, columns: dict[str, _Column]) -> None:
    import pyarrow.compute as pc

    for name in batch.schema.names:
        col = columns[name]
        array = batch.column(name)
        nulls = array.null_count
        col.nulls += nulls
        col.present += len(array) - nulls
        if len(array) == nulls:
            continue
        if col.kind in ("int", "float", "bool"):
            mm = pc.min_max(array).as_py()
            lo, hi = mm["min"], mm["max"]
            col.maximum = max(col.maximum, abs(float(lo)), abs(float(hi)))
        elif col.varies:
            continue
        else:
            distinct = pc.unique(pc.drop_null(array))
            lo = distinct[0].as_py()
            hi = lo if len(distinct) == 1 else None
        if col.first is None:
            col.first = lo
        if lo != hi or lo != col.first:
            col.varies = True


def _looks_like(col: _Column) -> str | None:
    """Why a column should not be a feature, or None."""
    if col.present and not col.varies:
        return f"constant (always {col.first!r})"
    if col.kind == "date" or (col.kind == "string" and col.sample_dates >= 0.9):
        return "a date or time (its values are dates)"
    unique = col.sample_rows >= ID_MIN_ROWS and col.sample_distinct == col.sample_rows
    if (
        unique
        and col.kind == "int"
        and (ID_NAME.search(col.original) or col.span >= col.sample_rows)
    ):
        return f"ID-like (unique in each of the first {col.sample_rows:,} rows)"
    if unique and col.kind == "string" and col.sample_mean_tokens < 2:
        return f"ID-like (unique in each of the first {col.sample_rows:,} rows)"
    if (
        col.kind == "string"
        and col.sample_rows >= ID_MIN_ROWS
        and col.sample_distinct > 0.9 * col.sample_rows
    ):
        return (
            f"nearly unique single words ({col.sample_distinct:,} distinct values in the first "
            f"{col.sample_rows:,} rows)"
        )
    return None


def is_bag(col: _Column, named: bool, as_category: bool) -> bool:
    """A multi-valued string column: named by --multi-value-columns (then the separator must
    split some of its values: InputError otherwise), or with the separator in at least
    MULTI_MIN_SHARE of its sampled values (not when --categorical-columns names it)."""
    if named:
        if col.kind != "string":
            raise InputError(
                f"--multi-value-columns {col.original}: column {col.original!r} holds "
                f"{col.kind} values, not joined strings"
            )
        if col.sample_multi == 0:
            raise InputError(
                f"--multi-value-columns {col.original}: the separator splits none of the first "
                f"{col.sample_rows:,} values of column {col.original!r} (--separator)"
            )
        return True
    return col.kind == "string" and not as_category and col.sample_multi >= MULTI_MIN_SHARE


def is_embedded_category(col: _Column, named: bool) -> bool:
    """A column whose values are categories read through a vocabulary and a learned embedding:
    a string column with more than ONE_HOT_MAX distinct values in the sample (not text; one
    with fewer is one-hot), or an integer column of IDs (named like one, `user_id`, `movieId`,
    with repeated values; or named by --categorical-columns), however few its values: a
    `store_id` of 10 stores is 10 categories, not a magnitude to standardise. (Integer IDs
    are not one-hot: the device graph has no builtin op that turns an int64 into the string a
    one-hot vocabulary is keyed by, while the embedding's lookup ranks the integer itself.)"""
    if col.kind == "string":
        return col.sample_distinct > ONE_HOT_MAX
    if col.kind == "int":
        if named:
            return True
        is_id = ID_NAME.search(col.original) or CAMEL_ID.search(col.original)
        repeated = col.sample_distinct < col.sample_rows
        return bool(is_id) and repeated
    return False


def looks_like_text(col: _Column) -> bool:
    """A string column of multi-word values: on average 3 or more words, or 2 or more when
    nearly every value differs (titles, names of things, short posts)."""
    if col.kind != "string" or not col.sample_rows:
        return False
    if col.sample_mean_tokens >= 3:
        return True
    many = col.sample_rows >= ID_MIN_ROWS and col.sample_distinct > 0.9 * col.sample_rows
    return many and col.sample_mean_tokens >= 2

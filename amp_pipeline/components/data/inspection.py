"""The input check of CSV inputs: one streaming pass, in memory that does not grow with the data.

For one file or a folder/glob of shards (one header each, all equal), it decides the CsvFormat
(delimiter, encoding, missing-value markers, feature names, types) and finds what a user should
hear about before any work starts: undecodable bytes (with the line), mismatched headers (with
the file), a missing or single-class label, text in a numeric column, columns that should not be
features (ID-like, constant, dates), which string columns are text (multi-word values,
tokenised in Transform: components/data/text.py), class imbalance and classes too small for the
eval split. Everything it keeps per column is a few numbers, plus the token counts of the
sampled rows of a string column; rows stream through pyarrow's CSV reader in blocks of a few MB.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from amp_pipeline.components.data import csv_format, text
from amp_pipeline.components.data.column_kinds import (
    _accumulate,
    _Column,
    _looks_like,
    _sample,
    is_bag,
    is_embedded_category,
    looks_like_text,
)
from amp_pipeline.components.data.csv_format import CsvFormat
from amp_pipeline.components.data.csv_lines import (
    _sample_text,
    _validate_encoding,
    first_ragged_line,
    first_text_line,
    unlabelled_rows,
)
from amp_pipeline.core.errors import InputError
from amp_pipeline.core.names import sanitize_names
from amp_pipeline.core.spelling import did_you_mean

logger = logging.getLogger(__name__)


MAX_BAG_VALUES = 32  # values per row kept from a multi-valued column


EVAL_SHARE = 0.2  # ExampleGen's eval split: 1 hash bucket of 5


MIN_EVAL_EXAMPLES = 5  # fewer expected eval examples of a class: its accuracy is not measured


TASKS = ("auto", "classification", "regression")


AUTO_MAX_CLASSES = 100  # --task auto: more distinct integer labels than this is a regression


MISSING_LABEL = ("drop", "error")


@dataclasses.dataclass(frozen=True)
class CsvOptions:
    """The user's CSV flags.

    Attributes:
        na_values: cell texts that mean "missing"; None: pandas' default set.
        delimiter: the field separator; None: sniffed from `, ; tab |`.
        encoding: the files' encoding.
        keep_columns: columns kept as features although they look ID-like, constant or
            dates.
        drop_columns: columns never used as features.
        text_columns: string columns to use as text (tokenised) whatever they look like.
        categorical_columns: string columns to use as categories (a vocabulary of whole
            values) although they look like text; integer columns to use as category IDs
            (embedded) rather than numbers.
        vocab_size: the largest vocabulary per text column (its most frequent tokens).
        multi_value_columns: string columns whose cells hold several values joined by
            `separator` (`Animation|Children`): a bag of values, each embedded, averaged. A
            string column with the separator in at least 10% of its sampled values is one
            without the flag.
        separator: what joins the values of a multi-valued cell.
        max_tokens: token ids per text column; 0: the 95th percentile of the sampled
            lengths, a multiple of 8, at most 512.
        task: "classification", "regression" or "auto" (regression for a numeric label with
            non-integer values or more than AUTO_MAX_CLASSES distinct integers).
        missing_label: "drop" (rows with no label are left out before the split, and counted)
            or "error" (such a row stops the run).
        closed_columns: string columns whose values are a closed set: a value the train split
            does not have stops the run as drift (others read it as out-of-vocabulary).
    """

    na_values: tuple[str, ...] | None = None
    delimiter: str | None = None
    encoding: str = "utf-8"
    keep_columns: tuple[str, ...] = ()
    drop_columns: tuple[str, ...] = ()
    text_columns: tuple[str, ...] = ()
    categorical_columns: tuple[str, ...] = ()
    vocab_size: int = text.DEFAULT_VOCAB_SIZE
    max_tokens: int = 0
    task: str = "auto"
    multi_value_columns: tuple[str, ...] = ()
    separator: str = "|"
    missing_label: str = "drop"
    closed_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise InputError(f"--task {self.task}: expected one of {', '.join(TASKS)}")
        if self.missing_label not in MISSING_LABEL:
            raise InputError(
                f"--missing-label {self.missing_label}: expected one of {', '.join(MISSING_LABEL)}"
            )
        if self.vocab_size < 1:
            raise InputError(f"--vocab-size {self.vocab_size}: must be at least 1")
        if not 0 <= self.max_tokens <= text.MAX_TOKENS_LIMIT:
            raise InputError(
                f"--max-tokens {self.max_tokens}: must be between 1 and "
                f"{text.MAX_TOKENS_LIMIT} (0: from the data)"
            )
        if not self.separator or self.separator.strip() != self.separator:
            raise InputError(
                f"--separator {self.separator!r}: must be one or more visible characters"
            )
        both = set(self.text_columns) & set(self.categorical_columns)
        if both:
            raise InputError(
                f"--text-columns and --categorical-columns both name {sorted(both)[0]!r}"
            )


MAX_LABEL_VALUES = 10_000  # distinct label values counted; past it the label is a number


@dataclasses.dataclass
class LabelFigures:
    """What the pass keeps about the label, in memory that does not grow with the rows: the
    counts of its first MAX_LABEL_VALUES distinct values (the classes), and, while every value
    parses as a number, their count, sums (shifted by the first value, for a stable variance),
    range, and whether any is not finite or not an integer."""

    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    overflow: bool = False  # more distinct values than MAX_LABEL_VALUES
    numeric: bool = True
    n: int = 0
    shift: float | None = None
    total: float = 0.0
    squares: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    non_finite: int = 0
    integers: bool = True
    CHUNK = 65_536  # label values converted at a time (a block can hold a million)

    def add(self, array) -> None:
        """One batch of the label column (strings)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self.overflow:
            found = pc.value_counts(array)
            if len(found) > MAX_LABEL_VALUES:  # not turned into Python objects
                self.overflow = True
            else:
                for item in found.to_pylist():
                    if item["values"] is not None:
                        self.counts[item["values"]] += item["counts"]
                self.overflow = len(self.counts) > MAX_LABEL_VALUES
            if self.overflow:
                self.counts = collections.Counter()
        for start in range(0, len(array), self.CHUNK):
            if not self.numeric:
                return
            try:
                values = pc.drop_null(pc.cast(array.slice(start, self.CHUNK), pa.float64()))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                self.numeric = False
                return
            # The values' own buffer (no nulls left): Array.to_numpy's first call imports
            # pandas' shims, 18 MB the input check does not need.
            data = values.buffers()[1]
            self._add_numbers(np.frombuffer(data, np.float64, len(values), values.offset * 8))

    def _add_numbers(self, values: np.ndarray) -> None:
        finite = np.isfinite(values)
        self.non_finite += int((~finite).sum())
        values = values[finite]
        if not len(values):
            return
        if self.shift is None:
            self.shift = float(values[0])
        centred = values - self.shift
        self.n += len(values)
        self.total += float(centred.sum())
        self.squares += float(centred @ centred)
        self.low = min(self.low, float(values.min()))
        self.high = max(self.high, float(values.max()))
        self.integers = self.integers and bool(np.all(values == np.round(values)))

    @property
    def distinct(self) -> int | None:
        """Distinct values, None past MAX_LABEL_VALUES."""
        return None if self.overflow else len(self.counts)

    @property
    def mean(self) -> float:
        return (self.shift or 0.0) + self.total / self.n if self.n else math.nan

    @property
    def std(self) -> float:
        """Population standard deviation of the finite values."""
        if not self.n:
            return math.nan
        return math.sqrt(max(self.squares / self.n - (self.total / self.n) ** 2, 0.0))


def _text_in_numeric(files: list[Path], fmt: CsvFormat, name: str) -> InputError:
    """The error for a numeric column holding text, naming the file and the line."""
    for path in files:
        hit = first_text_line(path, fmt, name)
        if hit:
            return InputError(
                f"{path}: column {fmt.original(name)!r} is numeric but line {hit[0]} holds text "
                f"{hit[1]!r}"
            )
    return InputError(f"{files[0]}: column {fmt.original(name)!r} mixes numbers and text")


def _column_in_error(message: str, fmt: CsvFormat, included: list[str]) -> str | None:
    """The feature name of the column a pyarrow conversion error names (`CSV column #i`)."""
    match = re.search(r"CSV column #(\d+)", message)
    if not match:
        return None
    index = int(match.group(1))
    return included[index] if index < len(included) else None


def _unreadable(path: Path, fmt: CsvFormat, error: Exception) -> InputError:
    """The one-line error for a CSV file pyarrow cannot parse: the line whose field count
    differs from the header's where that is the cause (pyarrow names the row, not the line)."""
    ragged = first_ragged_line(path, fmt)
    if ragged is not None:
        line, fields = ragged
        return InputError(
            f"{path}: line {line} has {fields} fields where the header has "
            f"{len(fmt.columns)} (delimiter {fmt.delimiter!r}); fix the row or quote the "
            "cells that hold the delimiter"
        )
    return InputError(f"{path}: not a readable CSV file ({error})")


def _scan(
    files: list[Path], fmt: CsvFormat, label: str, separator: str = "|"
) -> tuple[dict, LabelFigures, int, CsvFormat]:
    """The streaming pass: per-column figures, the label's figures and row count.

    Types are inferred from the first block; a column that turns out to hold decimals later is
    widened to float and the pass restarts (at most once per column).
    """
    import pyarrow as pa

    types: dict[str, str] = {label: "string"}
    while True:
        columns = {n: _Column(n, o) for n, o in zip(fmt.names, fmt.columns, strict=True)}
        figures = LabelFigures()
        rows = 0
        try:
            for path in files:
                for i, batch in enumerate(csv_format.batches(path, fmt, types, include=())):
                    if rows == 0 and i == 0:
                        for name in batch.schema.names:
                            kind = csv_format.kind_of(batch.schema.field(name).type)
                            if kind in ("int", "float", "bool", "date") and name not in types:
                                types[name] = kind if kind != "date" else "string"
                                columns[name].kind = kind
                            elif name in types:
                                columns[name].kind = types[name]
                        _sample(batch, columns, separator)
                    rows += batch.num_rows
                    _accumulate(batch, columns)
                    figures.add(batch.column(label))
        except pa.ArrowInvalid as e:
            name = _column_in_error(str(e), fmt, list(fmt.names))
            if name is None:
                raise _unreadable(path, fmt, e) from None
            value = re.search(r"invalid value '(.*)'", str(e))
            if (
                types.get(name) == "int"
                and value
                and csv_format.parse_number(value.group(1)) is not None
            ):
                types[name] = "float"
                continue
            raise _text_in_numeric(files, fmt, name) from None
        return columns, figures, rows, dataclasses.replace(fmt, types=types)


def _resolve_names(names: tuple[str, ...], fmt: CsvFormat, flag: str, where: str) -> set[str]:
    """Feature names of the columns a flag names (original or sanitised names)."""
    out = set()
    for name in names:
        if name in fmt.columns:
            out.add(fmt.names[fmt.columns.index(name)])
        elif name in fmt.names:
            out.add(name)
        else:
            raise InputError(
                f"{flag} {name}: no such column in {where} (columns: {', '.join(fmt.columns)})"
                + did_you_mean(name, fmt.columns, quote=True)
            )
    return out


def inspect(files: list[Path], label: str, options: CsvOptions, where: str) -> dict:
    """Checks CSV files (one header each, all equal) and describes them.

    Returns the DataSpec fields: format (the CsvFormat), classes, features, exclusions,
    missing counts, class counts and notices.

    Raises:
        InputError: one line naming the file, line, column or flag.
    """
    first = files[0]
    for path in files:
        if path.stat().st_size == 0:
            raise InputError(f"{path}: the CSV file is empty")
        _validate_encoding(path, options.encoding)
    sample = _sample_text(first, options.encoding)
    if not sample.strip():
        raise InputError(f"{first}: the CSV file is empty")
    delimiter = options.delimiter or csv_format.sniff_delimiter(sample)
    header = csv_format.read_header(first, options.encoding, delimiter)
    for path in files[1:]:
        other = csv_format.read_header(path, options.encoding, delimiter)
        if other != header:
            diff = sorted(set(other) ^ set(header)) or ["the column order"]
            raise InputError(
                f"{path}: its header differs from {first.name}'s ({', '.join(diff[:5])}); every "
                "shard needs the same columns"
            )
    names = sanitize_names(header)
    fmt = CsvFormat(
        delimiter=delimiter,
        encoding=options.encoding,
        na_values=tuple(
            csv_format.PANDAS_NA_VALUES if options.na_values is None else options.na_values
        ),
        columns=tuple(header),
        names=names,
        types={},
        keep=names,
    )
    if label in header:
        label_name = names[header.index(label)]
    elif label in names:
        label_name = label
    else:
        raise InputError(
            f"{where}: no label column {label!r} (columns: {', '.join(header)})"
            f"{did_you_mean(label, header, quote=True) or ';'} name it with --label"
        )
    keep = _resolve_names(options.keep_columns, fmt, "--keep-columns", where)
    drop = _resolve_names(options.drop_columns, fmt, "--drop-columns", where)
    if label_name in drop:
        raise InputError(f"--drop-columns {label}: that is the label")
    as_text = _resolve_names(options.text_columns, fmt, "--text-columns", where)
    as_categories = _resolve_names(options.categorical_columns, fmt, "--categorical-columns", where)
    as_bags = _resolve_names(options.multi_value_columns, fmt, "--multi-value-columns", where)
    closed = _resolve_names(options.closed_columns, fmt, "--closed-columns", where)
    for flag, named in (
        ("--text-columns", as_text),
        ("--categorical-columns", as_categories),
        ("--multi-value-columns", as_bags),
    ):
        if label_name in named:
            raise InputError(f"{flag} {label}: that is the label")
    columns, label_figures, rows, fmt = _scan(files, fmt, label_name, options.separator)
    if rows == 0:
        raise InputError(f"{where}: the CSV file has a header but no rows")
    unlabelled = columns[label_name].nulls
    if unlabelled:
        fmt = unlabelled_rows(files, fmt, label_name, unlabelled, rows, options.missing_label)
    excluded: list[dict[str, Any]] = []
    notices: list[str] = []
    texts: list[str] = []
    categorical: list[str] = []
    bags: dict[str, Any] = {}
    # Pixel columns (pixel_0 .. pixel_{n-1}) are one image: a pixel that is always 0 is not a
    # constant feature to drop.
    image = all(re.fullmatch(r"pixel_\d+", n) for n in names if n != label_name)
    for name in names:
        col = columns[name]
        if name == label_name:
            continue
        reason = None
        if name in as_text and col.kind != "string":
            raise InputError(
                f"--text-columns {col.original}: column {col.original!r} holds {col.kind} "
                "values, not text"
            )
        if name in as_categories and col.kind not in ("string", "int"):
            raise InputError(
                f"--categorical-columns {col.original}: column {col.original!r} holds "
                f"{col.kind} values, not categories (strings or integer IDs)"
            )
        if name in drop:
            reason = "dropped by --drop-columns"
        elif col.present == 0:
            reason = "empty on every row"
        elif (
            col.kind == "string"
            and col.sample_numeric > 0.5
            and name not in keep
            and name not in as_text
        ):
            raise _text_in_numeric(files, fmt, name)
        elif name in as_text or (
            name not in as_categories and name not in keep and looks_like_text(col)
        ):
            if col.kind == "string" and col.sample_dates >= 0.9 and name not in as_text:
                reason = _looks_like(col)  # dates stay out
            else:
                texts.append(name)
        elif name not in keep and name not in as_categories and name not in as_bags and not image:
            reason = _looks_like(col)
        if reason:
            excluded.append({"column": col.original, "feature": name, "reason": reason})
        elif name not in texts and is_bag(col, name in as_bags, name in as_categories):
            bags[name] = min(MAX_BAG_VALUES, max(1, col.sample_parts))
        elif name not in texts and is_embedded_category(col, name in as_categories):
            categorical.append(name)
    return {
        "format": fmt,
        "label": label_name,
        "columns": columns,
        "label_figures": label_figures,
        "rows": rows,
        "unlabelled": unlabelled,
        "excluded": excluded,
        "notices": notices,
        "text": texts,
        "categorical": categorical,
        "bags": bags,
        "closed": closed,
    }

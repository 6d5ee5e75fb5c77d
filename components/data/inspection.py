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

import codecs
import collections
import dataclasses
import gzip
import logging
import math
import re
from pathlib import Path

import numpy as np

from amp_pipeline.components.data import categories, csv_format, text
from amp_pipeline.components.data.csv_format import CsvFormat
from amp_pipeline.core.errors import InputError
from amp_pipeline.core.names import sanitize_names

logger = logging.getLogger(__name__)

ID_NAME = re.compile(r"(^|[_\s-])(id|uuid|guid|key|index|row)$", re.IGNORECASE)
CAMEL_ID = re.compile(r"[a-z]I[dD]$")  # userId, movieID
DATE_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?|^\d{1,2}/\d{1,2}/\d{2,4}$")
ID_MIN_ROWS = 100  # fewer rows prove nothing about uniqueness
SAMPLE_ROWS = 20_000  # rows of the first block that decide ID-like, free-text and date columns
ONE_HOT_MAX = 16  # a string column with more distinct values (in the sample) is embedded
MULTI_MIN_SHARE = 0.1  # a string column with the separator in this share of values is a bag
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


def _validate_encoding(path: Path, encoding: str, chunk: int = 1 << 20) -> None:
    """Decodes the whole file in chunks; undecodable bytes raise InputError naming the line."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    line = 1
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as f:
        while data := f.read(chunk):
            try:
                decoder.decode(data)
            except UnicodeDecodeError as e:
                where = line + data.count(b"\n", 0, e.start)
                bad = data[e.start : e.end].hex(" ")
                raise InputError(
                    f"{path}: line {where} holds bytes that are not {encoding} ({bad}); pass "
                    "--encoding (for example --encoding latin-1)"
                ) from None
            line += data.count(b"\n")
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise InputError(f"{path}: line {line}: the file ends inside a character") from None


def _sample_text(path: Path, encoding: str, size: int = 65536) -> str:
    with csv_format.open_text(path, encoding) as f:
        return f.read(size)


def first_text_line(path: Path, fmt: CsvFormat, column: str) -> tuple[int, str] | None:
    """(line, text) of the first cell of `column` that is neither missing nor a number."""
    return first_line_where(path, fmt, column, lambda text: csv_format.parse_number(text) is None)


def column_cells(path: Path, fmt: CsvFormat, column: str):
    """(line, stripped text) of `column`'s cell in each row after the header; the text is None
    where the row is too short to hold it."""
    import csv

    index = fmt.names.index(column)
    with csv_format.open_text(path, fmt.encoding) as f:
        reader = csv.reader(f, delimiter=fmt.delimiter)
        next(reader, None)
        for row in reader:
            yield reader.line_num, (row[index].strip() if index < len(row) else None)


def first_line_where(path: Path, fmt: CsvFormat, column: str, test) -> tuple[int, str] | None:
    """(line, text) of the first present cell of `column` for which `test(text)` holds."""
    na = set(fmt.na_values)
    return next(
        (
            (line, text)
            for line, text in column_cells(path, fmt, column)
            if text is not None and text not in na and test(text)
        ),
        None,
    )


def first_missing_line(path: Path, fmt: CsvFormat, column: str) -> int | None:
    """The line of the first row whose `column` cell is missing (empty or a missing marker)."""
    na = set(fmt.na_values) | {""}
    return next(
        (line for line, text in column_cells(path, fmt, column) if text is None or text in na),
        None,
    )


def unlabelled_rows(
    files: list[Path], fmt: CsvFormat, label: str, count: int, rows: int, policy: str
) -> CsvFormat:
    """The format that leaves out the `count` rows with no label (ExampleGen drops them before
    the split), or the stop `--missing-label error` asks for, with the count over every file
    and the first such line."""
    name = fmt.original(label)
    if policy == "error" or count == rows:
        where = next(
            (
                f"{path}: line {line}"
                for path in files
                if (line := first_missing_line(path, fmt, label))
            ),
            str(files[0]),
        )
        what = "every row" if count == rows else f"{count:,} of {rows:,} rows"
        hint = "" if count == rows else "; --missing-label drop leaves them out"
        raise InputError(f"{where}: label column {name!r} is empty on {what} (the first){hint}")
    return dataclasses.replace(fmt, required=(label,))


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
                raise InputError(f"{files[0]}: not a readable CSV file ({e})") from None
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
    """A column whose values are categories too many to one-hot: a string column with more
    than ONE_HOT_MAX distinct values in the sample (not text), or an integer column of IDs
    (named like one, `user_id`, `movieId`, with repeated values; or named by
    --categorical-columns). Its values get a vocabulary and a learned embedding."""
    if col.kind == "string":
        return col.sample_distinct > ONE_HOT_MAX
    if col.kind == "int":
        if named:
            return True
        is_id = ID_NAME.search(col.original) or CAMEL_ID.search(col.original)
        repeated = col.sample_distinct < col.sample_rows
        return bool(is_id) and repeated and col.sample_distinct > ONE_HOT_MAX
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
            f"{where}: no label column {label!r} (columns: {', '.join(header)}); name it with "
            "--label"
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
    excluded, notices, texts, categorical, bags = [], [], [], [], {}
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

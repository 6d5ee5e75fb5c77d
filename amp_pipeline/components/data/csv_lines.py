"""Finding things in a CSV file by its lines: the encoding checked in chunks, a sample of its text,
the cells of one column, the first line where a test holds (a missing cell, a text cell in a number
column), and the count of rows without a label."""

from __future__ import annotations

import codecs
import dataclasses
import gzip
from pathlib import Path

from amp_pipeline.components.data import csv_format
from amp_pipeline.components.data.csv_format import CsvFormat
from amp_pipeline.core.errors import InputError


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


def first_ragged_line(path: Path, fmt: CsvFormat) -> tuple[int, int] | None:
    """(line, fields) of the first row after the header whose field count differs from the
    header's, or None. A blank line is not a row (pyarrow skips it too)."""
    import csv

    with csv_format.open_text(path, fmt.encoding) as f:
        reader = csv.reader(f, delimiter=fmt.delimiter)
        next(reader, None)
        for row in reader:
            if row and len(row) != len(fmt.columns):
                return reader.line_num, len(row)
    return None


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

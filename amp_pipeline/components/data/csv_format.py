"""CSV files as people write them: the format one input was found to have, and reading it.

`CsvFormat` is plain data, decided once by the input check (components/data/ingest.py) and handed to
ExampleGen (components/data/example_gen.py), so that both read every file the same way:

- the delimiter (`,` `;` tab `|`), the encoding, a UTF-8 byte-order mark, CRLF line ends and
  quoted fields holding delimiters or newlines;
- missing-value markers (pandas' default set, or `--na-values`);
- booleans (`true`/`false`, `yes`/`no`), read as 1/0;
- column names sanitised into valid, unique feature names (the originals are kept);
- which columns become features, and each one's type.

Reading streams Arrow record batches of a bounded size (pyarrow's CSV reader), so memory does
not grow with the file.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import math
from collections.abc import Iterator
from pathlib import Path

from amp_pipeline.core.names import FALSE_VALUES, TRUE_VALUES

# pandas.read_csv's default missing-value markers (pandas 2.x, `na_values` documentation).
PANDAS_NA_VALUES = (
    "",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
)
DELIMITERS = (",", ";", "\t", "|")
TYPES = ("int", "float", "string", "bool")
BLOCK_SIZE = 4 << 20  # bytes of CSV per record batch


@dataclasses.dataclass(frozen=True)
class CsvFormat:
    """How every file of one CSV input is read.

    Attributes:
        delimiter: the field separator.
        encoding: the files' text encoding.
        na_values: cell texts that mean "missing".
        columns: the header's names as written (BOM and surrounding spaces removed).
        names: the feature name of each column (same order): valid and unique.
        types: `int`, `float`, `string` or `bool` per kept column (by feature name).
        keep: feature names of the columns that are read (features and the label).
        required: feature names whose missing cell leaves the row out of the examples (the
            label, where some rows have none: components/data/example_gen.py drops them).
    """

    delimiter: str
    encoding: str
    na_values: tuple[str, ...]
    columns: tuple[str, ...]
    names: tuple[str, ...]
    types: dict[str, str]
    keep: tuple[str, ...]
    required: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> CsvFormat:
        return cls(
            delimiter=d["delimiter"],
            encoding=d["encoding"],
            na_values=tuple(d["na_values"]),
            columns=tuple(d["columns"]),
            names=tuple(d["names"]),
            types=dict(d["types"]),
            keep=tuple(d["keep"]),
            required=tuple(d.get("required", ())),
        )

    def original(self, name: str) -> str:
        """The column name as written in the file, for a feature name."""
        return self.columns[self.names.index(name)]


def open_text(path: Path, encoding: str) -> io.TextIOBase:
    """A text stream of a CSV or CSV.gz file (BOM removed for UTF-8)."""
    raw = gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")  # noqa: SIM115
    enc = "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding
    return io.TextIOWrapper(raw, encoding=enc, newline="")


def sniff_delimiter(sample: str) -> str:
    """The delimiter among `, ; tab |` that splits the header into the most fields (more than
    one) while the first records, all but one in ten (at least one), have as many; `,` when
    none does. So one ragged row still gives the delimiter, and the read then names its
    line. Quoted fields may hold newlines."""
    best, best_fields = ",", 1
    for delimiter in DELIMITERS:
        try:
            rows = [r for r in csv.reader(io.StringIO(sample), delimiter=delimiter) if r]
        except csv.Error:
            continue
        if len(rows) > 1 and not sample.endswith(("\n", "\r")):
            rows = rows[:-1]  # the sample may end inside a record
        counts = [len(r) for r in rows[:50]]
        if not counts:
            continue
        fields = counts[0]
        ragged = sum(c != fields for c in counts)
        agreed = ragged <= max(1, len(counts) // 10) and ragged < len(counts) - 1
        if agreed and fields > best_fields:
            best, best_fields = delimiter, fields
    return best


def read_header(path: Path, encoding: str, delimiter: str) -> list[str]:
    """The first row of a CSV file, as written (BOM removed)."""
    with open_text(path, encoding) as f:
        row = next(csv.reader(f, delimiter=delimiter), [])
    return [c.strip() for c in row]


def arrow_type(kind: str):
    import pyarrow as pa

    return {"int": pa.int64(), "float": pa.float64(), "string": pa.string(), "bool": pa.bool_()}[
        kind
    ]


def record_chunks(path: Path, block_size: int = BLOCK_SIZE) -> Iterator[bytes]:
    """The file's bytes after its header line, in chunks of about `block_size` that end on a
    record boundary: a newline outside quotes (an even number of `"` before it; RFC 4180's
    doubled quotes keep the parity).

    pyarrow's streaming reader reads the whole file ahead into memory; parsing one chunk at a
    time keeps memory at a few blocks whatever the file's size.
    """
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as f:
        header_done = False
        pending = b""
        quotes = 0  # quote count of `pending`, parity decides record boundaries
        while True:
            data = f.read(block_size)
            if not header_done:
                pending += data
                cut = _record_end(pending, 0)
                if cut is None and data:
                    continue
                pending = pending[cut:] if cut is not None else b""
                header_done = True
                quotes = pending.count(b'"')
            else:
                pending += data
                quotes += data.count(b'"')
            if not data:
                if pending.strip():
                    yield pending
                return
            if len(pending) < block_size:
                continue
            cut = _last_record_end(pending, quotes)
            if cut is None:
                continue
            chunk, pending = pending[:cut], pending[cut:]
            quotes = pending.count(b'"')
            yield chunk


def _record_end(data: bytes, start: int) -> int | None:
    """The offset just after the first newline outside quotes, from `start`."""
    inside = False
    for i in range(start, len(data)):
        c = data[i]
        if c == 34:  # "
            inside = not inside
        elif c == 10 and not inside:  # \n
            return i + 1
    return None


def _last_record_end(data: bytes, quotes: int) -> int | None:
    """The offset just after the last newline outside quotes in `data` (`quotes` `"` in all)."""
    end = len(data)
    while True:
        i = data.rfind(b"\n", 0, end)
        if i < 0:
            return None
        # Quotes after this newline: the newline is outside quotes iff those before it are even.
        if (quotes - data.count(b'"', i + 1)) % 2 == 0:
            return i + 1
        end = i


def batches(
    path: Path,
    fmt: CsvFormat,
    column_types: dict[str, str] | None = None,
    include: tuple[str, ...] | None = None,
    block_size: int = BLOCK_SIZE,
) -> Iterator:
    """Arrow record batches of `path`, columns named by feature name, one chunk at a time.

    Args:
        column_types: feature name -> kind; columns not named are inferred from the first
            chunk and kept for the rest.
        include: feature names to read (default: `fmt.keep`; empty tuple: every column).
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = list(fmt.names)
    wanted = list(fmt.keep if include is None else include) or names
    types = dict(column_types if column_types is not None else fmt.types)
    parse = pacsv.ParseOptions(delimiter=fmt.delimiter, newlines_in_values=True)
    for chunk in record_chunks(path, block_size):
        table = pacsv.read_csv(
            pa.BufferReader(chunk),
            read_options=pacsv.ReadOptions(
                column_names=names, block_size=len(chunk) + 1, encoding=fmt.encoding
            ),
            parse_options=parse,
            convert_options=pacsv.ConvertOptions(
                include_columns=wanted,
                column_types={k: arrow_type(v) for k, v in types.items() if k in wanted},
                null_values=list(fmt.na_values),
                true_values=list(TRUE_VALUES),
                false_values=list(FALSE_VALUES),
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )
        for name in table.schema.names:  # what the first chunk inferred holds for the rest
            kind = kind_of(table.schema.field(name).type)
            if name not in types and kind not in ("null", "date"):  # dates: the caller decides
                types[name] = kind
        yield from table.to_batches()


def with_required(batch, fmt: CsvFormat):
    """`batch` without the rows whose cell of a `fmt.required` column is missing."""
    import pyarrow.compute as pc

    for name in fmt.required:
        batch = batch.filter(pc.is_valid(batch.column(name)))
    return batch


def kind_of(arrow_type) -> str:
    """`bool`, `int`, `float`, `date`, `null` or `string`: what pyarrow inferred for a column."""
    import pyarrow as pa

    if pa.types.is_boolean(arrow_type):
        return "bool"
    if pa.types.is_integer(arrow_type):
        return "int"
    if pa.types.is_floating(arrow_type):
        return "float"
    if pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type):
        return "date"
    if pa.types.is_null(arrow_type):
        return "null"
    return "string"


def parse_number(text: str) -> float | None:
    """The finite number `text` holds, or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def to_examples(batch, types: dict[str, str]) -> list[bytes]:
    """Serialized tf.Examples of one record batch: ints, floats, bytes; booleans as 1/0; a
    missing cell is an absent feature (as TFX's CsvExampleGen writes it).

    The bytes are tfx_bsl's C++ encoder's, whose feature order within an example differs from
    process to process; nothing downstream reads the order (tf.io.parse_example reads
    features by name). ExampleGen splits by `row_keys`, the rows' values, not by these bytes.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from tfx_bsl.coders import example_coder

    arrays, fields = [], []
    for name in batch.schema.names:
        column = batch.column(name)
        kind = types.get(name)
        if kind == "bool" or pa.types.is_boolean(column.type):
            column = pc.cast(column, pa.int64())
        elif pa.types.is_integer(column.type):
            column = pc.cast(column, pa.int64())
        elif pa.types.is_floating(column.type):
            column = pc.cast(column, pa.float32())
        elif not pa.types.is_binary(column.type):
            column = pc.cast(column, pa.binary())
        # One value per cell, none where the cell is missing.
        valid = pc.is_valid(column)
        lengths = pc.cast(valid, pa.int32())
        offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths)])
        values = pc.filter(column, valid)
        arrays.append(pa.ListArray.from_arrays(offsets, values))
        fields.append(name)
    return example_coder.RecordBatchToExamples(pa.RecordBatch.from_arrays(arrays, fields))


_NULL_KEY = 0x6A09E667F3BCC908  # a missing cell's key (any fixed constant)


def _mix(h):
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    import numpy as np

    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def _cell_keys(column):
    """A uint64 per cell from its value alone: numbers by their float64 bits, strings by an
    8-byte BLAKE2b of their bytes (computed once per distinct value)."""
    import hashlib

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    missing = np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False), bool)
    if (
        pa.types.is_boolean(column.type)
        or pa.types.is_integer(column.type)
        or (pa.types.is_floating(column.type))
    ):
        numbers = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
        keys = np.ascontiguousarray(numbers, np.float64).view(np.uint64).copy()
    else:
        encoded = pc.dictionary_encode(pc.cast(column, pa.binary()))
        distinct = np.array(
            [
                int.from_bytes(hashlib.blake2b(v or b"", digest_size=8).digest(), "little")
                for v in encoded.dictionary.to_pylist()
            ]
            or [0],
            np.uint64,
        )
        indices = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
        keys = distinct[indices]
    keys[missing] = np.uint64(_NULL_KEY)
    return keys


def row_keys(batch):
    """A uint64 key per row from its cells' values (column by column, in the batch's order): the
    same in every process, on every worker and whatever the batch boundaries, unlike the
    encoder's bytes. ExampleGen's train/eval split hashes rows by it."""
    import numpy as np

    h = np.full(batch.num_rows, np.uint64(len(batch.schema.names)), np.uint64)
    with np.errstate(over="ignore"):
        for column in batch.columns:
            h = _mix(h ^ _cell_keys(column))
    return h

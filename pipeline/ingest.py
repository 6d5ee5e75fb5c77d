"""Input checking and preparation: turns `--data` into what ExampleGen reads, plus a DataSpec.

One pass over the input finds what the pipeline needs to know before it starts (feature kinds,
the label's classes, image shapes) and every problem a user should hear about in one line:
a missing path, an empty CSV, a missing or single-class label, text in a numeric column,
an unreadable image. Files are only rewritten when their content changed, so that TFX's
cache (which fingerprints input files by size and mtime) hits on a rerun.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import logging
import math
from collections.abc import Iterable
from pathlib import Path

from pipeline.errors import InputError

logger = logging.getLogger(__name__)

DIGITS_CSV = Path(__file__).parent / "data" / "digits.csv.gz"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfr", ".gz")


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """What the pipeline knows about its input before it runs.

    Attributes:
        source: the path the user gave (or "embedded digits").
        format: "csv" or "tfrecord": which ExampleGen reads `input_base`.
        input_base: folder ExampleGen reads.
        input_pattern: file pattern inside `input_base`.
        label: name of the label feature.
        label_kind: "int" or "string": how the label is stored in the examples.
        classes: the label's classes as strings, in class-id order.
        numeric_features: (name, length) of each numeric feature, in model-input order.
        string_features: names of the categorical (string) features.
        image_shape: (height, width, channels) when the numeric features form an image.
        pixel_scale: what pixels are divided by (their largest value), for images.
        rows: number of examples seen.
    """

    source: str
    format: str
    input_base: str
    input_pattern: str
    label: str
    label_kind: str
    classes: tuple[str, ...]
    numeric_features: tuple[tuple[str, int], ...]
    string_features: tuple[str, ...] = ()
    image_shape: tuple[int, int, int] | None = None
    pixel_scale: float = 1.0
    rows: int = 0

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> DataSpec:
        d = dict(d)
        d["classes"] = tuple(d["classes"])
        d["numeric_features"] = tuple((n, int(k)) for n, k in d["numeric_features"])
        d["string_features"] = tuple(d["string_features"])
        if d.get("image_shape") is not None:
            d["image_shape"] = tuple(d["image_shape"])
        return cls(**d)


def write_if_changed(path: Path, data: bytes) -> bool:
    """Writes `data` to `path` unless it already holds exactly that. Returns True if written."""
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return True


def _parse_number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _image_shape_from_pixels(names: list[str]) -> tuple[int, int, int] | None:
    """Columns pixel_0..pixel_{n-1} with n a perfect square form a one-channel image."""
    n = len(names)
    side = math.isqrt(n)
    if n >= 4 and side * side == n and names == [f"pixel_{i}" for i in range(n)]:
        return (side, side, 1)
    return None


def _classes(values: Iterable[str], where: str, label: str) -> tuple[str, tuple[str, ...]]:
    """Returns (label_kind, classes in class-id order), or raises InputError."""
    distinct = set(values)
    if len(distinct) < 2:
        only = next(iter(distinct), None)
        raise InputError(
            f"{where}: label {label!r} has a single class ({only!r}); at least 2 are needed"
        )
    numbers = {v: _parse_number(v) for v in distinct}
    if all(x is not None for x in numbers.values()):
        if not all(float(x).is_integer() for x in numbers.values()):
            raise InputError(
                f"{where}: label {label!r} holds non-integer numbers; classification needs "
                "integer or string classes"
            )
        return "int", tuple(sorted(distinct, key=lambda v: int(float(v))))
    return "string", tuple(sorted(distinct))


def inspect_csv(path: Path, label: str) -> DataSpec:
    """Checks a CSV file and describes it. Raises InputError naming the file and column."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        raise InputError(f"{path}: the CSV file is empty")
    reader = csv.reader(io.StringIO(text))
    header = next(reader)
    rows = [r for r in reader if r]
    if not rows:
        raise InputError(f"{path}: the CSV file has a header but no rows")
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise InputError(f"{path}: duplicate column names: {', '.join(dup)}")
    if label not in header:
        raise InputError(
            f"{path}: no label column {label!r} (columns: {', '.join(header)}); "
            "name it with --label"
        )
    for line, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise InputError(
                f"{path}: line {line} has {len(row)} fields, the header has {len(header)}"
            )
    columns = {name: [r[i].strip() for r in rows] for i, name in enumerate(header)}

    labels = columns[label]
    missing = [i + 2 for i, v in enumerate(labels) if v == ""]
    if missing:
        raise InputError(
            f"{path}: label column {label!r} is empty on {len(missing)} rows "
            f"(first: line {missing[0]})"
        )
    label_kind, classes = _classes(labels, str(path), label)

    numeric, strings = [], []
    max_value = 0.0
    for name in header:
        if name == label:
            continue
        present = [(i, v) for i, v in enumerate(columns[name]) if v != ""]
        if not present:
            logger.warning("%s: column %r is empty on every row; it is ignored", path, name)
            continue
        parsed = [(i, v, _parse_number(v)) for i, v in present]
        bad = [(i, v) for i, v, x in parsed if x is None]
        if not bad:
            numeric.append((name, 1))
            max_value = max(max_value, max(abs(x) for _, _, x in parsed))
        elif len(bad) * 2 < len(parsed):
            i, v = bad[0]
            raise InputError(
                f"{path}: column {name!r} is numeric but line {i + 2} holds text {v!r}"
            )
        else:
            strings.append(name)
    if not numeric and not strings:
        raise InputError(f"{path}: no feature columns besides the label {label!r}")
    image_shape = _image_shape_from_pixels([n for n, _ in numeric]) if not strings else None
    return DataSpec(
        source=str(path),
        format="csv",
        input_base=str(path.parent),
        input_pattern=path.name,
        label=label,
        label_kind=label_kind,
        classes=classes,
        numeric_features=tuple(numeric),
        string_features=tuple(strings),
        image_shape=image_shape,
        pixel_scale=max_value if image_shape else 1.0,
        rows=len(rows),
    )


def _tfrecord_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(
        p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(TFRECORD_SUFFIXES)
    )


def inspect_tfrecords(path: Path, label: str) -> DataSpec:
    """Checks TFRecord files of tf.Example and describes them."""
    import tensorflow as tf

    files = _tfrecord_files(path)
    if not files:
        raise InputError(f"{path}: no TFRecord files ({', '.join(TFRECORD_SUFFIXES)}) found")
    kinds: dict[str, str] = {}
    lengths: dict[str, set[int]] = {}
    labels: list[str] = []
    max_value = 0.0
    rows = 0
    for f in files:
        compression = "GZIP" if f.suffix == ".gz" else ""
        try:
            for record in tf.data.TFRecordDataset(str(f), compression_type=compression):
                example = tf.train.Example.FromString(record.numpy())
                rows += 1
                for name, feature in example.features.feature.items():
                    kind = feature.WhichOneof("kind")
                    values = getattr(feature, kind).value if kind else []
                    previous = kinds.setdefault(name, kind)
                    if kind and previous != kind:
                        raise InputError(
                            f"{f}: feature {name!r} is {kind} in record {rows} but "
                            f"{previous} before"
                        )
                    lengths.setdefault(name, set()).add(len(values))
                    if name == label:
                        if len(values) != 1:
                            raise InputError(
                                f"{f}: label {name!r} has {len(values)} values in record "
                                f"{rows}; exactly 1 is needed"
                            )
                        v = values[0]
                        labels.append(v.decode() if isinstance(v, bytes) else str(v))
                    elif kind != "bytes_list" and len(values):
                        max_value = max(max_value, max(abs(float(x)) for x in values))
                if label not in example.features.feature:
                    raise InputError(f"{f}: record {rows} has no label feature {label!r}")
        except tf.errors.DataLossError as e:
            raise InputError(f"{f}: not a readable TFRecord file ({e.message})") from None
    if rows == 0:
        raise InputError(f"{path}: the TFRecord files hold no records")
    label_kind, classes = _classes(labels, str(path), label)
    numeric, strings = [], []
    for name in sorted(kinds):
        if name == label:
            continue
        if kinds[name] == "bytes_list":
            if lengths[name] - {0, 1}:
                raise InputError(f"{path}: string feature {name!r} holds several values")
            strings.append(name)
        elif len(lengths[name]) == 1:
            numeric.append((name, next(iter(lengths[name]))))
        elif lengths[name] == {0, 1}:
            numeric.append((name, 1))
        else:
            raise InputError(
                f"{path}: numeric feature {name!r} has varying lengths "
                f"{sorted(lengths[name])}; only scalars or fixed-length vectors are supported"
            )
    image_shape = None
    if not strings and len(numeric) == 1 and numeric[0][0] in ("image", "pixels"):
        n = numeric[0][1]
        for channels in (1, 3):
            side = math.isqrt(n // channels)
            if side * side * channels == n:
                image_shape = (side, side, channels)
                break
    if not strings and image_shape is None:
        image_shape = _image_shape_from_pixels([n for n, _ in numeric])
    return DataSpec(
        source=str(path),
        format="tfrecord",
        input_base=str(path if path.is_dir() else path.parent),
        input_pattern="*" if path.is_dir() else path.name,
        label=label,
        label_kind=label_kind,
        classes=classes,
        numeric_features=tuple(numeric),
        string_features=tuple(strings),
        image_shape=image_shape,
        pixel_scale=max(max_value, 1.0) if image_shape else 1.0,
        rows=rows,
    )


def convert_image_folder(path: Path, label: str, size: int, workdir: Path) -> DataSpec:
    """Reads an image folder (one subfolder per class) into a TFRecord of tf.Example.

    Each example holds `image` (size*size*channels int64 pixels) and the class name as `label`.
    """
    import numpy as np
    import tensorflow as tf
    from PIL import Image, UnidentifiedImageError

    class_dirs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    items: list[tuple[Path, str]] = []
    for d in class_dirs:
        for f in sorted(d.rglob("*")):
            if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES:
                items.append((f, d.name))
            elif f.is_file() and not f.name.startswith("."):
                logger.warning("%s: not a PNG/JPEG file; skipped", f)
    if not items:
        raise InputError(f"{path}: no PNG/JPEG images found (expected one subfolder per class)")
    _, classes = _classes((c for _, c in items), str(path), "class folder")
    images = []
    for f, _ in items:
        try:
            with Image.open(f) as im:
                im.load()
                images.append(im.copy())
        except (UnidentifiedImageError, OSError, SyntaxError) as e:
            raise InputError(f"{f}: cannot read image ({e})") from None
    channels = 1 if all(im.mode in ("L", "1", "I;16") for im in images) else 3
    mode = "L" if channels == 1 else "RGB"
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "images.tfrecord"
    staged = workdir / "images.tfrecord.staging"
    with tf.io.TFRecordWriter(str(staged)) as w:
        for im, (_, cls) in zip(images, items, strict=True):
            pixels = np.asarray(im.convert(mode).resize((size, size)), dtype=np.int64).reshape(-1)
            ex = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "image": tf.train.Feature(int64_list=tf.train.Int64List(value=pixels)),
                        label: tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[cls.encode()])
                        ),
                    }
                )
            )
            w.write(ex.SerializeToString(deterministic=True))
    write_if_changed(out, staged.read_bytes())
    staged.unlink()
    return DataSpec(
        source=str(path),
        format="tfrecord",
        input_base=str(workdir),
        input_pattern=out.name,
        label=label,
        label_kind="string",
        classes=classes,
        numeric_features=(("image", size * size * channels),),
        image_shape=(size, size, channels),
        pixel_scale=255.0,
        rows=len(items),
    )


def prepare(data: str | None, label: str, workdir: Path, image_size: int = 32) -> DataSpec:
    """Checks `--data` and prepares it for ExampleGen. `None` means the embedded digits.

    Raises:
        InputError: with a one-line message naming the file, column or flag.
    """
    if data is None:
        target = workdir / "digits" / "digits.csv"
        write_if_changed(target, gzip.decompress(DIGITS_CSV.read_bytes()))
        return dataclasses.replace(inspect_csv(target, "label"), source="embedded digits")
    path = Path(data).expanduser().resolve()
    if not path.exists():
        raise InputError(f"--data {data}: no such file or directory")
    name = path.name.lower()
    if path.is_file():
        if name.endswith((".csv", ".csv.gz")):
            if name.endswith(".gz"):
                target = workdir / "csv" / path.name[: -len(".gz")]
                write_if_changed(target, gzip.decompress(path.read_bytes()))
                spec = inspect_csv(target, label)
                return dataclasses.replace(spec, source=str(path))
            return inspect_csv(path, label)
        if name.endswith(TFRECORD_SUFFIXES):
            return inspect_tfrecords(path, label)
        raise InputError(
            f"--data {data}: unknown file type; expected .csv, .tfrecord(.gz) or an image folder"
        )
    entries = [p for p in path.iterdir() if not p.name.startswith(".")]
    if any(p.is_dir() for p in entries):
        return convert_image_folder(path, label, image_size, workdir / "images")
    if any(p.is_file() and p.name.lower().endswith(TFRECORD_SUFFIXES) for p in entries):
        return inspect_tfrecords(path, label)
    if any(p.name.lower().endswith(".csv") for p in entries):
        raise InputError(f"--data {data}: a folder of CSV files; pass one CSV file instead")
    raise InputError(
        f"--data {data}: empty or unrecognised folder; expected TFRecord files or one "
        "subfolder of PNG/JPEG images per class"
    )

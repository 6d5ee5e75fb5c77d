"""Inputs other than CSV: a folder (or file) of TFRecords of tf.Examples, inspected into a DataSpec,
and an image folder (one subfolder per class) converted into TFRecords of fixed-size pixels; files
rewritten only when their bytes change."""

from __future__ import annotations

import collections
import logging
import math
from pathlib import Path

from amp_pipeline.components.data.labels import _classes, label_notices
from amp_pipeline.core.data_spec import DataSpec
from amp_pipeline.core.errors import InputError

logger = logging.getLogger(__name__)


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfr", ".gz")


def _same_file(a: Path, b: Path, chunk: int = 1 << 20) -> bool:
    """Whether two files hold the same bytes, read a chunk at a time."""
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while block := fa.read(chunk):
            if block != fb.read(chunk):
                return False
    return True


def replace_if_changed(path: Path, staged: Path) -> bool:
    """Moves `staged` onto `path` unless `path` holds the same bytes (TFX's cache fingerprints
    input files by size and mtime). Returns True if replaced."""
    if path.exists() and _same_file(path, staged):
        staged.unlink()
        return False
    staged.replace(path)
    return True


def write_if_changed(path: Path, data: bytes) -> bool:
    """Writes `data` to `path` unless it already holds exactly that. Returns True if written."""
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return True


def _image_shape_from_pixels(names: list[str]) -> tuple[int, int, int] | None:
    """Columns pixel_0..pixel_{n-1} with n a perfect square form a one-channel image."""
    n = len(names)
    side = math.isqrt(n)
    if n >= 4 and side * side == n and names == [f"pixel_{i}" for i in range(n)]:
        return (side, side, 1)
    return None


def _tfrecord_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(
        p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(TFRECORD_SUFFIXES)
    )


def inspect_tfrecords(path: Path, label: str, files: list[Path] | None = None) -> DataSpec:
    """Checks TFRecord files of tf.Example (`path`'s, or the given `files` under it) and
    describes them."""
    import tensorflow as tf

    files = files or _tfrecord_files(path)
    if not files:
        raise InputError(f"{path}: no TFRecord files ({', '.join(TFRECORD_SUFFIXES)}) found")
    kinds: dict[str, str] = {}
    lengths: dict[str, set[int]] = {}
    labels: collections.Counter = collections.Counter()  # memory: one entry per class
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
                        labels[v.decode() if isinstance(v, bytes) else str(v)] += 1
                    elif kind != "bytes_list" and len(values):
                        max_value = max(max_value, max(abs(float(x)) for x in values))
                if label not in example.features.feature:
                    raise InputError(f"{f}: record {rows} has no label feature {label!r}")
        except tf.errors.DataLossError as e:
            raise InputError(f"{f}: not a readable TFRecord file ({e.message})") from None
    if rows == 0:
        raise InputError(f"{path}: the TFRecord files hold no records")
    label_kind, classes = _classes(labels, str(path), label)
    if kinds.get(label) == "bytes_list":
        label_kind = "string"  # how the records store it, whatever the classes look like
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
        class_counts=dict(labels),
        notices=tuple(label_notices(label, labels)),
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

    def unreadable(f: Path, e: BaseException) -> InputError:
        return InputError(f"{f}: cannot read image ({e})")

    # Two passes, one image in memory at a time: the headers decide grey or colour, then each
    # image is decoded, resized and written.
    grey = True
    for f, _ in items:
        try:
            with Image.open(f) as im:
                grey = grey and im.mode in ("L", "1", "I;16")
        except (UnidentifiedImageError, OSError, SyntaxError) as e:
            raise unreadable(f, e) from None
    channels = 1 if grey else 3
    mode = "L" if channels == 1 else "RGB"
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "images.tfrecord"
    staged = workdir / "images.tfrecord.staging"
    with tf.io.TFRecordWriter(str(staged)) as w:
        for f, cls in items:
            try:
                with Image.open(f) as im:
                    im.load()
                    small = im.convert(mode).resize((size, size))
            except (UnidentifiedImageError, OSError, SyntaxError) as e:
                raise unreadable(f, e) from None
            pixels = np.asarray(small, dtype=np.int64).reshape(-1)
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
    replace_if_changed(out, staged)
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
        class_counts=dict(collections.Counter(c for _, c in items)),
        notices=tuple(label_notices("class folder", collections.Counter(c for _, c in items))),
    )

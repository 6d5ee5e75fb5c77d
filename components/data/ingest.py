"""Input checking and preparation: turns `--data` into what ExampleGen reads, plus a DataSpec.

One pass over the input finds what the pipeline needs to know before it starts (feature kinds,
the label's classes, image shapes) and every problem a user should hear about in one line:
a missing path, an empty CSV, a missing or single-class label, text in a numeric column,
an unreadable image. Files are only rewritten when their content changed, so that TFX's
cache (which fingerprints input files by size and mtime) hits on a rerun.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import logging
import math
from collections.abc import Iterable
from pathlib import Path

from amp_pipeline.components.data.csv_format import parse_number
from amp_pipeline.core.data_spec import CLASSIFICATION, REGRESSION, DataSpec
from amp_pipeline.core.errors import InputError

logger = logging.getLogger(__name__)

DIGITS_CSV = Path(__file__).parent / "digits.csv.gz"
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


def _classes(values: Iterable[str], where: str, label: str) -> tuple[str, tuple[str, ...]]:
    """Returns (label_kind, classes in class-id order), or raises InputError."""
    distinct = set(values)
    if len(distinct) < 2:
        only = next(iter(distinct), None)
        raise InputError(
            f"{where}: label {label!r} has a single class ({only!r}); at least 2 are needed"
        )
    numbers = {v: parse_number(v) for v in distinct}
    if all(x is not None for x in numbers.values()):
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


def decide_task(figures, asked: str, files: list[Path], fmt, label: str, where: str):
    """(task, why): classification or regression, from `--task` and the label's figures
    (components/data/inspection.py::LabelFigures).

    auto takes a numeric label as a regression target when it holds non-integer values or more
    than AUTO_MAX_CLASSES distinct integers; other labels are classes.

    Raises:
        InputError: a regression label that is not numeric, not finite or constant; a
            classification label with more distinct values than can be counted.
    """
    from amp_pipeline.components.data.inspection import (
        AUTO_MAX_CLASSES,
        MAX_LABEL_VALUES,
        first_text_line,
    )

    column = fmt.original(label)
    numeric = figures.numeric and (figures.n + figures.non_finite) > 0
    if asked == "auto":
        if not numeric:
            asked, why = CLASSIFICATION, "--task auto: the label is not numeric"
        elif not figures.integers:
            asked, why = REGRESSION, "--task auto: it holds non-integer numbers"
        elif figures.distinct is None or figures.distinct > AUTO_MAX_CLASSES:
            many = f"{figures.distinct or MAX_LABEL_VALUES:,}"
            many = f"over {many}" if figures.distinct is None else many
            asked = REGRESSION
            why = f"--task auto: it holds {many} distinct integers, more than {AUTO_MAX_CLASSES}"
        else:
            asked = CLASSIFICATION
            why = f"--task auto: {figures.distinct} distinct integers, at most {AUTO_MAX_CLASSES}"
    else:
        why = f"--task {asked}"
    if asked == CLASSIFICATION:
        if figures.distinct is None:
            raise InputError(
                f"{where}: label {column!r} has more than {MAX_LABEL_VALUES:,} distinct values: "
                "too many classes" + ("; pass --task regression" if numeric else "")
            )
        return CLASSIFICATION, why
    if not figures.numeric:
        for path in files:
            hit = first_text_line(path, fmt, label)
            if hit:
                raise InputError(
                    f"{path}: label {column!r} is not numeric: line {hit[0]} holds {hit[1]!r}; "
                    "regression needs numbers"
                )
        raise InputError(f"{where}: label {column!r} is not numeric; regression needs numbers")
    if figures.non_finite:
        for path in files:
            hit = _first_line(path, fmt, label, lambda t: not math.isfinite(float(t)))
            if hit:
                raise InputError(
                    f"{path}: label {column!r} holds {hit[1]!r} on line {hit[0]}; regression "
                    "needs finite numbers"
                )
        raise InputError(f"{where}: label {column!r} holds values that are not finite")
    if not figures.std > 0:
        raise InputError(
            f"{where}: label {column!r} is constant ({figures.low:g}); regression needs a label "
            "that varies"
        )
    return REGRESSION, why


def _first_line(path: Path, fmt, column: str, test):
    from amp_pipeline.components.data.inspection import first_line_where

    def safe(text: str) -> bool:
        try:
            return bool(test(text))
        except ValueError:
            return False

    return first_line_where(path, fmt, column, safe)


def inspect_csv(
    files: list[Path],
    label: str,
    options=None,
    source: str | None = None,
    input_base: Path | None = None,
    pattern: str | None = None,
) -> DataSpec:
    """Checks CSV files (a file, or shards with one header each) and describes them.

    Raises:
        InputError: one line naming the file, line, column or flag.
    """
    from amp_pipeline.components.data.inspection import CsvOptions, inspect

    where = source or str(files[0])
    options = options or CsvOptions()
    found = inspect(files, label, options, where)
    fmt, columns = found["format"], found["columns"]
    label_name = found["label"]
    figures = found["label_figures"]
    task, why = decide_task(figures, options.task, files, fmt, label_name, where)
    if task == REGRESSION:
        label_kind, classes, class_counts = "float", (), {}
    else:
        class_counts = dict(figures.counts)
        label_kind, classes = _classes(class_counts, where, fmt.original(label_name))
    excluded = {e["feature"] for e in found["excluded"]}
    texts = tuple(found["text"])
    categorical = tuple(found["categorical"])
    bags = tuple(found["bags"].items())
    embedded = set(categorical) | set(found["bags"])
    numeric, strings = [], []
    for name in fmt.names:
        if name == label_name or name in excluded or name in texts or name in embedded:
            continue
        kind = fmt.types.get(name, "string")
        if kind in ("int", "float", "bool"):
            numeric.append((name, 1))
        else:
            strings.append(name)
    if not numeric and not strings and not texts and not embedded:
        raise InputError(f"{where}: no feature columns besides the label {label!r}")
    for name in sorted(found["closed"]):
        if name not in strings and name not in categorical and name not in found["bags"]:
            raise InputError(
                f"--closed-columns {fmt.original(name)}: column {fmt.original(name)!r} is not a "
                "string or category feature (only their values can be a closed set)"
            )
    keep = tuple(n for n in fmt.names if n not in excluded)
    types = {n: fmt.types.get(n, "string") for n in keep}
    types[label_name] = label_kind  # integer classes stay integers in the examples
    fmt = dataclasses.replace(fmt, keep=keep, types=types)
    image_shape = (
        _image_shape_from_pixels([n for n, _ in numeric]) if not strings and not embedded else None
    )
    pixel_scale = max(columns[n].maximum for n, _ in numeric) if image_shape else 1.0
    notices = [
        f"column {e['column']!r} is not a feature: {e['reason']}"
        + (
            ""
            if e["reason"].startswith(("dropped", "empty"))
            else f"; keep it with --keep-columns {e['column']!r}"
        )
        for e in found["excluded"]
    ]
    if found["unlabelled"]:
        notices.insert(
            0,
            f"{found['unlabelled']:,} of {found['rows']:,} rows have no label "
            f"{fmt.original(label_name)!r} and are left out before the split "
            "(--missing-label error stops instead)",
        )
    max_tokens, text_figures, text_notices = _text_facts(texts, columns, options, fmt)
    notices += text_notices
    if task == REGRESSION:
        notices.append(
            f"label {fmt.original(label_name)!r} is a regression target ({why}): mean "
            f"{figures.mean:.4g}, standard deviation {figures.std:.4g}, from {figures.low:.4g} "
            f"to {figures.high:.4g}"
        )
    else:
        notices += label_notices(fmt.original(label_name), class_counts)
    for notice in notices:  # the caller shows them (the run's terminal lines, `inspect`)
        logger.info("%s", notice)
    return DataSpec(
        source=where,
        format="csv",
        input_base=str(input_base or files[0].parent),
        input_pattern=pattern or files[0].name,
        label=label_name,
        label_kind=label_kind,
        classes=classes,
        numeric_features=tuple(numeric),
        string_features=tuple(strings),
        text_features=texts,
        categorical_features=categorical,
        bag_features=bags,
        bag_separator=options.separator,
        max_tokens=max_tokens,
        vocab_size=options.vocab_size if texts else 0,
        text_figures=text_figures,
        image_shape=image_shape,
        pixel_scale=float(pixel_scale) or 1.0,
        rows=found["rows"],
        csv_format=fmt.to_dict(),
        excluded=tuple(found["excluded"]),
        unlabelled_rows=found["unlabelled"],
        closed_features=tuple(sorted(found["closed"])),
        missing={n: columns[n].nulls for n in keep if columns[n].nulls and n != label_name},
        class_counts={str(k): int(v) for k, v in class_counts.items()},
        notices=tuple(notices),
        task=task,
        task_reason=why,
        label_mean=figures.mean if task == REGRESSION else 0.0,
        label_std=figures.std if task == REGRESSION else 1.0,
        label_range=(figures.low, figures.high) if task == REGRESSION else (),
    )


def _text_facts(texts, columns, options, fmt) -> tuple[int, dict, list[str]]:
    """(max_tokens, per-feature length figures, notices) of the text features."""
    from amp_pipeline.components.data import text

    if not texts:
        return 0, {}, []
    lengths = {name: columns[name].sample_token_lengths for name in texts}
    max_tokens = options.max_tokens or max(text.auto_max_tokens(v) for v in lengths.values())
    figures, notices = {}, []
    for name in texts:
        found = text.length_figures(lengths[name], max_tokens)
        figures[name] = {
            **found,
            "sampled_rows": len(lengths[name]),
            "mean_chars": round(columns[name].sample_mean_length, 1),
        }
        column = fmt.original(name)
        notices.append(
            f"column {column!r} is text: {found['p50']} tokens per value at the median, "
            f"{found['p95']} at p95, {found['max']} at most; {max_tokens} token ids per value "
            f"({'--max-tokens' if options.max_tokens else 'p95, a multiple of 8'}), a "
            f"vocabulary of at most {options.vocab_size:,} tokens; use it as categories with "
            f"--categorical-columns {column!r}"
        )
        if found["truncated_share"] > 0:
            notices.append(
                f"text in column {column!r}: {found['truncated_share']:.1%} of the sampled "
                f"values are longer than {max_tokens} tokens and are cut (--max-tokens)"
            )
        if found["empty_share"] > 0:
            notices.append(
                f"text in column {column!r}: {found['empty_share']:.1%} of the sampled values "
                "are empty (they become all padding)"
            )
    return max_tokens, figures, notices


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


CSV_SUFFIXES = (".csv", ".csv.gz")


def _csv_glob(data: str) -> tuple[Path, str, list[Path]] | None:
    """(folder, pattern, files) of a glob such as `exports/part-*.csv`, or None."""
    if not any(ch in data for ch in "*?["):
        return None
    pattern_path = Path(data).expanduser()
    folder = pattern_path.parent.resolve()
    if any(ch in str(pattern_path.parent) for ch in "*?["):
        raise InputError(f"--data {data}: wildcards are allowed in the file name only")
    if not folder.is_dir():
        raise InputError(f"--data {data}: no such folder {folder}")
    files = sorted(
        p
        for p in folder.glob(pattern_path.name)
        if p.is_file() and p.name.lower().endswith(CSV_SUFFIXES) and not p.name.startswith(".")
    )
    if not files:
        raise InputError(f"--data {data}: no CSV files match")
    return folder, pattern_path.name, files


def prepare(
    data: str | None,
    label: str,
    workdir: Path,
    image_size: int = 32,
    csv_options=None,
) -> DataSpec:
    """Checks `--data` and prepares it for ExampleGen. `None` means the embedded digits.

    `data` is a CSV file (`.csv`, `.csv.gz`), a folder of CSV shards or a glob of them, a
    TFRecord file or folder, or an image folder (one subfolder per class). `csv_options`
    (amp_pipeline.components.data.inspection.CsvOptions) are the user's CSV flags.

    Raises:
        InputError: with a one-line message naming the file, column or flag.
    """
    if data is None:
        target = workdir / "digits" / "digits.csv"
        write_if_changed(target, gzip.decompress(DIGITS_CSV.read_bytes()))
        return inspect_csv([target], "label", csv_options, source="embedded digits")
    shards = _csv_glob(data)
    if shards is not None:
        folder, pattern, files = shards
        return inspect_csv(files, label, csv_options, data, folder, pattern)
    path = Path(data).expanduser().resolve()
    if not path.exists():
        raise InputError(f"--data {data}: no such file or directory")
    name = path.name.lower()
    if path.is_file():
        if name.endswith(CSV_SUFFIXES):
            return inspect_csv([path], label, csv_options, str(path))
        if name.endswith(TFRECORD_SUFFIXES):
            return inspect_tfrecords(path, label)
        raise InputError(
            f"--data {data}: unknown file type; expected .csv, .csv.gz, .tfrecord(.gz), a "
            "folder of CSV shards or an image folder"
        )
    entries = [p for p in path.iterdir() if not p.name.startswith((".", "_"))]
    if any(p.is_dir() for p in entries):
        return convert_image_folder(path, label, image_size, workdir / "images")
    csvs = [p for p in entries if p.is_file() and p.name.lower().endswith(CSV_SUFFIXES)]
    if csvs:
        return inspect_csv(sorted(csvs), label, csv_options, str(path), path, "*")
    if any(p.is_file() and p.name.lower().endswith(TFRECORD_SUFFIXES) for p in entries):
        return inspect_tfrecords(path, label)
    raise InputError(
        f"--data {data}: empty or unrecognised folder; expected CSV shards, TFRecord files or "
        "one subfolder of PNG/JPEG images per class"
    )

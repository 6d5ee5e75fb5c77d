"""Input checking and preparation: turns `--data` into what ExampleGen reads, plus a DataSpec.

One pass over the input finds what the pipeline needs to know before it starts (feature kinds,
the label's classes, image shapes) and every problem a user should hear about in one line:
a missing path, an empty CSV, a missing or single-class label, text in a numeric column,
an unreadable image. Files are only rewritten when their content changed, so that TFX's
cache (which fingerprints input files by size and mtime) hits on a rerun.
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import math
from pathlib import Path

from amp_pipeline.components.data.labels import _classes, label_notices
from amp_pipeline.components.data.record_inputs import (
    TFRECORD_SUFFIXES,
    _image_shape_from_pixels,
    convert_image_folder,
    inspect_tfrecords,
    write_if_changed,
)
from amp_pipeline.components.data.spans import selection as spans
from amp_pipeline.core.data_spec import CLASSIFICATION, REGRESSION, DataSpec
from amp_pipeline.core.errors import InputError

logger = logging.getLogger(__name__)


DIGITS_CSV = Path(__file__).parent / "digits.csv.gz"


def decide_task(figures, asked: str, files: list[Path], fmt, label: str, where: str):
    """(task, why): classification or regression, from `--task` and the label's figures
    (components/data/inspection.py::LabelFigures).

    auto takes a numeric label as a regression target when it holds non-integer values or more
    than AUTO_MAX_CLASSES distinct integers; other labels are classes.

    Raises:
        InputError: a regression label that is not numeric, not finite or constant; a
            classification label with more distinct values than can be counted.
    """
    from amp_pipeline.components.data.csv_lines import first_text_line
    from amp_pipeline.components.data.inspection import AUTO_MAX_CLASSES, MAX_LABEL_VALUES

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
    from amp_pipeline.components.data.csv_lines import first_line_where

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
        label_kind, classes, class_counts = "float", tuple[str, ...](), {}
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


def prepare_spans(
    data: str, label: str, csv_options, span: int | None, rolling_spans: int
) -> DataSpec:
    """The selected spans' files checked as one input: CSV files or TFRecord files."""
    selection = spans.select(data, span, rolling_spans, CSV_SUFFIXES + TFRECORD_SUFFIXES)
    files = selection.all_files
    csvs = [f for f in files if f.name.lower().endswith(CSV_SUFFIXES)]
    if csvs and len(csvs) != len(files):
        raise InputError(f"--data {data}: the spans mix CSV and TFRecord files; use one kind")
    base = Path(selection.input_base)
    if csvs:
        spec = inspect_csv(csvs, label, csv_options, data, base, selection.pattern)
    else:
        spec = inspect_tfrecords(base, label, files)
    logger.info("--data %s: %s", data, selection.describe())
    return dataclasses.replace(
        spec,
        source=data,
        input_base=str(base),
        input_pattern=selection.pattern,
        spans=selection.record(),
    )


def prepare(
    data: str | None,
    label: str,
    workdir: Path,
    image_size: int = 32,
    csv_options=None,
    span: int | None = None,
    rolling_spans: int = 1,
) -> DataSpec:
    """Checks `--data` and prepares it for ExampleGen. `None` means the embedded digits.

    `data` is a CSV file (`.csv`, `.csv.gz`), a folder of CSV shards or a glob of them, a
    TFRecord file or folder, or an image folder (one subfolder per class). `csv_options`
    (amp_pipeline.components.data.inspection.CsvOptions) are the user's CSV flags. A pattern
    with `{SPAN}` reads the newest span, `span`, and the `rolling_spans - 1` before it
    (components/data/spans/selection.py).

    Raises:
        InputError: with a one-line message naming the file, column or flag.
    """
    if data is None:
        target = workdir / "digits" / "digits.csv"
        write_if_changed(target, gzip.decompress(DIGITS_CSV.read_bytes()))
        return inspect_csv([target], "label", csv_options, source="embedded digits")
    if spans.has_spans(data):
        return prepare_spans(data, label, csv_options, span, rolling_spans)
    if span is not None or rolling_spans != 1:
        flag = "--span" if span is not None else "--rolling-spans"
        raise InputError(f"{flag}: --data {data} has no {{SPAN}} in its path to number spans by")
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

"""What the input check made of `--data`, for people: `amp-pipeline inspect` prints it."""

from __future__ import annotations

from amp_pipeline.core.data_spec import CATEGORY_OOV_BUCKETS, CATEGORY_TOP_K, DataSpec


def task_text(data: DataSpec) -> str:
    """'10 classes', or 'regression' with the label's range."""
    if data.regression:
        low, high = data.label_range
        return f"regression, {low:g} to {high:g}"
    return f"{data.num_classes} classes"


def format_data(data: DataSpec) -> str:
    """Columns as written and as features, their types and missing values, the exclusions with
    their reasons, the classes, and every notice."""
    lines = [f"data         {data.source}: {data.rows:,} rows, {task_text(data)} ({data.format})"]
    fmt = data.csv_format
    if fmt:
        delimiter = {"\t": "tab", ",": "','", ";": "';'", "|": "'|'"}.get(
            fmt["delimiter"], repr(fmt["delimiter"])
        )
        lines.append(
            f"format       delimiter {delimiter}, encoding {fmt['encoding']}, "
            f"{len(fmt['na_values'])} missing-value markers "
            f"({', '.join(repr(v) for v in fmt['na_values'][:6])}"
            f"{', ...' if len(fmt['na_values']) > 6 else ''})"
        )
    kinds = dict.fromkeys((n for n, _ in data.numeric_features), "numeric")
    kinds.update(dict.fromkeys(data.string_features, "string"))
    types = dict((fmt or {}).get("types", {}))
    kinds.update(dict.fromkeys(data.text_features, "text"))
    types.update(dict.fromkeys(data.text_features, "text"))
    kinds.update(dict.fromkeys(data.categorical_features, "category"))
    types.update(dict.fromkeys(data.categorical_features, "category"))
    kinds.update(dict.fromkeys((n for n, _ in data.bag_features), "bag"))
    types.update(dict.fromkeys((n for n, _ in data.bag_features), "bag"))
    width = max([len(data.original_name(n)) for n in kinds] + [6])
    lines.append("")
    lines.append(f"  {'column':<{width}}  {'feature':<{width}}  {'type':<8}  missing")
    for name in kinds:
        missing = data.missing.get(name, 0)
        share = f" ({missing / data.rows:.1%})" if missing and data.rows else ""
        lines.append(
            f"  {data.original_name(name):<{width}}  {name:<{width}}  "
            f"{types.get(name, kinds[name]):<8}  {missing:,}{share}"
        )
    lines.append(
        f"  {data.original_name(data.label):<{width}}  {data.label:<{width}}  label     "
        f"{task_text(data)}"
    )
    lines.append(f"task         {data.task} ({data.task_reason or 'the default'})")
    if data.excluded:
        lines.append("")
        for e in data.excluded:
            lines.append(f"excluded     {e['column']!r}: {e['reason']}")
    if data.class_counts:
        ranked = sorted(data.class_counts.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{k} {v:,}" for k, v in ranked[:12])
        lines.append("")
        lines.append(f"classes      {shown}{', ...' if len(ranked) > 12 else ''}")
    for name in data.text_features:
        f = data.text_figures.get(name, {})
        lines.append(
            f"text         {data.original_name(name)!r}: tokens per value p50 {f.get('p50')}, "
            f"p95 {f.get('p95')}, max {f.get('max')} (first {f.get('sampled_rows', 0):,} rows); "
            f"{data.max_tokens} ids per value, vocabulary of at most {data.vocab_size:,}; "
            f"{f.get('empty_share', 0):.1%} empty, {f.get('truncated_share', 0):.1%} cut"
        )
    for name in data.categorical_features:
        lines.append(
            f"category     {data.original_name(name)!r}: a vocabulary of its values (the "
            f"{CATEGORY_TOP_K:,} most frequent, {CATEGORY_OOV_BUCKETS} id for any other, id 0 "
            "for a missing cell) and a learned embedding"
        )
    for name, length in data.bag_features:
        lines.append(
            f"bag          {data.original_name(name)!r}: several values per cell, split at "
            f"{data.bag_separator!r}, up to {length} kept; each value embedded, their mean used"
        )
    if data.image_shape:
        h, w, c = data.image_shape
        lines.append(f"image        {h}x{w}x{c}, pixels divided by {data.pixel_scale:g}")
    lines += [f"note         {n}" for n in data.notices if not n.startswith("column ")]
    return "\n".join(lines)

"""Drift between spans: the newest span's statistics against the span before it, with TFDV's
drift comparators, as Vertex Model Monitoring compares one window with the previous one.

Each feature and the label gets a comparator in a schema inferred from the earlier span:
- categories, strings and a class label: the L-infinity distance between the two value
  distributions (TFDV's `infinity_norm`; the largest change of any value's share);
- numbers and a regression label: the Jensen-Shannon divergence of their histograms (TFDV's
  `jensen_shannon_divergence`).
The thresholds are written in that schema (`span_drift_schema.pbtxt` beside the result), so
a user reads which threshold each feature was held to. Free text and multi-valued columns are
not compared (a value distribution of whole texts says nothing). Each span is read whole up
to MAX_ROWS rows (its first rows past that: say so), with the input check's CSV format.

A drift past a threshold is an anomaly. It warns by default; `--drift fail` makes it stop the
run before training (exit 2), so that a model is never trained on a span that moved without
someone looking.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from amp_pipeline.core.data_spec import DataSpec
from amp_pipeline.core.errors import InputError

logger = logging.getLogger(__name__)

CATEGORICAL_THRESHOLD = 0.1  # L-infinity: a value's share moved by 10 points
NUMERIC_THRESHOLD = 0.1  # Jensen-Shannon divergence of the histograms (0 to 1)
MAX_ROWS = 200_000
DRIFT_MODES = ("warn", "fail")
RESULT_JSON = "span_drift.json"
SCHEMA_PBTXT = "span_drift_schema.pbtxt"


def compared_columns(data: DataSpec) -> dict[str, str]:
    """{feature: "categorical" | "numeric"} of what is compared, the label included."""
    out = {name: "numeric" for name, width in data.numeric_features if width == 1}
    out.update(dict.fromkeys((*data.categorical_features, *data.string_features), "categorical"))
    out[data.label] = "numeric" if data.regression else "categorical"
    return out


def _frame(files: list[str], data: DataSpec, columns: dict[str, str]):
    """The span's compared columns as a pandas frame (categories as text), at most MAX_ROWS."""
    import pyarrow as pa

    from amp_pipeline.components.data.csv_format import CsvFormat, batches

    assert data.csv_format is not None
    fmt = CsvFormat.from_dict(data.csv_format)
    parts, rows = [], 0
    for f in files:
        for batch in batches(Path(f), fmt, include=tuple(columns)):
            parts.append(batch)
            rows += batch.num_rows
            if rows >= MAX_ROWS:
                break
        if rows >= MAX_ROWS:
            break
    frame = pa.Table.from_batches(parts).to_pandas().head(MAX_ROWS)
    for name, kind in columns.items():
        if kind == "categorical" and name in frame:
            frame[name] = frame[name].map(lambda v: None if v is None or v != v else str(v))
    return frame, rows >= MAX_ROWS


def compare(
    data: DataSpec,
    out_dir: Path,
    categorical_threshold: float = CATEGORICAL_THRESHOLD,
    numeric_threshold: float = NUMERIC_THRESHOLD,
) -> dict | None:
    """The newest selected span against the span before it (None without spans or without
    an earlier span): {"span", "previous_span", "features": [{feature, comparator, value,
    threshold, drifted}], "drifted": [feature names], "rows": {...}}; written to
    out_dir/span_drift.json with the schema that holds the thresholds."""
    if not data.spans:
        return None
    chosen, available = data.spans["spans"], data.spans["available"]
    newest = chosen[-1]
    earlier = [s for s in available if s < newest]
    if not earlier:
        return {"span": newest, "previous_span": None, "features": [], "drifted": [],
                "skipped": f"span {newest} is the first span: nothing to compare with"}  # fmt: skip
    previous = earlier[-1]
    if data.format != "csv":
        return {"span": newest, "previous_span": previous, "features": [], "drifted": [],
                "skipped": "drift between spans is computed for CSV spans only"}  # fmt: skip
    import tensorflow_data_validation as tfdv

    from amp_pipeline.components.data.spans import selection as spans

    base = Path(data.input_base)
    columns = compared_columns(data)

    def files(span: int) -> list[str]:
        selection = spans.select(str(base / data.input_pattern), span=span)
        return [str(f) for f in selection.all_files]

    current, current_cut = _frame(files(newest), data, columns)
    before, before_cut = _frame(files(previous), data, columns)
    current_stats = tfdv.generate_statistics_from_dataframe(current)
    before_stats = tfdv.generate_statistics_from_dataframe(before)
    schema = tfdv.infer_schema(before_stats)
    for feature in schema.feature:
        if columns.get(feature.name) == "categorical":
            feature.drift_comparator.infinity_norm.threshold = categorical_threshold
        else:
            feature.drift_comparator.jensen_shannon_divergence.threshold = numeric_threshold
    anomalies = tfdv.validate_statistics(current_stats, schema, previous_statistics=before_stats)
    features: list[dict[str, Any]] = []
    for info in anomalies.drift_skew_info:
        name = info.path.step[0]
        for m in info.drift_measurements:
            comparator = "L-infinity" if m.type == m.L_INFTY else "Jensen-Shannon"
            features.append(
                {
                    "feature": data.original_name(name),
                    "comparator": comparator,
                    "value": round(float(m.value), 6),
                    "threshold": float(m.threshold),
                    "drifted": bool(m.value > m.threshold),
                }
            )
    features.sort(key=lambda f: -float(f["value"]) / float(f["threshold"]))
    result = {
        "span": newest,
        "previous_span": previous,
        "features": features,
        "drifted": [f["feature"] for f in features if f["drifted"]],
        "rows": {"span": len(current), "previous_span": len(before)},
        "rows_capped_at": MAX_ROWS if (current_cut or before_cut) else None,
        "schema": str(out_dir / SCHEMA_PBTXT),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    tfdv.write_schema_text(schema, str(out_dir / SCHEMA_PBTXT))
    (out_dir / RESULT_JSON).write_text(json.dumps(result, indent=2) + "\n")
    return result


def summary_line(result: dict | None) -> str:
    """One line for the header and the report ('' without spans)."""
    if not result:
        return ""
    if result.get("skipped"):
        return result["skipped"]
    head = f"span {result['span']} vs span {result['previous_span']}"
    if not result["drifted"]:
        top = result["features"][0] if result["features"] else None
        most = (
            f"; largest {top['feature']} {top['comparator']} {top['value']:.3g} "
            f"(threshold {top['threshold']:g})"
            if top
            else ""
        )
        return f"{head}: no feature past its threshold{most}"
    drifted = [f for f in result["features"] if f["drifted"]]
    listed = ", ".join(
        f"{f['feature']} {f['comparator']} {f['value']:.3g} > {f['threshold']:g}"
        for f in drifted[:4]
    )
    more = f" and {len(drifted) - 4} more" if len(drifted) > 4 else ""
    return f"{head}: DRIFT in {len(drifted)} of {len(result['features'])} columns: {listed}{more}"


def check(result: dict | None, mode: str) -> None:
    """--drift fail: a drift past a threshold stops the run.

    Raises:
        InputError: one line naming the spans and the columns that drifted.
    """
    if mode == "fail" and result and result.get("drifted"):
        raise InputError(
            f"--drift fail: {summary_line(result)} (thresholds in {result['schema']}; "
            "--drift warn trains anyway)"
        )

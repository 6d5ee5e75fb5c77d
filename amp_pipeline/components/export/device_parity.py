"""What a device answers, measured as a device runs it: raw eval rows, their inputs built by the
shipped `tflite/edge_rows.py` (numpy only, as an app builds them), each TFLite variant run one row
at a time by the LiteRT interpreter (ai-edge-litert, not tf.lite), against the SavedModel's
`predict_raw` on the same rows (the same cells: NaN and -2**63 for a missing number or ID).

The gate's TFLite rules read this report (components/gate/rules.py::tflite_rules,
components/gate/regression.py::tflite_rules): per variant, agreement with the SavedModel's class
(classification) or the paired absolute errors (regression), the largest probability or
prediction difference, and the median LiteRT latency per row, with XNNPACK's thread count.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import numpy as np

from amp_pipeline.core import names

LATENCY_ROWS = 200  # rows timed per variant (after one warm-up call)
THREADS = 1  # XNNPACK threads: one core, as a phone app's worker thread runs it
# A regression variant's answer agrees with the SavedModel's within this share of the label's
# standard deviation.
REGRESSION_AGREEMENT = 0.01


def load_shipped(path: Path):
    """A pure-Python file that ships in a model's tflite/ folder (edge_rows.py, tokenizer.py),
    loaded by path: the gate checks what an app imports, not the repository's copy."""
    spec = importlib.util.spec_from_file_location(f"amp_shipped_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_cells(record: bytes) -> dict:
    """A raw tf.Example's features as cells: a value, a list (vectors), or absent."""
    import tensorflow as tf

    out = {}
    for name, feature in tf.train.Example.FromString(record).features.feature.items():
        kind = feature.WhichOneof("kind")
        values = list(getattr(feature, kind).value) if kind else []
        if not values:
            continue
        if kind == "bytes_list":
            values = [v.decode("utf-8") for v in values]
        out[name] = values[0] if len(values) == 1 else values
    return out


def raw_batch(signature, cells: list[dict]) -> dict:
    """predict_raw's inputs for these rows: missing cells as NaN, -2**63 or ""."""
    import tensorflow as tf

    batch = {}
    for name, spec in signature.structured_input_signature[1].items():
        width = spec.shape[1] if spec.shape.rank == 2 else None
        column = [c.get(name) for c in cells]
        if spec.dtype == tf.string:
            batch[name] = tf.constant([("" if v is None else str(v)).encode() for v in column])
            continue
        missing = np.nan if spec.dtype.is_floating else names.INT64_MISSING
        if width is None:
            values = [missing if v is None else v for v in column]
        else:
            lists = [(list(v) if isinstance(v, list) else [v] if v is not None else [])
                     for v in column]  # fmt: skip
            values = [(v + [missing] * width)[:width] for v in lists]
        batch[name] = tf.constant(np.array(values).astype(spec.dtype.as_numpy_dtype))
    return batch


def reference(saved_model_dir: str | Path, examples: list[bytes], custom: bool, batch: int = 512):
    """The SavedModel's answers (probabilities, or predictions in label units) on the rows, and
    for a module's own preprocessing the Transform output `x` the device then takes."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model_dir))
    raw = loaded.signatures[names.RAW_SIGNATURE]
    transform = loaded.signatures[names.TRANSFORM_SIGNATURE]
    cells = [example_cells(r) for r in examples]
    answers, xs = [], []
    for i in range(0, len(examples), batch):
        if custom:  # no raw device inputs: the device takes `x`, served answers from tf.Examples
            chunk = tf.constant(examples[i : i + batch])
            xs.append(transform(examples=chunk)[names.FEATURES_KEY].numpy())
            out = loaded.signatures[names.SERVING_SIGNATURE](examples=chunk)
        else:
            out = raw(**raw_batch(raw, cells[i : i + batch]))
        key = names.PREDICTIONS if names.PREDICTIONS in out else names.PROBABILITIES
        answers.append(out[key].numpy())
    return cells, np.concatenate(answers), (np.concatenate(xs) if custom else None)


def _labels(cells: list[dict], card: dict, label: str) -> np.ndarray:
    if card["output"]["task"] == "regression":
        return np.array([float(c.get(label, np.nan)) for c in cells], np.float64)
    index = {name: i for i, name in enumerate(card["output"]["classes"])}
    return np.array([index.get(str(c.get(label)), -1) for c in cells], np.int64)


def _rows(cells: list[dict], card: dict) -> list[dict]:
    """Each example as a CSV row: {column: cell} for the columns the model takes."""
    pairs = [p for i in card["inputs"] for p in zip(i["columns"], i["features"], strict=True)]
    return [{column: c.get(feature) for column, feature in pairs} for c in cells]


def measure(runner, feeds: list[dict]) -> tuple[np.ndarray, float]:
    """Every row's output, one call per row, and the median milliseconds per call."""
    outputs, seconds = [], []
    runner(feeds[0])  # warm-up: XNNPACK packs the weights on the first call
    for k, feed in enumerate(feeds):
        started = time.perf_counter()
        outputs.append(runner(feed))
        if k < LATENCY_ROWS:
            seconds.append(time.perf_counter() - started)
    return np.stack(outputs), float(np.median(seconds) * 1000.0)


def check(
    saved_model_dir: str | Path, examples: list[bytes], label: str, trainer_report: dict
) -> dict:
    """Every converted variant's parity on `examples` (the report the gate's TFLite rules read:
    the trainer's conversion records, each with its measured figures added)."""
    from amp_pipeline.components.export.tflite import LiteRTRunner, parity, regression_parity

    folder = Path(saved_model_dir) / "tflite"
    variants = {k: dict(v) for k, v in (trainer_report.get("variants") or {}).items()}
    converted = [v for v, r in variants.items() if r.get("converted")]
    report = {**trainer_report, "variants": variants}
    if not converted or not examples:
        return report
    kit = load_shipped(folder / "edge_rows.py")
    card = kit.card(folder, converted[0])
    custom = [i["kind"] for i in card["inputs"]] == ["x"]
    cells, answers, x = reference(saved_model_dir, examples, custom)
    labels = _labels(cells, card, label)
    if custom:
        feeds = [{names.FEATURES_KEY: row[None, :].astype(np.float32)} for row in x]
    else:
        feeds = [kit.feed(card, row, folder) for row in _rows(cells, card)]
    regression = card["output"]["task"] == "regression"
    std = float(card["output"].get("label_std") or 1.0)
    if regression:
        report["reference"] = {
            "mae": float(np.mean(np.abs(answers - labels))),
            "examples": len(labels),
        }
    else:
        report["reference"] = {
            "accuracy": float(np.mean(answers.argmax(1) == labels)),
            "examples": len(labels),
        }
    for variant in converted:
        runner = LiteRTRunner(folder / f"model_{variant}.tflite", threads=THREADS)
        outputs, latency = measure(runner, feeds)
        if regression:
            predicted = outputs.reshape(-1).astype(np.float64)
            figures = regression_parity(predicted, answers, labels, std)
            close = np.abs(predicted - answers) <= REGRESSION_AGREEMENT * std
            figures["within_1pct_std"] = float(np.mean(close))
        else:
            figures = parity(outputs, answers, labels)
        variants[variant].update(
            **figures, latency_ms=latency, latency_threads=THREADS, runtime=runtime_name()
        )
    report["sample"] = (
        f"the first {len(labels)} raw examples of the eval split, one row at a time through "
        f"LiteRT ({runtime_name()}), inputs built by tflite/edge_rows.py, against the "
        f"SavedModel's predict_raw"
    )
    return report


def runtime_name() -> str:
    from importlib.metadata import version

    return f"ai-edge-litert {version('ai-edge-litert')}, XNNPACK, {THREADS} thread"

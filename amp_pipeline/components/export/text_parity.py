"""The device tokenizer against the Transform graph, on the eval split.

A TFLite model of a text model takes token ids: string splitting is no TFLite builtin op, so a
device app tokenises with the shipped pure-Python `tflite/tokenizer.py` (the rule of
components/data/text.py, copied beside the models) and the vocabulary shipped with it. This check
takes the raw eval examples, makes their ids twice (the exported SavedModel's
`transform_features` signature, which is Transform's graph, and the shipped tokenizer.py, loaded
by path), and counts the texts whose ids differ. The gate's `tflite_tokenizer` rule rejects a
candidate whose tokenizer differs on any eval text it checked: the first examples of the eval
split, as many as the TFLite parity reads (`--tflite-parity-examples`, 5,000 by default). The
TFLite variants themselves are then measured on the tokenizer's ids, with every other column
raw (components/export/device_parity.py).

Categories and bags need no device encoder: their vocabularies are hash tables inside the TFLite
graph (components/export/device_graph.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from amp_pipeline.core import names


def sidecar(saved_model_dir: str | Path) -> dict | None:
    """The first TFLite sidecar next to a pushed SavedModel, or None without TFLite models."""
    found = sorted((Path(saved_model_dir) / "tflite").glob("model_*.json"))
    return json.loads(found[0].read_text()) if found else None


def text_inputs(saved_model_dir: str | Path) -> list[dict]:
    """The sidecar's text inputs (token ids an app makes with tokenizer.py)."""
    card = sidecar(saved_model_dir)
    return [i for i in (card or {}).get("inputs", []) if i.get("kind") == "text"]


def sample_size(figures: dict) -> int:
    """How many eval examples to check: the trainer's `--tflite-parity-examples`."""
    from amp_pipeline.components.export.tflite import PARITY_EXAMPLES

    return int((figures.get("tflite") or {}).get("parity_examples") or PARITY_EXAMPLES)


def _compare(kind: str, column: str, raw: list, ids: np.ndarray, transform: np.ndarray) -> dict:
    """How many examples' device ids equal Transform's, and the first that does not."""
    differs = np.flatnonzero((ids != transform).any(axis=1))
    first = None
    if len(differs):
        i = differs[0]
        first = {
            "text" if kind == "text" else "value": str(raw[i])[:200],
            "device": ids[i].astype(int).tolist()[:16],
            "transform": transform[i].astype(int).tolist()[:16],
        }
    return {
        "kind": kind,
        "feature": column,
        "checked": len(raw),
        "identical": int(len(raw) - len(differs)),
        "first_difference": first,
    }


def check(saved_model_dir: str | Path, examples: list[bytes], batch: int = 512) -> dict | None:
    """The shipped tokenizer's ids against Transform's on `examples`; None for a model without
    text features or without TFLite models."""
    import tensorflow as tf

    from amp_pipeline.components.export.device_parity import example_cells, load_shipped

    inputs = text_inputs(saved_model_dir)
    if not inputs or not examples:
        return None
    folder = Path(saved_model_dir) / "tflite"
    tokenizer = load_shipped(folder / "tokenizer.py")
    cells = [example_cells(record) for record in examples]
    transform = tf.saved_model.load(str(saved_model_dir)).signatures[names.TRANSFORM_SIGNATURE]
    x = np.concatenate([
        transform(examples=tf.constant(examples[i : i + batch]))[names.FEATURES_KEY].numpy()
        for i in range(0, len(examples), batch)
    ])  # fmt: skip
    features = []
    for t in inputs:
        start, stop = t["x_columns"]
        vocabulary = tokenizer.read_vocabulary(folder / t["vocabulary_file"])
        raw = [str(c.get(t["features"][0]) or "") for c in cells]  # missing: empty
        ids = np.array(tokenizer.encode_all(raw, vocabulary, t["max_tokens"]), np.float32)
        features.append(_compare("text", t["columns"][0], raw, ids, x[:, start:stop]))
    return {"features": features}

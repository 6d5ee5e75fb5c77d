"""The device tokenizer and the device encoder of categories and bags against the Transform
graph, on the eval split.

A TFLite model of a text model takes token ids: a device app tokenises with the rule of
components/data/text.py and the vocabulary shipped next to the `.tflite` files. This check takes
the raw eval examples, makes their ids twice (the exported SavedModel's `transform_features`
signature, which is Transform's graph, and `text.encode` with the shipped vocabulary), counts
the texts whose ids differ, and runs every TFLite variant on the tokenizer's ids against the
SavedModel's answers. The gate rejects a candidate whose tokenizer differs on any eval text it
checked: the first examples of the eval split, as many as the trainer's TFLite parity read
(`--tflite-parity-examples`, 5,000 by default; the check runs Python per text and every TFLite
variant per example; it compares two implementations of one rule, so a bounded sample of real
texts is its evidence, and the report says how many it read).

Categories and bags are checked the same way with components/data/categories.py and the
vocabularies shipped beside the TFLite models (the sidecar's `categories`): the gate's
`tflite_encoder` rule rejects a candidate whose device ids differ from Transform's on any eval
example it read, and the TFLite variants then run on ids made by both encoders.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from amp_pipeline.components.data import text
from amp_pipeline.core import names

# A regression model's TFLite answer agrees with the SavedModel's within this share of the
# label's standard deviation (int8 variants move predictions more; the count is reported).
REGRESSION_AGREEMENT = 0.01


def sidecar(saved_model_dir: str | Path) -> dict | None:
    """The first TFLite sidecar next to a pushed SavedModel, or None without TFLite models."""
    found = sorted((Path(saved_model_dir) / "tflite").glob("model_*.json"))
    return json.loads(found[0].read_text()) if found else None


def has_text(saved_model_dir: str | Path) -> bool:
    """Whether the model's TFLite models take token ids (and so come with a tokenizer)."""
    card = sidecar(saved_model_dir)
    return bool(card and card["input"].get("text"))


def has_device_encoding(saved_model_dir: str | Path) -> bool:
    """Whether the model's TFLite models take ids a device makes: token, category or bag ids."""
    card = sidecar(saved_model_dir)
    return bool(card and (card["input"].get("text") or card["input"].get("categories")))


def sample_size(figures: dict) -> int:
    """How many eval examples to check: as many as the trainer's TFLite parity measured."""
    from amp_pipeline.components.export.tflite import PARITY_EXAMPLES

    reference = (figures.get("tflite") or {}).get("reference") or {}
    return int(reference.get("examples") or PARITY_EXAMPLES)


def _cells(examples: list[bytes], feature: str) -> list:
    """Each example's cell of `feature` as the CSV gave it: a string, an integer, or None."""
    import tensorflow as tf

    out = []
    for record in examples:
        feature_proto = tf.train.Example.FromString(record).features.feature.get(feature)
        if feature_proto is None:
            out.append(None)
        elif feature_proto.bytes_list.value:
            out.append(feature_proto.bytes_list.value[0].decode("utf-8"))
        elif feature_proto.int64_list.value:
            out.append(int(feature_proto.int64_list.value[0]))
        else:
            out.append(None)
    return out


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
    """Tokenizer and TFLite-through-tokenizer parity on `examples`; None for a model without
    text features or without TFLite models."""
    import tensorflow as tf

    from amp_pipeline.components.data import categories
    from amp_pipeline.components.export.tflite import TFLiteRunner

    card = sidecar(saved_model_dir)
    if not card or not examples or not has_device_encoding(saved_model_dir):
        return None
    loaded = tf.saved_model.load(str(saved_model_dir))
    transform = loaded.signatures[names.TRANSFORM_SIGNATURE]
    serve = loaded.signatures[names.SERVING_SIGNATURE]
    xs, served = [], []
    for i in range(0, len(examples), batch):
        chunk = tf.constant(examples[i : i + batch])
        xs.append(transform(examples=chunk)[names.FEATURES_KEY].numpy())
        outputs = serve(examples=chunk)
        # A regression model answers predictions (label units), a classifier class ids.
        key = names.PREDICTIONS if names.PREDICTIONS in outputs else names.CLASS_IDS
        served.append(outputs[key].numpy())
    x, served_ids = np.concatenate(xs), np.concatenate(served).reshape(-1)
    tokenized = x.copy()
    features = []
    folder = Path(saved_model_dir) / "tflite"
    for t in card["input"].get("text") or []:
        start, stop = t["x_columns"]
        vocabulary = text.read_vocabulary(folder / t["vocabulary_file"])
        raw = [cell or "" for cell in _cells(examples, t["feature"])]  # missing: empty
        ids = np.array(text.encode_all(raw, vocabulary, t["max_tokens"]), np.float32)
        features.append(_compare("text", t["column"], raw, ids, x[:, start:stop]))
        tokenized[:, start:stop] = ids
    for c in card["input"].get("categories") or []:
        start, stop = c["x_columns"]
        vocabulary = text.read_vocabulary(folder / c["vocabulary_file"])
        raw = _cells(examples, c["feature"])
        if c["kind"] == "bag":
            encoded = categories.encode_bags(raw, vocabulary, c["separator"], c["values_kept"])
        else:
            encoded = [[i] for i in categories.encode_categories(raw, vocabulary)]
        ids = np.array(encoded, np.float32).reshape(len(raw), stop - start)
        features.append(_compare(c["kind"], c["column"], raw, ids, x[:, start:stop]))
        tokenized[:, start:stop] = ids
    variants = {}
    for path in sorted((Path(saved_model_dir) / "tflite").glob("model_*.tflite")):
        outputs = TFLiteRunner(path).predict_batched(tokenized)
        scale = card["output"].get("label_std")
        if card["output"].get("standardised"):  # regression: prediction differences
            predicted = outputs.reshape(-1) * scale + card["output"]["label_mean"]
            close = np.abs(predicted - served_ids) <= REGRESSION_AGREEMENT * scale
            agreeing = int(np.sum(close))
        else:
            agreeing = int(np.sum(outputs.argmax(axis=1) == served_ids))
        variants[path.stem.removeprefix("model_")] = {"agreeing": agreeing, "n": len(served_ids)}
    return {"features": features, "tflite_through_tokenizer": variants}

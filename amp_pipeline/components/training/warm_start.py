"""Warm start: a twin starts from the production model's weights instead of a fresh draw.

With `--warm-start auto` (the default) on data in spans, and with `--warm-start on` on any input,
the Trainer receives the production model as TFX's `base_model` (the model the gate last
promoted; pipeline/pipeline.py). Both twins then start from its weights when it was trained on
the same model, the same features and the same classes. `auto` leaves other inputs alone: a
rerun on the same file is answered from TFX's cache, and a production model as a new input
would make every rerun train again. Its
training record (train_spec.json and model.keras, in the ModelRun beside the Model artifact)
says what it was.

Vocabularies may differ from span to span: a new span brings new student IDs, products or
words. An embedding row is the row of a value, so the rows are remapped by value, as
`tf.estimator.VocabInfo` does (tensorflow/tfx#3423). A value both vocabularies hold keeps its
learned row; a new value starts from the production model's out-of-vocabulary row (what it
learned for unseen values); the missing and out-of-vocabulary rows carry over. Hashed bigram
rows (`ngrams`) carry over only where the text vocabulary is unchanged, as the hash reads the
ids. Every other layer must have the same shapes, or nothing is loaded.

When anything does not match, the twin trains from scratch, and `reason` says why in one line.
A warm-started twin earns nothing for free: the gate compares both twins with production on
paired eval examples as it does after a fresh start.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from amp_pipeline.components.training.options import TrainSpec
from amp_pipeline.core import names

logger = logging.getLogger(__name__)

# The DataSpec fields that define the model's inputs and outputs.
FEATURE_FIELDS = (
    "numeric_features",
    "string_features",
    "categorical_features",
    "bag_features",
    "text_features",
    "image_shape",
    "task",
    "classes",
    "max_tokens",
)
MODEL_FIELDS = ("model", "model_options", "model_module")


AUTO_WITHOUT_SPANS = (
    "--warm-start auto warm-starts data in spans ({SPAN} in --data); --warm-start on for this input"
)


def wanted(mode: str, spans: bool) -> bool:
    """Whether the twins get the production model to start from: `on`, or `auto` on spans
    (a rerun on the same file stays a rerun: TFX answers it from the cache)."""
    return mode == "on" or (mode == "auto" and spans)


def production_run_dir(base_model: str) -> Path:
    """The ModelRun folder of the execution that wrote `base_model`: TFX lays a Trainer's
    outputs out as <root>/<node>/model/<id>[/Format-Serving] and <root>/<node>/model_run/<id>."""
    path = Path(base_model)
    if path.name == "Format-Serving":
        path = path.parent
    return path.parent.parent / "model_run" / path.name


@functools.lru_cache(maxsize=1)
def production_weights(spec_json: str) -> tuple[dict[str, Any] | None, dict]:
    """({layer name: weights, "vocabulary:<name>": its values}, record) of the production
    model this spec would start from; (None, record with the reason) where it does not
    qualify. Read once per process (every seed starts from it)."""
    spec = TrainSpec.from_json(spec_json)
    record: dict = {"mode": spec.warm_start, "applied": False}
    if spec.warm_start == "off":
        return None, {**record, "reason": "from scratch: --warm-start off"}
    if not wanted(spec.warm_start, bool(spec.data_spec.get("spans"))):
        return None, {**record, "reason": f"from scratch: {AUTO_WITHOUT_SPANS}"}
    if not spec.base_model:
        return None, {**record, "reason": "from scratch: no production model yet"}
    run_dir = production_run_dir(spec.base_model)
    record["from"] = str(run_dir)
    spec_path, keras_path = run_dir / names.TRAIN_SPEC_JSON, run_dir / names.KERAS_MODEL
    if not (spec_path.exists() and keras_path.exists()):
        return None, {
            **record,
            "reason": f"from scratch: the production model's training record is not in {run_dir}",
        }
    production = TrainSpec.from_json(spec_path.read_text())
    why = mismatch(production, spec)
    if why:
        return None, {**record, "reason": f"from scratch: {why}"}
    if not Path(production.transform_output).exists():
        return None, {
            **record,
            "reason": f"from scratch: the production model's Transform output "
            f"{production.transform_output} is gone, so its vocabularies cannot be matched",
        }
    from amp_pipeline.components.models.builtin import embedding_widths
    from amp_pipeline.components.training.model_building import build_fresh

    figures_path = run_dir / names.FIGURES_JSON
    built = json.loads(figures_path.read_text()) if figures_path.exists() else {}
    try:
        with embedding_widths(built.get("embedding_widths") or {}):  # as it was built
            model, _ = build_fresh(production, "float32")
        model.load_weights(keras_path)
    except Exception as e:  # noqa: BLE001 - any failure to rebuild means: from scratch
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None, {**record, "reason": f"from scratch: {keras_path} does not load ({first})"}
    weights = {layer.name: layer.get_weights() for layer in model.layers if layer.weights}
    vocabularies = _vocabularies(production)
    return {**weights, **{f"vocabulary:{k}": v for k, v in vocabularies.items()}}, record


def widths(spec: TrainSpec) -> dict[str, int]:
    """{feature: width} of the production model's category and bag embeddings, which this
    run's model takes where it warm-starts (components/models/builtin.py::embedding_widths);
    else {} (the widths follow the vocabularies)."""
    weights, _ = production_weights(_key(spec))
    if weights is None:
        return {}
    data = spec.data_spec
    features = [
        *(data.get("categorical_features") or ()),
        *(n for n, _ in data.get("bag_features") or ()),
    ]
    return {
        f: int(weights[f"{f}_embedding"][0].shape[1])
        for f in features
        if f"{f}_embedding" in weights
    }


def built_widths(spec: TrainSpec, model) -> dict[str, int]:
    """{feature: width} of `model`'s category and bag embeddings, as built (figures.json keeps
    them: a later warm start rebuilds this model with them)."""
    data = spec.data_spec
    features = [
        *(data.get("categorical_features") or ()),
        *(n for n, _ in data.get("bag_features") or ()),
    ]
    names_ = {layer.name: layer for layer in model.layers}
    return {
        f: int(names_[f"{f}_embedding"].weights[0].shape[1])
        for f in features
        if f"{f}_embedding" in names_ and names_[f"{f}_embedding"].weights
    }


def mismatch(production: TrainSpec, spec: TrainSpec) -> str:
    """Why `spec`'s model cannot start from `production`'s ("" when it can)."""
    for field in MODEL_FIELDS:
        before, now = getattr(production, field), getattr(spec, field)
        if before != now:
            return f"the production model's {field} is {before!r}, this run's {now!r}"
    for field in FEATURE_FIELDS:
        before, now = production.data_spec.get(field), spec.data_spec.get(field)
        if _plain(before) != _plain(now):
            return f"the {field.replace('_', ' ')} changed ({_plain(before)} -> {_plain(now)})"
    return ""


def _plain(value):
    return json.loads(json.dumps(value))


def embedding_vocabularies(spec: TrainSpec) -> dict[str, str]:
    """{embedding layer name: the Transform vocabulary its rows index} of the built-in models'
    category, bag and text tables (components/models/builtin.py names them)."""
    from amp_pipeline.components.data import preprocessing

    data = spec.data_spec
    out: dict[str, str] = {}
    for name in data.get("categorical_features") or ():
        vocab = preprocessing.category_vocab(name)
        out.update(dict.fromkeys((f"{name}_embedding", f"{name}_bias"), vocab))
    for name, _ in data.get("bag_features") or ():
        out[f"{name}_embedding"] = preprocessing.bag_vocab(name)
    for name in data.get("text_features") or ():
        vocab = preprocessing.vocab_filename(name)
        out.update(dict.fromkeys((f"{name}_embedding", f"{name}_token_embedding"), vocab))
    return out


def _vocabularies(spec: TrainSpec) -> dict[str, list[str]]:
    """{vocabulary name: its values} of every table embedding_vocabularies names."""
    import tensorflow_transform as tft

    output = tft.TFTransformOutput(spec.transform_output)
    out = {}
    for vocab in set(embedding_vocabularies(spec).values()):
        if output.vocabulary_file_by_name(vocab) is not None:
            out[vocab] = [_text(v) for v in output.vocabulary_by_name(vocab)]
    return out


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def remap_rows(
    table: np.ndarray, fresh: np.ndarray, before: list[str], now: list[str]
) -> tuple[np.ndarray, dict]:
    """`fresh` (this run's initial table) with the rows `table` (production's) learned, by
    value: row 0 (missing or padding) and the out-of-vocabulary row carry over, each value of
    `now` takes its row in `before` or, new, production's out-of-vocabulary row; rows past the
    out-of-vocabulary one (hashed bigrams) carry over only when the vocabularies are equal."""
    out = fresh.copy()
    old_oov, new_oov = len(before) + 1, len(now) + 1
    out[0] = table[0]
    out[new_oov] = table[old_oov]
    index = {v: i + 1 for i, v in enumerate(before)}
    rows = np.array([index.get(v, old_oov) for v in now], np.int64)
    out[1:new_oov] = table[rows]
    kept = int(np.sum(rows != old_oov))
    if before == now and len(table) == len(fresh):
        out[new_oov + 1 :] = table[old_oov + 1 :]
    return out, {"kept": kept, "new": len(now) - kept}


def _key(spec: TrainSpec) -> str:
    """production_weights' cache key: every seed starts from the same weights."""
    return dataclasses.replace(spec, seed=0).to_json()


def prepare(spec: TrainSpec) -> dict:
    """Reads production's weights (building its model: call it before building this run's,
    as building clears the Keras session); the record so far."""
    return production_weights(_key(spec))[1]


def apply(spec: TrainSpec, model) -> dict:
    """Loads production's weights into the freshly built `model` where production_weights
    allows it: the record ({"applied", "reason", "from", "layers", "remapped"})."""
    weights, record = production_weights(_key(spec))
    if weights is None:
        return record
    tables = embedding_vocabularies(spec)
    now_vocab = _vocabularies(spec) if tables else {}
    planned: list[tuple[Any, list[np.ndarray]]] = []
    remapped: dict[str, dict] = {}
    for layer in model.layers:
        if not layer.weights:
            continue
        before = weights.get(layer.name)
        if before is None:
            return {**record, "reason": f"from scratch: production has no layer {layer.name!r}"}
        fresh = layer.get_weights()
        vocab = tables.get(layer.name)
        if vocab and f"vocabulary:{vocab}" in weights and vocab in now_vocab and len(fresh) == 1:
            old_values, new_values = weights[f"vocabulary:{vocab}"], now_vocab[vocab]
            if (
                fresh[0].shape[1:] == before[0].shape[1:]
                and len(fresh[0]) >= len(new_values) + 2
                and len(before[0]) >= len(old_values) + 2
            ):
                table, counts = remap_rows(before[0], fresh[0], old_values, new_values)
                planned.append((layer, [table]))
                remapped[layer.name] = counts
                continue
        shapes = [w.shape for w in before], [w.shape for w in fresh]
        if shapes[0] != shapes[1]:
            return {
                **record,
                "reason": f"from scratch: layer {layer.name!r} has weights {shapes[0]} in "
                f"production and {shapes[1]} here",
            }
        planned.append((layer, before))
    for layer, values in planned:
        layer.set_weights(values)
    by_vocabulary = {tables[name]: c for name, c in remapped.items()}  # a bias shares its ids
    new_values = sum(c["new"] for c in by_vocabulary.values())
    kept = sum(c["kept"] for c in by_vocabulary.values())
    reason = f"from the production model ({len(planned)} layers"
    if remapped:
        reason += (
            f"; {len(by_vocabulary)} vocabularies remapped by value: {kept:,} values kept "
            f"their rows, {new_values:,} new ones start from its out-of-vocabulary row"
        )
    return {
        **record,
        "applied": True,
        "reason": reason + ")",
        "layers": len(planned),
        "remapped": remapped,
    }


def summary_text(summary: dict) -> str:
    """'both twins from the production model (...)', or each twin's reason."""
    starts = summary.get("warm_start") or {}
    fp32, amp = starts.get("fp32") or {}, starts.get("amp") or {}
    if not fp32 and not amp:
        return ""
    if fp32.get("reason") == amp.get("reason"):
        return f"both twins {amp.get('reason', '')}"
    return f"AMP twin {amp.get('reason', 'n/a')}; float32 twin {fp32.get('reason', 'n/a')}"

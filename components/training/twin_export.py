"""A trained twin written out and measured as written: the serving SavedModel (checked against the
mixed-precision rules), TFLite variants and their parity with the vocabularies they need, every
seed's answers through the exported model, the category coverage of the eval split, and a regression
label's reference baseline."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from amp_pipeline.components.training.datasets import dataset_arrays, train_sample
from amp_pipeline.components.training.fitting import (
    label_units,
    regression_metrics,
    train_other_seeds,
)
from amp_pipeline.components.training.model_building import (
    float32_rebuild,
    is_regression,
    model_spec,
)
from amp_pipeline.components.training.options import TrainSpec
from amp_pipeline.core import names

logger = logging.getLogger(__name__)


def served_outputs(saved_model_dir: str, x: np.ndarray, batch: int = 1024) -> np.ndarray:
    """The probabilities (for regression: the predictions, in the label's units) the exported
    serving SavedModel itself gives the Transform output `x` (its predict_features signature,
    read back from disk)."""
    import tensorflow as tf

    serve = tf.saved_model.load(saved_model_dir).signatures[names.FEATURES_SIGNATURE]
    key = (
        names.PREDICTIONS if names.PREDICTIONS in serve.structured_outputs else names.PROBABILITIES
    )
    out = [
        serve(x=tf.constant(x[i : i + batch], tf.float32))[key].numpy()
        for i in range(0, len(x), batch)
    ]
    return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


def export_edge_models(spec: TrainSpec, model, train_ds, eval_x, eval_y) -> dict:
    """TFLite variants under `<serving_model_dir>/tflite/`, with parity on the eval split
    against the exported serving SavedModel (what TF Serving answers), read back from disk."""
    from amp_pipeline.components.export.tflite import ParityThresholds, export_tflite
    from amp_pipeline.core.data_spec import DataSpec

    data = DataSpec.from_dict(spec.data_spec)
    out = Path(spec.serving_model_dir) / "tflite"
    shipped = ship_vocabularies(spec, data, out)  # with the model, TFLite or not
    if not spec.tflite_variants:
        return {"variants": {}}
    reference = float32_rebuild(spec, model)
    keras_dir = str(Path(spec.model_run_dir) / "keras_float32")
    reference.export(keras_dir, verbose=False)
    train_x, _ = dataset_arrays(train_ds, 200)
    return export_tflite(
        keras_dir,
        out,
        eval_x,
        label_units(spec, eval_y) if data.regression else eval_y,
        served_outputs(spec.serving_model_dir, eval_x),
        train_x,
        list(data.classes),
        {
            "name": "x",
            "shape": [None, int(eval_x.shape[1])],
            "dtype": "float32",
            "preprocessing": "the Transform output `x` (see the SavedModel's "
            "transform_features signature): images divided by their pixel scale, numeric "
            "features standardised, strings one-hot, categories as their vocabulary ids (see "
            "`categories`), text as token ids (components/data/"
            "text.py: tokenise, look up in the vocabulary file, pad or cut)",
            "image_shape": list(data.image_shape) if data.image_shape else None,
            "text": [v for v in shipped if v.get("kind") not in ("category", "bag")],
            "categories": [v for v in shipped if v.get("kind") in ("category", "bag")],
        },
        variants=tuple(spec.tflite_variants),
        thresholds=ParityThresholds(spec.tflite_min_agreement, spec.tflite_max_int8_drop),
        label_scale=(data.label_mean, data.label_std) if data.regression else None,
    )


def ship_vocabularies(spec: TrainSpec, data, out: Path) -> list[dict]:
    """Copies each text feature's vocabulary (`vocab_<feature>.txt`), each categorical
    feature's (`categories_<feature>.txt`) and each multi-valued feature's (`bag_<feature>.txt`)
    from Transform's output next to the TFLite models and says where their ids sit in `x`
    (the sidecar's `text`, and `categories` for the others: `kind` "category" or "bag", with
    the `rule` that gives their ids: components/data/categories.py)."""
    import shutil

    import tensorflow_transform as tft

    from amp_pipeline.components.data import categories, preprocessing, text

    if not data.text_features and not data.categorical_features and not data.bag_features:
        return []
    out.mkdir(parents=True, exist_ok=True)
    transform = tft.TFTransformOutput(spec.transform_output)
    slices = {name: (start, stop) for name, start, stop in preprocessing.feature_slices(data)}

    def ship(name: str, vocab: str, prefix: str, **facts) -> dict:
        target = out / f"{prefix}_{name}.txt"
        shutil.copyfile(transform.vocabulary_file_by_name(vocab), target)
        size = len(text.read_vocabulary(target))
        return {
            "feature": name,
            "column": data.original_name(name),
            "x_columns": list(slices[name]),
            "vocabulary_file": target.name,
            "vocabulary_size": size,
            **{k: v(size) if callable(v) else v for k, v in facts.items()},
        }

    return [
        *(
            ship(name, preprocessing.bag_vocab(name), "bag", kind="bag",
                 separator=data.bag_separator, values_kept=length, rule=categories.BAG_RULE,
                 padding_id=categories.MISSING_ID, oov_id=categories.oov_id)
            for name, length in data.bag_features
        ),
        *(
            ship(name, preprocessing.category_vocab(name), "categories", kind="category",
                 rule=categories.CATEGORY_RULE, missing_id=categories.MISSING_ID,
                 oov_id=categories.oov_id)
            for name in data.categorical_features
        ),
        *(
            ship(name, preprocessing.vocab_filename(name), "vocab", max_tokens=data.max_tokens,
                 padding_id=text.PAD_ID, oov_id=text.oov_id,
                 tokenizer="components/data/text.py: encode()")
            for name in data.text_features
        ),
    ]  # fmt: skip


def export_checked(
    spec: TrainSpec, model, readiness: dict | None, warnings: list[str]
) -> tuple[object, list]:
    """Saves model.keras, exports the serving SavedModel (the float32 rebuild by default) and
    checks its dtypes on the artifact as written and read back (dtype_report.json, with the
    variables' dtype `warnings`): (the served model, the layers' dtype report).

    Raises:
        ValueError: the written artifact is not what it should be.
    """
    from amp_pipeline.components.amp import rules as amp_rules
    from amp_pipeline.components.export.saved_model import (
        artifact_dtypes,
        check_artifact,
        export_serving_model,
    )

    run_dir = Path(spec.model_run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        model.save(run_dir / names.KERAS_MODEL)
    except Exception as e:  # noqa: BLE001 - a user model that Keras cannot serialise still serves
        logger.warning("model.keras not written (%s); the SavedModel is the model", e)
    observed = (readiness or {}).get("numeric", {}).get("output_dtypes")
    layers = amp_rules.dtype_report(model, spec.policy, observed)
    report = {"policy": spec.policy, "layers": layers, "warnings": warnings}
    serving = float32_rebuild(spec, model) if spec.serving_precision == "float32" else model
    export_serving_model(serving, spec.transform_output, spec.serving_model_dir, spec.data_spec)
    # Checked on the artifact as written and read back, not on the model in memory.
    report["artifact"] = artifact_dtypes(spec.serving_model_dir)
    (Path(spec.serving_model_dir) / names.DTYPE_REPORT_JSON).write_text(
        json.dumps(report, indent=2)
    )
    problems = check_artifact(report["artifact"], spec.serving_precision)
    if problems:
        raise ValueError(
            f"the exported serving model {spec.serving_model_dir} is not what it should be: "
            + "; ".join(problems)
        )
    return serving, layers


def predict_every_seed(
    spec: TrainSpec, xla, eval_ds, serving, trained, strategy, reference: dict | None = None
):
    """The first seed's figures, every further seed trained the same way, and each seed's
    served predictions on the whole eval split (streamed batch by batch) written to
    `eval_predictions.npz` for the gate's pairs (class ids; for regression, values in the
    label's units): the per-seed figures, with
    their accuracy (regression: `metrics`, MAE, RMSE and R² in the label's units, and accuracy
    None)."""
    first = {
        "seed": spec.seed,
        **trained["timer"].summary(),
        "peak_memory_mb": trained["peak_mb"],
        "accuracy": None,
    }
    seed_runs, answered = train_other_seeds(spec, xla, eval_ds, serving, first, strategy)
    predictions = [answers for answers, _ in answered]
    scores = [s for _, s in answered if s is not None]
    regression = is_regression(spec)
    eval_y = np.concatenate([np.asarray(y) for _, y in eval_ds])
    labels = label_units(spec, eval_y) if regression else eval_y.astype(np.int64)
    for run, predicted in zip(seed_runs, predictions, strict=True):
        if regression:
            run["metrics"] = regression_metrics(labels, predicted)
        else:
            run["accuracy"] = float(np.mean(predicted == eval_y))
    if reference is not None:
        reference["figures"]["metrics"] = regression_metrics(labels, reference["predictions"])
    np.savez_compressed(
        Path(spec.model_run_dir) / names.EVAL_PREDICTIONS,
        labels=labels,
        predictions=np.stack(predictions).astype(np.float64 if regression else np.int64),
        seeds=np.array([r["seed"] for r in seed_runs], np.int64),
        **({"scores": np.stack(scores)} if scores else {}),
        **({"reference": reference["predictions"]} if reference is not None else {}),
    )
    return seed_runs


def category_coverage(spec: TrainSpec, eval_ds) -> dict:
    """Per categorical feature: its vocabulary's size, whether it was cut at CATEGORY_TOP_K
    (the other values then share the out-of-vocabulary id, and `train_oov_share` says on what
    share of the train rows read), and how many eval rows hold a value the train split did not
    have (served from the out-of-vocabulary row)."""
    from amp_pipeline.components.models.builtin import categorical_slices
    from amp_pipeline.core.data_spec import CATEGORY_IDS_BEYOND_VOCABULARY, CATEGORY_TOP_K

    if not spec.data_spec.get("categorical_features") or not spec.transform_output:
        return {}
    mspec = model_spec(spec)
    if not mspec.feature_slices:
        return {}
    slices = categorical_slices(mspec)
    unseen = dict.fromkeys((name for name, *_ in slices), 0)
    rows = 0
    for x, _ in eval_ds:
        x = np.asarray(x)
        rows += len(x)
        for name, start, _, size in slices:
            unseen[name] += int(np.sum(np.rint(x[:, start]) == size - 1))
    out = {
        name: {
            "vocabulary": size - CATEGORY_IDS_BEYOND_VOCABULARY,
            "capped": size - CATEGORY_IDS_BEYOND_VOCABULARY >= CATEGORY_TOP_K,
            "eval_unseen_rows": unseen[name],
            "eval_rows": rows,
        }
        for name, _, _, size in slices
    }
    if any(c["capped"] for c in out.values()):
        x, _ = train_sample(spec)
        for name, start, _, size in slices:
            if out[name]["capped"]:
                out[name]["train_oov_share"] = float(np.mean(np.rint(x[:, start]) == size - 1))
                out[name]["train_rows_read"] = len(x)
    return out


def reference_baseline(spec: TrainSpec, eval_ds) -> dict | None:
    """The regression label's reference baseline (components/training/reference.py), fitted on
    the train split and run on every eval example: {"figures", "predictions" (label units)};
    None with a module's own preprocessing (its `x` is its own)."""
    import time

    from amp_pipeline.components.models.builtin import bag_slices, categorical_slices
    from amp_pipeline.components.training.reference import Reference

    mspec = model_spec(spec)
    if not mspec.feature_slices:
        return None
    started = time.perf_counter()
    ids = [start for _, start, _, _ in categorical_slices(mspec)]
    excluded = {c for _, start, stop, _ in bag_slices(mspec) for c in range(start, stop)}
    excluded |= {
        c for name, start, stop in mspec.feature_slices if name in mspec.text_features
        for c in range(start, stop)
    }  # fmt: skip
    dense = [c for c in range(mspec.input_width) if c not in excluded and c not in ids]
    reference = Reference(ids, dense).fit(*train_sample(spec))
    predicted = np.concatenate([reference.predict(np.asarray(x)) for x, _ in eval_ds])
    return {
        "figures": {
            "kind": reference.kind,
            "detail": reference.describe(),
            "train_rows": reference.rows,
            "seconds": time.perf_counter() - started,
        },
        "predictions": label_units(spec, predicted),
    }

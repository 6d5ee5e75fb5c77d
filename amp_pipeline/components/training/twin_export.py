"""A trained twin written out and measured as written: the serving SavedModel (checked against the
mixed-precision rules), TFLite variants and their parity with the vocabularies they need, every
seed's answers through the exported model, the category coverage of the eval split, and a regression
label's reference baseline."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

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


EDGE_KIT = ("edge_rows.py", "tokenizer.py")  # the pure-Python files that ship beside the models


def export_edge_models(spec: TrainSpec, model, train_ds) -> dict:
    """TFLite variants under `<serving_model_dir>/tflite/`: the device graph (raw columns in,
    components/export/device_graph.py) converted per variant, with the sidecars, labels.txt, the
    vocabularies and the pure-Python kit an app builds its inputs with (edge_rows.py, and
    tokenizer.py for text). The gate measures their parity on raw eval rows through LiteRT."""
    import shutil

    from amp_pipeline.components.data import text
    from amp_pipeline.components.export import device_graph, edge_rows
    from amp_pipeline.components.export.tflite import ParityThresholds, export_tflite
    from amp_pipeline.core.data_spec import DataSpec

    data = DataSpec.from_dict(spec.data_spec)
    out = Path(spec.serving_model_dir) / "tflite"
    out.mkdir(parents=True, exist_ok=True)
    custom = bool(spec.model_module and spec.model_module.get("preprocessing"))
    reference = float32_rebuild(spec, model)
    graph = device_graph.DeviceGraph(
        reference,
        spec.transform_output,
        data,
        x_width=model_spec(spec).input_width if custom else None,
    )
    device_graph.write_vocabularies(graph.inputs, out)  # with the model, TFLite or not
    shutil.copyfile(edge_rows.__file__, out / EDGE_KIT[0])
    if data.text_features and not custom:
        shutil.copyfile(text.__file__, out / EDGE_KIT[1])
    if not data.regression:
        (out / "labels.txt").write_text("\n".join(data.classes) + "\n")
    if not spec.tflite_variants:
        return {"variants": {}}
    saved = graph.write(Path(spec.model_run_dir) / "device_float32")
    train_x, _ = dataset_arrays(train_ds, 200)
    return export_tflite(
        saved,
        out,
        device_graph.inputs_from_x(graph, train_x),
        graph.sidecar(),
        variants=tuple(spec.tflite_variants),
        thresholds=ParityThresholds(spec.tflite_min_agreement, spec.tflite_max_int8_drop),
        parity_examples=spec.tflite_parity_examples,
    )


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
    report: dict[str, Any] = {"policy": spec.policy, "layers": layers, "warnings": warnings}
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
    out: dict[str, dict[str, Any]] = {
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

"""Names every package agrees on: artifact files, SavedModel signatures and their tensors, and
feature names made from the columns users write."""

from __future__ import annotations

import re

# Files a trainer writes into its ModelRun artifact.
FIGURES_JSON = "figures.json"
TRAIN_SPEC_JSON = "train_spec.json"
TRAIN_LOG = "train.log"
KERAS_MODEL = "model.keras"
EVAL_PREDICTIONS = "eval_predictions.npz"
# Files next to the served SavedModel.
DTYPE_REPORT_JSON = "dtype_report.json"
TFLITE_DIR = "tflite"
TFLITE_REPORT_JSON = "tflite_report.json"
# Where a TFX Trainer puts the serving SavedModel inside its Model artifact.
SERVING_MODEL_DIR = "Format-Serving"
# Files a run writes into its output folder.
RUN_SUMMARY_JSON = "run_summary.json"
DECISION_JSON = "decision.json"
DECISION_MD = "decision.md"
READINESS_JSON = "readiness.json"
REPORT_MD = "report.md"
SPEED_JSON = "speed.json"

# SavedModel signatures (components/export/saved_model.py) and their tensors.
SERVING_SIGNATURE = "serving_default"
RAW_SIGNATURE = "predict_raw"
TRANSFORM_SIGNATURE = "transform_features"
FEATURES_SIGNATURE = "predict_features"  # the Transform output `x`, for users running Transform
DEVICE_SIGNATURE = "serving_default"  # the TFLite models' one signature: raw columns in
PROBABILITIES = "probabilities"
CLASS_IDS = "class_ids"
CLASSES = "classes"
PREDICTIONS = "predictions"  # a regression model's answer, in the label's own units
EXAMPLES_INPUT = "examples"
# Transform's outputs: the model input and the label (its class id; for regression, the label
# standardised with DataSpec's label_mean and label_std).
FEATURES_KEY = "x"
LABEL_KEY = "label_xf"

# Cell texts read as booleans (1/0), by the ingestion and by `predict --csv`.
TRUE_VALUES = ("true", "True", "TRUE", "yes", "Yes", "YES")
FALSE_VALUES = ("false", "False", "FALSE", "no", "No", "NO")


def sanitize_names(columns: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Valid, unique feature names: letters, digits and `_`, starting with a letter.

    `"Monthly charges ($)"` becomes `Monthly_charges`, `"2nd"` becomes `f_2nd`; a name that
    collides with an earlier one gets `_2`, `_3`, ... The ingestion, `predict --csv` and the
    MLflow model all map users' column names with this one function.
    """
    out: list[str] = []
    seen: set[str] = set()
    for column in columns:
        name = re.sub(r"[^A-Za-z0-9_]+", "_", column.strip().lstrip("\ufeff")).strip("_")
        if not name or not name[0].isalpha():
            name = f"f_{name}" if name else "column"
        base, k = name, 2
        while name.lower() in seen:
            name, k = f"{base}_{k}", k + 1
        seen.add(name.lower())
        out.append(name)
    return tuple(out)


# The BERT-style encoder's sizes (components/models/builtin.py: BERT_SIZES gives their shapes).
BERT_SIZE_NAMES = ("tiny", "mini", "small", "base")

# A missing integer cell, as predict_raw and the TFLite models take one (NaN for floats).
INT64_MISSING = -(2**63)

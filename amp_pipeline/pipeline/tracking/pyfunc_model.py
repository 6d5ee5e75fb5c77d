"""The served SavedModel as an MLflow pyfunc model: a DataFrame of raw features in, classes out
(or, for a regression label, its predictions in the label's units), with a signature that tells
`mlflow models serve` clients what to send: the raw columns by their CSV names, with types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from mlflow.pyfunc.model import PythonModel

from amp_pipeline.core import names

RAW_COLUMNS_FILE = "raw_columns.json"  # components/export/saved_model.py writes it


def raw_columns(saved_model: str | Path) -> list[dict]:
    """The SavedModel's raw input columns ([] for one exported before they were written)."""
    path = Path(saved_model) / RAW_COLUMNS_FILE
    return json.loads(path.read_text()) if path.exists() else []


def signature(saved_model: str | Path, classes: list[str] | None):
    """The pyfunc's signature: each raw column (floats as double; an integer column that may be
    missing as any type: a DataFrame holds it as int64, or as float64 with NaN where a cell is
    missing, and MLflow will not cast int64 to double), and the outputs; with a one-row input
    example.
    (None, None) without raw_columns.json."""
    import pandas as pd
    from mlflow.models import ModelSignature
    from mlflow.types.schema import AnyType, Array, ColSpec, Schema, TensorSpec

    columns = raw_columns(saved_model)
    if not columns:
        return None, None
    specs: list[ColSpec | TensorSpec] = []
    example: dict[str, list[Any]] = {}
    kind: Any  # a type name, or mlflow's AnyType
    value: Any
    for c in columns:
        if c["dtype"] == "string":
            kind, value = "string", ""
        elif c["dtype"].startswith("int") and not c["optional"]:
            kind, value = "long", 0
        elif c["dtype"].startswith("int"):  # int64 values, or float64 with NaN where missing
            kind, value = AnyType(), 0
        else:
            kind, value = "double", 0.0
        if len(c["shape"]) > 1:
            specs.append(ColSpec(Array(kind), c["column"]))
            example[c["column"]] = [[value] * int(c["shape"][1])]
        else:
            specs.append(ColSpec(kind, c["column"]))
            example[c["column"]] = [value]
    if classes is None:
        outputs = Schema([ColSpec("double", names.PREDICTIONS)])
    else:
        out_specs: list[ColSpec | TensorSpec] = [
            ColSpec("string", "class"),
            ColSpec("long", "class_id"),
            *(ColSpec("float", f"p_{i}") for i in range(len(classes))),
        ]
        outputs = Schema(out_specs)
    return ModelSignature(inputs=Schema(specs), outputs=outputs), pd.DataFrame(example)


def _column(values: np.ndarray, dtype) -> np.ndarray:
    """A DataFrame column as predict_raw takes it: NaN (or None) a missing cell, -2**63 for an
    integer, "" for a string."""
    import tensorflow as tf

    if dtype == tf.string:
        return np.array([b"" if v is None or v != v else str(v).encode() for v in values])
    if dtype.is_integer:
        floats = np.asarray(values, np.float64)
        ints = np.where(np.isnan(floats), names.INT64_MISSING, 0).astype(np.int64)
        present = ~np.isnan(floats)
        ints[present] = np.asarray(values)[present].astype(np.int64)
        return ints
    return np.asarray(values, np.float64).astype(dtype.as_numpy_dtype)


class ServingModel(PythonModel):
    """Calls the SavedModel's `predict_raw` signature; one DataFrame column per raw feature."""

    def load_context(self, context) -> None:
        import tensorflow as tf

        self._model = tf.saved_model.load(context.artifacts["saved_model"])
        self._fn = self._model.signatures[names.RAW_SIGNATURE]
        _, self._specs = self._fn.structured_input_signature

    def predict(self, context, model_input, params=None):
        import pandas as pd
        import tensorflow as tf

        from amp_pipeline.core.names import sanitize_names

        # Columns may come as the data wrote them ("Monthly charges"): the signature's inputs
        # are the sanitised feature names.
        model_input = model_input.set_axis(
            sanitize_names([str(c) for c in model_input.columns]), axis=1
        )
        missing = sorted(set(self._specs) - set(model_input.columns))
        if missing:
            raise ValueError(f"model input lacks feature columns: {', '.join(missing)}")
        features = {}
        for name, spec in self._specs.items():
            values = model_input[name].to_numpy()
            if spec.shape.rank == 2:  # a vector per row
                rows = [np.asarray(v, np.float64) for v in values]
                features[name] = tf.constant(np.stack(rows).astype(spec.dtype.as_numpy_dtype))
            else:
                features[name] = tf.constant(_column(values, spec.dtype))
        out = self._fn(**features)
        if names.PREDICTIONS in out:  # a regression label: one column, in the label's units
            return pd.DataFrame({names.PREDICTIONS: out[names.PREDICTIONS].numpy()})
        probs = out[names.PROBABILITIES].numpy()
        frame = pd.DataFrame(probs, columns=[f"p_{i}" for i in range(probs.shape[1])])
        frame.insert(0, "class_id", out[names.CLASS_IDS].numpy())
        frame.insert(0, "class", [c.decode() for c in out[names.CLASSES].numpy()])
        return frame

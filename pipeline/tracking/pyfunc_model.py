"""The served SavedModel as an MLflow pyfunc model: a DataFrame of raw features in, classes out
(or, for a regression label, its predictions in the label's units)."""

from __future__ import annotations

import mlflow.pyfunc

from amp_pipeline.core import names


class ServingModel(mlflow.pyfunc.PythonModel):
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
        features = {
            name: tf.constant(model_input[name].to_numpy(), spec.dtype)
            for name, spec in self._specs.items()
        }
        out = self._fn(**features)
        if names.PREDICTIONS in out:  # a regression label: one column, in the label's units
            return pd.DataFrame({names.PREDICTIONS: out[names.PREDICTIONS].numpy()})
        probs = out[names.PROBABILITIES].numpy()
        frame = pd.DataFrame(probs, columns=[f"p_{i}" for i in range(probs.shape[1])])
        frame.insert(0, "class_id", out[names.CLASS_IDS].numpy())
        frame.insert(0, "class", [c.decode() for c in out[names.CLASSES].numpy()])
        return frame

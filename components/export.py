"""The serving SavedModel: Transform graph + Keras model behind TF Serving signatures.

Signatures:
- `serving_default`: serialized raw `tf.Example` -> `probabilities`, `class_ids`, `classes`
  (the label names). Preprocessing runs inside, so serving cannot skew from training.
- `transform_features`: serialized raw `tf.Example` (label included) -> Transform's outputs.
  TFMA calls it to get the class-id label (EvalConfig `preprocessing_function_names`).
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

from components.preprocessing import FEATURES_KEY
from pipeline.ingest import DataSpec

SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"
PROBABILITIES = "probabilities"
CLASS_IDS = "class_ids"
CLASSES = "classes"


class ServingModule(tf.Module):
    """Holds the model, the Transform layer and the label vocabulary for tf.saved_model.save."""

    def __init__(self, model, transform_output: str, data_spec: DataSpec):
        super().__init__()
        self.model = model
        tft_output = tft.TFTransformOutput(transform_output)
        self.tft_layer = tft_output.transform_features_layer()
        self._raw_spec = tft_output.raw_feature_spec()
        self._serving_spec = {k: v for k, v in self._raw_spec.items() if k != data_spec.label}
        self.class_names = tf.constant(list(data_spec.classes))

    def predict_from_features(self, transformed: dict) -> dict:
        probs = tf.cast(self.model(transformed[FEATURES_KEY], training=False), tf.float32)
        ids = tf.argmax(probs, axis=-1)
        return {PROBABILITIES: probs, CLASS_IDS: ids, CLASSES: tf.gather(self.class_names, ids)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(self, examples):
        raw = tf.io.parse_example(examples, self._serving_spec)
        return self.predict_from_features(self.tft_layer(raw))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(self, examples):
        raw = tf.io.parse_example(examples, self._raw_spec)
        return self.tft_layer(raw)


def export_serving_model(model, transform_output: str, export_dir: str, data_spec: dict) -> str:
    """Writes the serving SavedModel to `export_dir` and returns it."""
    module = ServingModule(model, transform_output, DataSpec.from_dict(data_spec))
    tf.saved_model.save(
        module,
        export_dir,
        signatures={
            SERVING_SIGNATURE: module.serve_examples,
            TRANSFORM_SIGNATURE: module.transform_features,
        },
    )
    return export_dir

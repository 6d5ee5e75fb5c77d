"""The serving SavedModel: Transform graph + Keras model behind TF Serving signatures.

Signatures:
- `serving_default`: serialized raw `tf.Example` -> `probabilities`, `class_ids`, `classes`
  (the label names). Preprocessing runs inside, so serving cannot skew from training.
- `predict_raw`: one tensor per raw feature (the label excluded; [batch] for scalars,
  [batch, n] for vectors) -> the same outputs. For REST JSON clients.
- `transform_features`: serialized raw `tf.Example` (label included) -> Transform's outputs.
  TFMA calls it to get the class-id label (EvalConfig `preprocessing_function_names`).

The trainer hands in the model to serve: by default its float32 rebuild (the same architecture
under the float32 policy with the trained weights: components/trainer_job.py::float32_rebuild),
which runs well on any CPU server; with `serving_precision="mixed"`, the model as trained.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

from core.data_spec import DataSpec
from core.names import (
    CLASS_IDS,
    CLASSES,
    FEATURES_KEY,
    PROBABILITIES,
    RAW_SIGNATURE,
    SERVING_SIGNATURE,
    TRANSFORM_SIGNATURE,
)


def _raw_shape(spec) -> list:
    """[batch] for scalar features (fixed [1] or optional), [batch, n] for vectors."""
    if isinstance(spec, tf.io.FixedLenFeature) and list(spec.shape) != [1]:
        return [None, *spec.shape]
    return [None]


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
        self.raw_signature = {
            name: tf.TensorSpec(_raw_shape(spec), spec.dtype, name=name)
            for name, spec in self._serving_spec.items()
        }
        self.serve_raw = tf.function(self._serve_raw, input_signature=[self.raw_signature])

    def _serve_raw(self, features):
        raw = {}
        for name, spec in self._serving_spec.items():
            value = features[name]
            if isinstance(spec, tf.io.VarLenFeature):
                # Every example has its one value: a sparse tensor with all positions present.
                n = tf.shape(value, out_type=tf.int64)[0]
                indices = tf.stack([tf.range(n), tf.zeros([n], tf.int64)], axis=1)
                value = tf.SparseTensor(indices, value, [n, 1])
            elif list(spec.shape) == [1]:
                value = tf.reshape(value, [-1, 1])
            raw[name] = value
        return self.predict_from_features(self.tft_layer(raw))

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
            RAW_SIGNATURE: module.serve_raw,
            TRANSFORM_SIGNATURE: module.transform_features,
        },
    )
    return export_dir

"""Tiny SavedModels with the pipeline's serving signatures, for the serving tests.

The same signatures as components/export/saved_model.py (`serving_default` on serialized
tf.Examples, `predict_raw` on one [batch] tensor per feature, outputs
probabilities/class_ids/classes), over a linear softmax instead of a trained network: the server
does not care what is inside, and building one takes a second instead of a pipeline run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_FEATURES = 4
FEATURES = tuple(f"f{i}" for i in range(N_FEATURES))
CLASSES = ("a", "b", "c")


def build(path: Path, seed: int) -> Path:
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    weights = tf.constant(rng.normal(size=(N_FEATURES, len(CLASSES))).astype("float32"))
    spec = {name: tf.io.FixedLenFeature([], tf.float32) for name in FEATURES}

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(weights)
            self.names = tf.constant(list(CLASSES))

        def _outputs(self, features):
            x = tf.stack([features[name] for name in FEATURES], axis=1)
            probs = tf.nn.softmax(tf.matmul(x, self.w))
            ids = tf.argmax(probs, axis=-1)
            return {"probabilities": probs, "class_ids": ids, "classes": tf.gather(self.names, ids)}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve_examples(self, examples):
            return self._outputs(tf.io.parse_example(examples, spec))

        @tf.function(
            input_signature=[{n: tf.TensorSpec([None], tf.float32, name=n) for n in FEATURES}]
        )
        def serve_raw(self, features):
            return self._outputs(features)

    module = Module()
    tf.saved_model.save(
        module,
        str(path),
        signatures={"serving_default": module.serve_examples, "predict_raw": module.serve_raw},
    )
    return path


def examples(x: np.ndarray) -> list[bytes]:
    """Serialized tf.Examples of the rows of `x` (features f0..f3)."""
    import tensorflow as tf

    return [
        tf.train.Example(
            features=tf.train.Features(
                feature={
                    name: tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
                    for name, value in zip(FEATURES, row, strict=True)
                }
            )
        ).SerializeToString()
        for row in x
    ]

"""A model with its own TensorFlow Transform `preprocessing_fn`, for the digits (pixel_0..63).

`x` holds the 64 pixels scaled to [0, 1] plus 16 engineered features, the ink in each row and
each column, standardised: 80 values. The pipeline adds the label and reads the width of `x`
from Transform's output, so `spec.input_width` is 80 here.
"""

import keras
import tensorflow as tf
import tensorflow_transform as tft


def _pixels(inputs):
    names = sorted((k for k in inputs if k.startswith("pixel_")), key=lambda k: int(k[6:]))
    if len(names) != 64:
        raise ValueError(f"expected the digits' 64 pixel columns, got {len(names)}")
    columns = []
    for name in names:
        t = inputs[name]
        if isinstance(t, tf.SparseTensor):
            t = tf.sparse.to_dense(t)
        columns.append(tf.reshape(tf.cast(t, tf.float32), [-1, 1]))
    return tf.concat(columns, axis=1)


def preprocessing_fn(inputs):
    pixels = _pixels(inputs) / 16.0
    image = tf.reshape(pixels, [-1, 8, 8])
    ink = tf.concat([tf.reduce_sum(image, axis=2), tf.reduce_sum(image, axis=1)], axis=1)
    return {"x": tf.concat([pixels, tft.scale_to_z_score(ink)], axis=1)}


def build_model(spec):
    inputs = keras.Input((spec.input_width,), name="x")
    x = keras.layers.Dense(128, activation="relu")(inputs)
    x = keras.layers.Dense(64, activation="relu")(x)
    logits = keras.layers.Dense(spec.num_classes, name="logits")(x)
    outputs = keras.layers.Softmax(name="probabilities")(logits)
    return keras.Model(inputs, outputs, name="own_preprocessing")

"""A functional model with a custom layer that breaks under mixed precision until it is fixed.

`Recenter` adds a hard-coded offset and takes it away again, as code written for float32 often
does with large constants (calibration offsets, -1e9 attention masks, 1e-8 epsilons). In float32
it changes nothing. In float16 the offset (100000) is above the largest value (65504): the
output is inf - inf = NaN. In bfloat16 the spacing between numbers near 100000 is 512, so every
input in [0, 1] comes back as 0 and the model sees nothing.

    amp-pipeline check-model --model-module examples/custom_layer.py

names `recenter` as the first bad layer and suggests `dtype="float32"`. The fix is one argument:
set FIXED below to True (the layer is then built with dtype="float32" and computes in float32
whatever the policy).
"""

import keras

FIXED = False  # True: Recenter computes in float32 under every policy


class Recenter(keras.layers.Layer):
    """Adds and removes a large calibration offset: the identity, in float32."""

    OFFSET = 100_000.0

    def call(self, x):
        return (x + self.OFFSET) - self.OFFSET


def build_model(spec):
    inputs = keras.Input((spec.input_width,), name="x")
    x = Recenter(name="recenter", dtype="float32" if FIXED else None)(inputs)
    x = keras.layers.Dense(128, activation="relu")(x)
    x = keras.layers.Dense(64, activation="relu")(x)
    # The softmax is left to the policy: the pipeline moves this final layer to float32.
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax", name="head")(x)
    return keras.Model(inputs, outputs, name="custom_layer")

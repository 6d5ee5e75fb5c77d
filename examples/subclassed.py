"""A subclassed Keras model (`keras.Model` with `call`), with its own optimizer and loss.

The pipeline cannot see inside `call`, so it finds the output dtype by running the model, and
wraps the bfloat16/float16 output in a float32 layer (the summary says so).
"""

import keras


class DigitsNet(keras.Model):
    """Two convolutions over the image when there is one, else a two-layer MLP."""

    def __init__(self, num_classes: int, image_shape=None, **kwargs):
        super().__init__(**kwargs)
        self.image_shape = tuple(image_shape) if image_shape else None
        if self.image_shape:
            self.reshape = keras.layers.Reshape(self.image_shape)
            self.conv1 = keras.layers.Conv2D(32, 3, padding="same", activation="relu")
            self.conv2 = keras.layers.Conv2D(64, 3, padding="same", activation="relu")
            self.flatten = keras.layers.Flatten()
        self.hidden = keras.layers.Dense(128, activation="relu")
        self.out = keras.layers.Dense(num_classes, activation="softmax")

    def call(self, x):
        if self.image_shape:
            x = self.flatten(self.conv2(self.conv1(self.reshape(x))))
        return self.out(self.hidden(x))


def build_model(spec):
    return DigitsNet(spec.num_classes, spec.image_shape, name="digits_net")


def optimizer():
    return keras.optimizers.Adam(learning_rate=2e-3)


def loss():
    return keras.losses.SparseCategoricalCrossentropy()

"""Keras 3 models. Each takes the Transform output `x` (a flat float vector) and returns class
probabilities. The last Dense layer and the softmax run in float32 under every policy."""

from __future__ import annotations

import keras

MODEL_NAMES = ("cnn", "mlp")


def _head(x, num_classes: int):
    # float32 logits and softmax: bfloat16/float16 softmax loses the small probabilities.
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.layers.Activation("softmax", dtype="float32", name="probabilities")(logits)


def build_cnn(input_dim: int, image_shape: tuple[int, int, int], num_classes: int) -> keras.Model:
    """A small CNN over `image_shape` images (flattened in `x`)."""
    h, w, c = image_shape
    if h * w * c != input_dim:
        raise ValueError(
            f"Invalid value for argument image_shape: {h}x{w}x{c} != input width {input_dim}. "
            f"Received: image_shape={image_shape!r}"
        )
    inputs = keras.Input((input_dim,), name="x")
    x = keras.layers.Reshape(image_shape)(inputs)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(128, activation="relu")(x)
    return keras.Model(inputs, _head(x, num_classes), name="cnn")


def build_mlp(input_dim: int, num_classes: int, width: int = 128) -> keras.Model:
    """A two-hidden-layer MLP for tabular data."""
    inputs = keras.Input((input_dim,), name="x")
    x = keras.layers.Dense(width, activation="relu")(inputs)
    x = keras.layers.Dense(width, activation="relu")(x)
    return keras.Model(inputs, _head(x, num_classes), name="mlp")


def build_model(
    name: str,
    input_dim: int,
    num_classes: int,
    image_shape: tuple[int, int, int] | None = None,
) -> keras.Model:
    """Builds `name` under the current global dtype policy."""
    if name == "cnn":
        if image_shape is None:
            raise ValueError(
                "Invalid value for argument model: 'cnn' needs image input (pixel columns, an "
                "`image` feature or an image folder); use 'mlp' for tabular data. "
                f"Received: model={name!r}"
            )
        return build_cnn(input_dim, image_shape, num_classes)
    if name == "mlp":
        return build_mlp(input_dim, num_classes)
    raise ValueError(
        f"Invalid value for argument model: expected one of {', '.join(MODEL_NAMES)}. "
        f"Received: model={name!r}"
    )

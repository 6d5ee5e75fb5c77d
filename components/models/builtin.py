"""Keras 3 models. Each takes the Transform output `x` (a flat float vector) and returns class
probabilities. The last Dense layer and the softmax run in float32 under every policy."""

from __future__ import annotations

import keras

from core.names import PROBABILITIES

MODEL_NAMES = ("cnn", "mlp", "resnet50", "transformer")


def _head(x, num_classes: int):
    # float32 logits and softmax: bfloat16/float16 softmax loses the small probabilities.
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.layers.Activation("softmax", dtype="float32", name=PROBABILITIES)(logits)


CNN_MIN_SIDE = 16


def build_cnn(
    input_dim: int,
    image_shape: tuple[int, int, int],
    num_classes: int,
    min_side: int = CNN_MIN_SIDE,
) -> keras.Model:
    """A small CNN over `image_shape` images (flattened in `x`).

    Images smaller than `min_side` are first upsampled (nearest neighbour, by a whole factor):
    the embedded 8x8 digits become 16x16. At 8x8 a training step is mostly per-step overhead and
    bfloat16 gains nothing; at 16x16 the convolutions dominate, which is what bfloat16 speeds up
    (benchmarks/RESULTS.md).
    """
    h, w, c = image_shape
    if h * w * c != input_dim:
        raise ValueError(
            f"Invalid value for argument image_shape: {h}x{w}x{c} != input width {input_dim}. "
            f"Received: image_shape={image_shape!r}"
        )
    inputs = keras.Input((input_dim,), name="x")
    x = keras.layers.Reshape(image_shape)(inputs)
    factor = -(-min_side // min(h, w))  # ceil
    if factor > 1:
        x = keras.layers.UpSampling2D(factor, interpolation="nearest", name="upsample")(x)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    for _ in range(2):
        x = keras.layers.MaxPooling2D()(x)
        x = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    # Flatten, not global pooling: where a stroke is matters for a digit.
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(128, activation="relu")(x)
    return keras.Model(inputs, _head(x, num_classes), name="cnn")


def build_mlp(input_dim: int, num_classes: int, width: int = 128) -> keras.Model:
    """A two-hidden-layer MLP for tabular data."""
    inputs = keras.Input((input_dim,), name="x")
    x = keras.layers.Dense(width, activation="relu")(inputs)
    x = keras.layers.Dense(width, activation="relu")(x)
    return keras.Model(inputs, _head(x, num_classes), name="mlp")


def build_resnet50(
    input_dim: int, image_shape: tuple[int, int, int], num_classes: int, resolution: int = 96
) -> keras.Model:
    """Keras applications' ResNet50 (`weights=None`) at `resolution`x`resolution`x3.

    Inputs are reshaped to `image_shape`, repeated to 3 channels and resized when needed.
    """
    if resolution < 32:
        raise ValueError(
            f"Invalid value for argument resolution: ResNet50 needs at least 32. "
            f"Received: resolution={resolution}"
        )
    inputs = keras.Input((input_dim,), name="x")
    x = keras.layers.Reshape(image_shape)(inputs)
    if image_shape[2] == 1:
        x = keras.layers.Concatenate()([x, x, x])
    if image_shape[:2] != (resolution, resolution):
        x = keras.layers.Resizing(resolution, resolution)(x)
    backbone = keras.applications.ResNet50(
        weights=None, include_top=False, input_shape=(resolution, resolution, 3), pooling="avg"
    )
    return keras.Model(inputs, _head(backbone(x), num_classes), name="resnet50")


class PositionEmbedding(keras.layers.Layer):
    """Adds a learned embedding per sequence position."""

    def build(self, input_shape):
        self.embedding = self.add_weight(
            shape=tuple(input_shape[1:]), initializer="glorot_uniform", name="embedding"
        )

    def call(self, x):
        return x + keras.ops.cast(self.embedding, x.dtype)


def build_transformer(
    input_dim: int,
    num_classes: int,
    seq_len: int = 0,
    depth: int = 2,
    width: int = 256,
    heads: int = 4,
) -> keras.Model:
    """A BERT-style encoder over `x` cut into `seq_len` tokens (0: one token per feature)."""
    seq_len = seq_len or input_dim
    if input_dim % seq_len or width % heads:
        raise ValueError(
            "Invalid value for argument seq_len/heads: seq_len must divide the input width "
            f"({input_dim}) and heads the model width ({width}). "
            f"Received: seq_len={seq_len}, heads={heads}"
        )
    inputs = keras.Input((input_dim,), name="x")
    x = keras.layers.Reshape((seq_len, input_dim // seq_len))(inputs)
    x = PositionEmbedding()(keras.layers.Dense(width)(x))
    for _ in range(depth):
        attention = keras.layers.MultiHeadAttention(heads, width // heads)(x, x)
        x = keras.layers.LayerNormalization()(x + attention)
        ff = keras.layers.Dense(4 * width, activation="gelu")(x)
        x = keras.layers.LayerNormalization()(x + keras.layers.Dense(width)(ff))
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(inputs, _head(x, num_classes), name="transformer")


def build_model(
    name: str,
    input_dim: int,
    num_classes: int,
    image_shape: tuple[int, int, int] | None = None,
    **options,
) -> keras.Model:
    """Builds `name` under the current global dtype policy.

    `options`: `resolution` for resnet50; `seq_len`, `depth`, `width`, `heads` for transformer.
    """
    if name in ("cnn", "resnet50") and image_shape is None:
        raise ValueError(
            f"Invalid value for argument model: {name!r} needs image input (pixel columns, an "
            "`image` feature or an image folder); use 'mlp' for tabular data. "
            f"Received: model={name!r}"
        )
    if name == "resnet50":
        return build_resnet50(input_dim, image_shape, num_classes, **options)
    if name == "transformer":
        return build_transformer(input_dim, num_classes, **options)
    if name == "cnn":
        return build_cnn(input_dim, image_shape, num_classes)
    if name == "mlp":
        return build_mlp(input_dim, num_classes)
    raise ValueError(
        f"Invalid value for argument model: expected one of {', '.join(MODEL_NAMES)}. "
        f"Received: model={name!r}"
    )

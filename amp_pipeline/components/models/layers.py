"""The custom Keras layers the built-in models use: token ids and column slices out of the feature
vector, the key padding mask, position embeddings, the float32 layer norm and float32-softmax
attention that keep mixed precision stable, masked mean pooling, hashed word pairs and DLRM's dot
interaction."""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="amp_pipeline")
class PositionEmbedding(keras.layers.Layer):
    """Adds a learned embedding per sequence position."""

    def build(self, input_shape):
        self.embedding = self.add_weight(
            shape=tuple(input_shape[1:]), initializer="glorot_uniform", name="embedding"
        )

    def call(self, x):
        return x + keras.ops.cast(self.embedding, x.dtype)


@keras.saving.register_keras_serializable(package="amp_pipeline")
class TokenIds(keras.layers.Layer):
    """A text feature's token ids, cut out of `x` and cast to int32, always in float32: under
    mixed_bfloat16 a cast of `x` to the compute dtype would round every id above 256."""

    def __init__(self, start: int, stop: int, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.start, self.stop = start, stop

    def call(self, x):
        return keras.ops.cast(keras.ops.round(x[:, self.start : self.stop]), "int32")

    def compute_output_spec(self, x):
        return keras.KerasTensor((x.shape[0], self.stop - self.start), dtype="int32")

    def get_config(self):
        return {**super().get_config(), "start": self.start, "stop": self.stop}


@keras.saving.register_keras_serializable(package="amp_pipeline")
class Columns(keras.layers.Layer):
    """Columns [start, stop) of `x`, in float32."""

    def __init__(self, start: int, stop: int, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.start, self.stop = start, stop

    def call(self, x):
        return x[:, self.start : self.stop]

    def get_config(self):
        return {**super().get_config(), "start": self.start, "stop": self.stop}


@keras.saving.register_keras_serializable(package="amp_pipeline")
class KeyPaddingMask(keras.layers.Layer):
    """[batch, seq] ids -> [batch, seq, seq] bool: which keys each query may attend to (the
    non-padding tokens)."""

    def call(self, ids):
        keys = keras.ops.not_equal(ids, 0)[:, None, :]
        return keras.ops.repeat(keys, ids.shape[1], axis=1)

    def compute_output_spec(self, ids):
        return keras.KerasTensor((ids.shape[0], ids.shape[1], ids.shape[1]), dtype="bool")


@keras.saving.register_keras_serializable(package="amp_pipeline")
class Float32LayerNorm(keras.layers.LayerNormalization):
    """LayerNormalization computed in float32 whatever its input's dtype (Keras' own keeps a
    bfloat16/float16 input in that dtype: it does not autocast)."""

    def __init__(self, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)

    def call(self, inputs):
        return super().call(keras.ops.cast(inputs, "float32"))


@keras.saving.register_keras_serializable(package="amp_pipeline")
class Float32SoftmaxAttention(keras.layers.MultiHeadAttention):
    """MultiHeadAttention whose softmax runs in float32: the scores are cast up, padded keys
    get -1e9 (in float32, not the float16-safe -3e4 a float16 softmax needs) and the
    probabilities are cast back to the compute dtype for the value product.

    Keras 3.12 computes attention with `ops.dot_product_attention`, which never calls
    `_masked_softmax`, whenever dropout is 0 and no scores are asked for; `_compute_attention`
    therefore always asks for the scores, which keeps the explicit path and this softmax."""

    def _compute_attention(
        self, query, key, value, attention_mask=None, training=None, return_attention_scores=False
    ):
        output, scores = super()._compute_attention(
            query, key, value, attention_mask, training, return_attention_scores=True
        )
        return output, (scores if return_attention_scores else None)

    def _masked_softmax(self, attention_scores, attention_mask=None):
        scores = keras.ops.cast(attention_scores, "float32")
        if attention_mask is not None:
            axis = -len(self._attention_axes) * 2 - 1
            for _ in range(len(scores.shape) - len(attention_mask.shape)):
                attention_mask = keras.ops.expand_dims(attention_mask, axis=axis)
            scores = keras.ops.where(attention_mask, scores, -1e9)
        probabilities = keras.ops.softmax(scores, axis=-1)
        if attention_mask is not None:  # a text with no token attends to nothing
            probabilities = probabilities * keras.ops.cast(attention_mask, "float32")
        return keras.ops.cast(probabilities, self.compute_dtype)


@keras.saving.register_keras_serializable(package="amp_pipeline")
class MaskedMeanPool(keras.layers.Layer):
    """The mean of the token vectors over the non-padding tokens, in float32 (0 for an empty
    text)."""

    def __init__(self, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)

    def call(self, x, ids):
        # expand_dims, not [:, :, None]: a new-axis StridedSlice is no TFLite builtin here.
        mask = keras.ops.expand_dims(keras.ops.cast(keras.ops.not_equal(ids, 0), "float32"), -1)
        total = keras.ops.sum(keras.ops.cast(x, "float32") * mask, axis=1)
        return total / keras.ops.maximum(keras.ops.sum(mask, axis=1), 1.0)


@keras.saving.register_keras_serializable(package="amp_pipeline")
class HashedBigrams(keras.layers.Layer):
    """The ids of a text's word pairs, from its token ids: neighbours (a, b) get the id
    `offset + (a * ids + b) mod buckets`, where `ids` is the number of token ids (padding,
    the vocabulary, out-of-vocabulary) and `offset` the first id after them; a pair with
    padding in it gets 0 (padding). Computed in the model from the ids the tokenizer gives, so
    a device app builds nothing new: the same token ids feed the TFLite model. int32 all the
    way: `ids` squared must stay under 2**31 (a vocabulary of up to 46,000 tokens)."""

    def __init__(self, ids: int, buckets: int, offset: int, **kwargs):
        if ids * ids >= 2**31:
            raise ValueError(
                f"Invalid value for argument vocab_size: word pairs are hashed in int32, so at "
                f"most 46,000 token ids. Received: {ids} ids"
            )
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.ids, self.buckets, self.offset = ids, buckets, offset

    def call(self, tokens):
        first, second = tokens[:, :-1], tokens[:, 1:]
        pair = keras.ops.mod(first * self.ids + second, self.buckets) + self.offset
        both = keras.ops.logical_and(keras.ops.not_equal(first, 0), keras.ops.not_equal(second, 0))
        return keras.ops.where(both, pair, keras.ops.zeros_like(pair))

    def compute_output_spec(self, tokens):
        return keras.KerasTensor((tokens.shape[0], tokens.shape[1] - 1), dtype="int32")

    def get_config(self):
        return {
            **super().get_config(),
            "ids": self.ids,
            "buckets": self.buckets,
            "offset": self.offset,
        }


@keras.saving.register_keras_serializable(package="amp_pipeline")
class DotInteraction(keras.layers.Layer):
    """DLRM's feature interaction: [batch, n, dim] vectors -> the n(n-1)/2 pairwise dot
    products, in the compute dtype (NVIDIA's DLRM runs it in half precision)."""

    def call(self, vectors):
        n = vectors.shape[1]
        dots = keras.ops.matmul(vectors, keras.ops.transpose(vectors, (0, 2, 1)))
        rows, cols = zip(*[(i, j) for i in range(n) for j in range(i)], strict=True)
        flat = keras.ops.reshape(dots, (-1, n * n))
        return keras.ops.take(flat, [r * n + c for r, c in zip(rows, cols, strict=True)], axis=1)

    def compute_output_spec(self, vectors):
        n = vectors.shape[1]
        return keras.KerasTensor((vectors.shape[0], n * (n - 1) // 2), dtype=self.compute_dtype)

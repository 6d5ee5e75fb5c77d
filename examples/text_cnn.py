"""Your own text model: a small convolutional text classifier over the token ids the pipeline's
Transform makes (a bag-of-n-grams model, often as good as a transformer on short texts).

    amp-pipeline run --data posts.csv --label label --model-module examples/text_cnn.py

`spec` says where each text feature's token ids sit in `x` (`spec.feature_slices`, the names in
`spec.text_features`), how many there are (`spec.max_tokens`) and how large the vocabulary is
(`spec.vocab_size`: ids are 0 for padding, 1..vocab_size + 1 for tokens). The ids arrive as
float32 in `x`: cut them out and cast them to integers in a float32 layer, before any layer of
the mixed-precision policy sees them (bfloat16 holds integers exactly only up to 256).
"""

import keras


class Ids(keras.layers.Layer):
    """Columns [start, stop) of `x` as int32 token ids, computed in float32."""

    def __init__(self, start, stop, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.start, self.stop = start, stop

    def call(self, x):
        return keras.ops.cast(keras.ops.round(x[:, self.start : self.stop]), "int32")

    def compute_output_spec(self, x):
        return keras.KerasTensor((x.shape[0], self.stop - self.start), dtype="int32")

    def get_config(self):
        return {**super().get_config(), "start": self.start, "stop": self.stop}


def build_model(spec):
    if not spec.text_features:
        raise ValueError("text_cnn needs a text feature (a string column of multi-word values)")
    inputs = keras.Input((spec.input_width,), name="x")
    pooled = []
    for name, start, stop in spec.feature_slices:
        if name not in spec.text_features:
            continue
        ids = Ids(start, stop, name=f"{name}_ids")(inputs)
        x = keras.layers.Embedding(spec.vocab_size + 2, 64, name=f"{name}_embedding")(ids)
        for width in (2, 3):  # bigrams and trigrams
            conv = keras.layers.Conv1D(64, width, padding="same", activation="relu")(x)
            pooled.append(keras.layers.GlobalMaxPooling1D()(conv))
    x = keras.layers.Concatenate()(pooled) if len(pooled) > 1 else pooled[0]
    x = keras.layers.Dense(64, activation="relu")(x)
    # The pipeline moves this final layer to float32.
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax", name="head")(x)
    return keras.Model(inputs, outputs, name="text_cnn")

"""A two-tower recommender for ratings: a user tower and an item tower, their dot product.

    python -m amp_pipeline.benchmarks.quality.ratings_data ratings.csv 20000
    amp-pipeline run --data ratings.csv --label rating --model-module examples/two_tower.py

It reads what the pipeline tells every model module about categorical features
(`spec.categorical_features`, `spec.categorical_sizes`, `spec.feature_slices`): the first
category is the user, the second the item. Each id is cut out of `x` and cast to an integer
in float32 (bfloat16 holds integers exactly only up to 256), looked up in a float32 table (Keras'
Embedding keeps its variables float32 under a mixed policy and returns the compute dtype), and
turned into a 32-wide tower output; the rating is their dot product plus a user and an item
bias. The last layer is float32. For a classification label it returns class probabilities
from the same dot product instead.
"""

import keras

DIM = 32


class IdColumn(keras.layers.Layer):
    """Column `start` of `x` as [batch, 1] int32 ids, cut out and cast in float32."""

    def __init__(self, start: int, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.start = start

    def call(self, x):
        return keras.ops.cast(keras.ops.round(x[:, self.start : self.start + 1]), "int32")

    def compute_output_spec(self, x):
        return keras.KerasTensor((x.shape[0], 1), dtype="int32")

    def get_config(self):
        return {**super().get_config(), "start": self.start}


def _id(x, start: int, name: str):
    return IdColumn(start, name=f"{name}_id")(x)


def _tower(ids, size: int, name: str):
    vectors = keras.layers.Embedding(size, DIM, name=f"{name}_table")(ids)
    h = keras.layers.Flatten(name=f"{name}_vector")(vectors)
    h = keras.layers.Dense(64, activation="relu", name=f"{name}_hidden")(h)
    return keras.layers.Dense(DIM, name=f"{name}_out")(h)


def build_model(spec):
    if len(spec.categorical_features) < 2:
        raise ValueError(
            "two_tower needs two categorical features (a user and an item column); "
            f"this data has {list(spec.categorical_features)}"
        )
    where = {name: start for name, start, _ in spec.feature_slices}
    (user, item), (user_size, item_size) = (
        spec.categorical_features[:2],
        spec.categorical_sizes[:2],
    )
    inputs = keras.Input((spec.input_width,), name="x")
    user_ids, item_ids = _id(inputs, where[user], "user"), _id(inputs, where[item], "item")
    match = keras.layers.Dot(axes=1, name="match")(
        [_tower(user_ids, user_size, "user"), _tower(item_ids, item_size, "item")]
    )
    user_bias = keras.layers.Flatten()(keras.layers.Embedding(user_size, 1)(user_ids))
    item_bias = keras.layers.Flatten()(keras.layers.Embedding(item_size, 1)(item_ids))
    score = keras.layers.Add(name="score")([match, user_bias, item_bias])
    if spec.task == "regression":
        outputs = keras.layers.Dense(1, dtype="float32", name="rating")(score)
    else:
        outputs = keras.layers.Dense(
            spec.num_classes, activation="softmax", dtype="float32", name="head"
        )(score)
    return keras.Model(inputs, outputs, name="two_tower")

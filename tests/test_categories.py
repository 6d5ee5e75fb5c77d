"""Categorical features with many values: which columns the input check embeds, and the
embedding under AMP (float32 tables, lookups in the compute dtype, ids exact)."""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest

from amp_pipeline.components.data.ingest import prepare
from amp_pipeline.components.data.inspection import CsvOptions
from amp_pipeline.core.errors import InputError
from tests.conftest import ROOT
from tests.helpers import tf_example


def write(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def rows(n: int = 400):
    rng = np.random.default_rng(0)
    return [
        {
            "userId": int(rng.integers(50)),  # an ID, repeated: a category
            "store_id": int(rng.integers(10)),  # 10 stores: categories too, not a magnitude
            "order_id": i,  # an ID, unique per row: excluded
            "city": f"city{int(rng.integers(40))}",  # 40 values: embedded
            "color": ["red", "blue", "green"][i % 3],  # 3 values: one-hot
            "age": int(rng.integers(18, 80)),  # a number
            "y": i % 2,
        }
        for i in range(n)
    ]


def test_ids_and_many_valued_strings_become_categories(tmp_path):
    spec = prepare(write(tmp_path / "d.csv", rows()), "y", tmp_path / "w")
    assert spec.categorical_features == ("userId", "store_id", "city")
    assert spec.string_features == ("color",)
    assert [n for n, _ in spec.numeric_features] == ["age"]
    assert any(e["feature"] == "order_id" and "ID-like" in e["reason"] for e in spec.excluded)
    from amp_pipeline.components.data.report import format_data

    text = format_data(spec)
    assert re.search(r"userId\s+userId\s+category", text)
    assert "'city': a vocabulary of its values" in text


def test_categorical_columns_makes_an_integer_column_a_category(tmp_path):
    data = write(tmp_path / "d.csv", rows())
    spec = prepare(data, "y", tmp_path / "w", csv_options=CsvOptions(categorical_columns=("age",)))
    assert "age" in spec.categorical_features and not spec.numeric_features


def test_a_float_column_cannot_be_categories(tmp_path):
    data = [{**r, "price": f"{r['age'] * 1.5:.2f}"} for r in rows()]
    path = write(tmp_path / "d.csv", data)
    with pytest.raises(InputError, match=r"--categorical-columns price: .* float values"):
        prepare(path, "y", tmp_path / "w", csv_options=CsvOptions(categorical_columns=("price",)))


def test_under_mixed_bfloat16_tables_stay_float32_and_lookups_give_bfloat16():
    import keras

    from amp_pipeline.components.models.builtin import build_mlp, embedding_dim

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        # x: 2 numeric columns, then a category id in column 2 (1,000 ids).
        model = build_mlp(3, 0, categorical=(("user", 2, 3, 1000),))
        table = model.get_layer("user_embedding")
        assert table.embeddings.dtype == "float32" and table.compute_dtype == "bfloat16"
        assert table.output_dim == embedding_dim(1000) == 64
        vectors = table(np.array([[999]]))
        assert keras.ops.convert_to_numpy(vectors).dtype.name == "bfloat16"
        # Id 999 reaches its own row: bfloat16 holds integers exactly only up to 256.
        ids = model.get_layer("user_id")(np.array([[0.5, -1.0, 999.0]], "float32"))
        assert keras.ops.convert_to_numpy(ids).tolist() == [[999]]
        assert model.get_layer("predictions").dtype_policy.compute_dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_the_embedding_width_rule():
    from amp_pipeline.components.models.builtin import embedding_dim

    assert [embedding_dim(n) for n in (2, 20, 671, 9000, 10**6)] == [4, 9, 61, 64, 64]


def test_the_dlrm_model_embeds_every_category_and_crosses_them_by_dot_products():
    import keras

    from amp_pipeline.components.models.builtin import build_dlrm

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        # x: 3 dense columns, then two category ids (500 and 20 ids).
        categorical = (("user", 3, 4, 500), ("item", 4, 5, 20))
        model = build_dlrm(5, 0, categorical=categorical, dim=8, bottom=(16,), top=(16,))
        for name in ("user_embedding", "item_embedding"):
            layer = model.get_layer(name)
            assert layer.embeddings.dtype == "float32" and layer.output_dim == 8
        # Three vectors (the bottom MLP's and two embeddings): three pairwise dot products.
        assert model.get_layer("interaction").output.shape == (None, 3)
        x = np.array([[0.1, 0.2, 0.3, 499, 19], [0.0, 0.0, 0.0, 0, 0]], "float32")
        out = keras.ops.convert_to_numpy(model(x))
        assert out.shape == (2, 1) and out.dtype == np.float32
    finally:
        keras.mixed_precision.set_global_policy("float32")
    with pytest.raises(ValueError, match="'dlrm' needs categorical features"):
        build_dlrm(5, 2)


def genre_rows(n: int = 300):
    rng = np.random.default_rng(1)
    genres = ["Action", "Comedy", "Drama", "Horror", "Children"]
    return [
        {
            "genres": "|".join(rng.choice(genres, int(rng.integers(1, 4)), replace=False)),
            "plain": ["a", "b"][i % 2],
            "n": i % 7,
            "y": i % 2,
        }
        for i in range(n)
    ]


def test_a_column_of_joined_values_is_a_bag_and_a_separator_that_splits_nothing_is_named(
    tmp_path,
):
    path = write(tmp_path / "g.csv", genre_rows())
    spec = prepare(path, "y", tmp_path / "w")
    assert spec.bag_features == (("genres", 3),) and spec.bag_separator == "|"
    assert spec.string_features == ("plain",)
    with pytest.raises(InputError, match=r"--multi-value-columns plain: the separator splits none"):
        prepare(path, "y", tmp_path / "w2", csv_options=CsvOptions(multi_value_columns=("plain",)))
    with pytest.raises(InputError, match=r"--multi-value-columns n: .* int values"):
        prepare(path, "y", tmp_path / "w3", csv_options=CsvOptions(multi_value_columns=("n",)))
    # Named as categories, the joined values stay one category each.
    whole = prepare(
        path, "y", tmp_path / "w4", csv_options=CsvOptions(categorical_columns=("genres",))
    )
    assert whole.bag_features == () and "genres" in whole.categorical_features


def test_a_bag_is_the_mean_of_its_values_embeddings_padding_left_out():
    import keras

    from amp_pipeline.components.models.builtin import build_mlp

    model = build_mlp(4, 2, bags=(("genres", 1, 4, 7),))
    table = keras.ops.convert_to_numpy(model.get_layer("genres_embedding").embeddings)
    mean = model.get_layer("genres_mean")
    ids = np.array([[2, 5, 0], [3, 0, 0]], "int32")
    vectors = model.get_layer("genres_embedding")(ids)
    pooled = keras.ops.convert_to_numpy(mean(vectors, ids))
    np.testing.assert_allclose(pooled[0], (table[2] + table[5]) / 2, rtol=1e-6)
    np.testing.assert_allclose(pooled[1], table[3], rtol=1e-6)


def test_the_two_tower_example_reads_the_categories_from_its_spec_and_trains():
    """examples/two_tower.py as the pipeline calls a model module: built from a ModelSpec with
    two categories under mixed_bfloat16, float32 tables, one float32 output, a few steps of
    training that lower the loss on ratings made of user and item biases."""
    import keras

    from amp_pipeline.components.models import user_module
    from amp_pipeline.components.models.user_module import ModelSpec, ModuleRef

    ref = ModuleRef(ref=str(ROOT / "examples" / "two_tower.py"))
    module = user_module.load(ref)
    spec = ModelSpec(
        input_width=3, feature_names=("age", "userId", "movieId"), num_classes=0,
        class_names=(), feature_slices=(("age", 0, 1), ("userId", 1, 2), ("movieId", 2, 3)),
        task="regression", categorical_features=("userId", "movieId"),
        categorical_sizes=(301, 401),
    )  # fmt: skip
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = user_module.build(ref, module, spec)
        assert model.get_layer("user_table").embeddings.dtype == "float32"
        assert model.get_layer("rating").compute_dtype == "float32"
        rng = np.random.default_rng(0)
        users, items = rng.integers(0, 300, 2048), rng.integers(0, 400, 2048)
        bias_u, bias_i = rng.normal(0, 1, 301), rng.normal(0, 1, 401)
        x = np.stack([rng.random(2048), users, items], axis=1).astype("float32")
        y = (bias_u[users] + bias_i[items]).astype("float32")
        model.compile(keras.optimizers.Adam(1e-2), "mse")
        history = model.fit(x, y, batch_size=256, epochs=3, verbose=0).history["loss"]
        assert history[-1] < 0.7 * history[0], history
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_a_module_gets_category_sizes_before_transform_has_run(tmp_path):
    """check-model builds the module from the input check's DataSpec alone: the sizes are
    upper bounds then (the two-tower example failed to build on an empty tuple)."""
    from amp_pipeline.components.data.preprocessing import feature_width, model_spec
    from amp_pipeline.components.models import user_module
    from amp_pipeline.components.models.user_module import ModuleRef

    path = tmp_path / "r.csv"
    path.write_text(
        "userId,movieId,rating\n"
        + "".join(f"{i % 40},{i % 70},{(i % 9) / 2 + 0.5}\n" for i in range(400))
    )
    data = prepare(str(path), "rating", tmp_path / "w")
    spec = model_spec(data, feature_width(data))
    assert spec.categorical_features == ("userId", "movieId")
    assert spec.categorical_sizes == (100_002, 100_002)
    ref = ModuleRef(ref=str(ROOT / "examples" / "two_tower.py"))
    model = user_module.build(ref, user_module.load(ref), spec)
    assert model.get_layer("user_table").input_dim == 100_002


@pytest.mark.e2e
def test_the_python_encoder_gives_transforms_ids_missing_apart_from_any_value(tmp_path):
    """Transform's category and bag ids (preprocessing.category_ids, bag_ids) against the
    device rule (components/data/categories.py) on values the train split has and has not: a
    missing integer ID is id 0, not the ID 0's id; unknown values share the out-of-vocabulary
    id; bag values are stripped of ASCII whitespace, empty parts dropped."""
    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import schema_utils
    from tfx_bsl.public import tfxio

    from amp_pipeline.components.data import categories, preprocessing

    feature_spec = {
        "user": tf.io.VarLenFeature(tf.int64),
        "city": tf.io.VarLenFeature(tf.string),
        "genres": tf.io.VarLenFeature(tf.string),
    }
    schema = schema_utils.schema_from_feature_spec(feature_spec)

    def preprocessing_fn(inputs):
        return {
            "user": preprocessing.category_ids(inputs["user"], "user"),
            "city": preprocessing.category_ids(inputs["city"], "city"),
            "genres": preprocessing.bag_ids(inputs["genres"], "genres", 3, "|"),
        }

    train = [
        tf_example(user=u, city=c, genres=g)
        for u, c, g in [
            (0, "Paris", "Action|Comedy"), (1, "Lyon", " Drama |Action"), (1, "Paris", "Action"),
            (2, None, "Comedy||"), (None, "Nice", None), (0, "Paris", "Drama| Comedy"),
        ]
    ]  # fmt: skip
    source = tfxio.TFExampleBeamRecord(physical_format="inmem", schema=schema)
    with beam.Pipeline() as p, tft_beam.Context(temp_dir=str(tmp_path / "tmp")):
        raw = p | beam.Create(train) | source.BeamSource()
        transform_fn = (raw, source.TensorAdapterConfig()) | tft_beam.AnalyzeDataset(
            preprocessing_fn
        )
        _ = transform_fn | tft_beam.WriteTransformFn(str(tmp_path / "transform"))
    output = tft.TFTransformOutput(str(tmp_path / "transform"))
    vocab = {
        name: [
            line.rstrip("\n")
            for line in open(output.vocabulary_file_by_name(file), encoding="utf-8")  # noqa: SIM115
        ]
        for name, file in (
            ("user", preprocessing.category_vocab("user")),
            ("city", preprocessing.category_vocab("city")),
            ("genres", preprocessing.bag_vocab("genres")),
        )
    }
    rows = [
        (0, "Paris", "Action|Comedy"), (None, None, None), (7, "Oslo", "Western| Action |"),
        (2, "Lyon", "Comedy|Comedy|Drama|Action"), (1, "", "  |  "),
    ]  # fmt: skip
    parsed = tf.io.parse_example(
        [tf_example(user=u, city=c, genres=g) for u, c, g in rows], feature_spec
    )
    transformed = output.transform_raw_features(parsed)
    users, cities, genres = zip(*rows, strict=True)
    assert np.asarray(transformed["user"]).reshape(-1).tolist() == categories.encode_categories(
        users, vocab["user"]
    )
    assert np.asarray(transformed["city"]).reshape(-1).tolist() == categories.encode_categories(
        cities, vocab["city"]
    )
    assert np.asarray(transformed["genres"]).tolist() == categories.encode_bags(
        genres, vocab["genres"], "|", 3
    )
    user_ids = categories.encode_categories(users, vocab["user"])
    assert user_ids[1] == categories.MISSING_ID == 0 and user_ids[0] != 0  # missing != ID 0
    assert user_ids[2] == categories.oov_id(len(vocab["user"]))  # an ID never seen
    assert categories.encode_bags(["Western| Action |"], vocab["genres"], "|", 3)[0][1:] == [
        vocab["genres"].index("Action") + 1,
        0,
    ]


def test_in_training_a_stated_share_of_ids_reads_as_out_of_vocabulary():
    """components/data/categories.py OOV_SHARE of the category and bag ids, never a missing
    cell or padding, never another column: the out-of-vocabulary row is trained."""
    import tensorflow as tf

    from amp_pipeline.components.data.categories import OOV_SHARE
    from amp_pipeline.components.training.datasets import with_oov_share

    rng = np.random.default_rng(0)
    x = np.zeros((20_000, 5), np.float32)
    x[:, 0] = rng.normal(size=20_000)  # a number
    x[:, 1] = rng.integers(0, 50, 20_000)  # a category (0: missing), oov id 51
    x[:, 2:4] = rng.integers(0, 8, (20_000, 2))  # a bag of 2 (0: padding), oov id 9
    x[:, 4] = rng.integers(1, 30, 20_000)  # token ids of a text: not touched
    ds = tf.data.Dataset.from_tensor_slices((x, np.zeros(20_000))).batch(500)
    out = np.concatenate(
        [b for b, _ in with_oov_share(ds, {1: 51, 2: 9, 3: 9}, 5, seed=3).as_numpy_iterator()]
    )
    changed = out != x
    assert not changed[:, [0, 4]].any() and not changed[x == 0].any()
    assert set(out[:, 1][changed[:, 1]]) == {51.0} and set(out[:, 2:4][changed[:, 2:4]]) == {9.0}
    share = changed[:, 1:4].sum() / (x[:, 1:4] > 0).sum()
    assert abs(share - OOV_SHARE) < 0.003, share


def test_the_report_says_how_many_eval_rows_held_an_unseen_id_and_when_a_vocabulary_was_cut():
    from amp_pipeline.pipeline.report import category_lines

    lines = category_lines(
        {
            "student_id": {"vocabulary": 2972, "capped": False, "eval_unseen_rows": 12,
                           "eval_rows": 14_787},
            "session": {"vocabulary": 100_000, "capped": True, "eval_unseen_rows": 900,
                        "eval_rows": 20_000, "train_oov_share": 0.031},
        }
    )  # fmt: skip
    assert lines[0] == (
        "- Category 'student_id': 2,972 values in its vocabulary; 12 of 14,787 eval rows (0.1%) "
        "hold one the train split did not have, answered from the out-of-vocabulary row"
    )
    assert "more values than the vocabulary keeps" in lines[1] and "3.1% of the train" in lines[1]

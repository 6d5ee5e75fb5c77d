"""Text features: the tokenizer (TensorFlow ops and plain Python, the same rule), how the input
check finds text columns, and the BERT-style encoder's mixed-precision hazards."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from amp_pipeline.components.data import text
from amp_pipeline.components.data.ingest import prepare
from amp_pipeline.components.data.inspection import CsvOptions
from amp_pipeline.core.errors import InputError
from tests.helpers import text_rows, write_csv

# Unicode (accents, sharp s, dotted capital I, final sigma, ligatures, full-width letters),
# empty, whitespace-only, punctuation-only, over-long, every ASCII whitespace, NUL and other
# control characters, non-breaking
# and ideographic spaces, emoji, quotes and brackets.
CORPUS = [
    "Hello, World!",
    "",
    "   ",
    "!!!...???",
    "-- ** // ## ~~",
    "Ünïcödé ÉCOLE straße İstanbul ΣΊΣΥΦΟΣ ΣΑΣ",
    "tab\there\nnew\rline\x0bvertical\x0cfeed",
    "AB\x00CD Ef\x01gh\x1fij\x7fkl \x00\x00 end\x00",
    "non\u00a0breaking\u3000ideographic",
    "emoji 😀 ok👍 done",
    "it's a dog's-life (really) [x] {y} <z> a/b c\\d e_f 3.14 $5 100%",
    "ÀÉÎÕÜ ǅ ǈ ǋ ﬁ ß ΐ ⅣⅫ ⓐ Ａｂｃ",
    " ".join(f"word{i}" for i in range(700)),
    "x" * 3000,
    "the the the THE The",
]


def test_the_python_tokenizer_equals_the_tensorflow_ops_on_a_hard_corpus():
    import tensorflow as tf

    from_tf = [[t.decode() for t in row] for row in text.tf_tokens(tf.constant(CORPUS)).to_list()]
    assert from_tf == [text.tokenize(s) for s in CORPUS]
    assert text.tokenize("Hello, World!") == ["hello", "world"]
    assert text.tokenize("!!!...???") == [] and text.tokenize("") == []
    assert text.tokenize("non\u00a0breaking") == ["non\u00a0breaking"]  # ASCII whitespace only
    assert text.tokenize("AB\x00CD Ef") == ["ab", "cd", "ef"]  # a NUL separates, loses nothing


def test_ids_are_padded_cut_and_0_is_padding_and_unknown_tokens_share_one_id(tmp_path):
    import tensorflow as tf

    vocabulary = ["the", "world", "hello"]
    assert text.encode("Hello, the world!", vocabulary, 6) == [3, 1, 2, 0, 0, 0]
    assert text.encode("hello mars venus", vocabulary, 2) == [3, 4]  # cut; 4 = len + 1
    assert text.encode("", vocabulary, 3) == [0, 0, 0]
    # The TensorFlow side: ids shifted by one, cut and padded the same way.
    ragged = tf.ragged.constant([[2, 0, 1], [], list(range(10))], dtype=tf.int64)
    padded = text.tf_pad_ids(ragged + 1, 4).numpy().tolist()
    assert padded == [[3, 1, 2, 0], [0, 0, 0, 0], [1, 2, 3, 4]]


def test_max_tokens_is_the_95th_percentile_in_multiples_of_8_up_to_512():
    assert text.auto_max_tokens(range(1, 101)) == 96  # p95 = 95 -> 96
    assert text.auto_max_tokens([3] * 50) == 8
    assert text.auto_max_tokens([5000] * 10) == 512
    assert text.auto_max_tokens([]) == 8
    figures = text.length_figures([0, 0, 10, 20, 700], 512)
    assert figures["empty_share"] == 0.4 and figures["truncated_share"] == 0.2
    assert figures["max"] == 700


def test_a_text_column_is_found_with_its_lengths_and_dates_stay_out(tmp_path):
    path = write_csv(tmp_path / "posts.csv", text_rows(600))
    spec = prepare(str(path), "label", tmp_path / "w")
    assert spec.text_features == ("post",)
    assert [n for n, _ in spec.numeric_features] == ["likes"]
    assert spec.string_features == ()
    assert [e["column"] for e in spec.excluded] == ["posted"]  # a date
    figures = spec.text_figures["post"]
    assert 5 <= figures["p50"] <= figures["p95"] <= figures["max"] <= 30
    assert 0 < figures["empty_share"] < 0.1  # the generator empties about 2%
    assert spec.max_tokens % 8 == 0 and spec.max_tokens >= figures["p95"]
    assert spec.vocab_size == text.DEFAULT_VOCAB_SIZE
    assert any("column 'post' is text" in n for n in spec.notices)
    assert any("are empty" in n for n in spec.notices)


def test_text_is_chosen_both_ways_by_flags_and_long_texts_report_the_cut(tmp_path):
    rows = text_rows(300, extra=False)
    for i, row in enumerate(rows):
        row["city"] = ["new york", "los angeles", "san francisco"][i % 3]
        if i % 33 == 0:  # 3% of the posts: beyond the 95th percentile, so cut
            row["post"] = " ".join(["word"] * 200)
    path = write_csv(tmp_path / "posts.csv", rows)
    spec = prepare(str(path), "label", tmp_path / "a")
    assert spec.text_features == ("post",) and spec.string_features == ("city",)
    cut = spec.text_figures["post"]["truncated_share"]
    assert cut == pytest.approx(10 / 300) and spec.max_tokens < 200
    assert any("are cut" in n for n in spec.notices)
    both = CsvOptions(text_columns=("city",), categorical_columns=("post",), max_tokens=16)
    spec = prepare(str(path), "label", tmp_path / "b", csv_options=both)
    # Posts as categories: hundreds of distinct values, so a vocabulary and an embedding.
    assert spec.text_features == ("city",) and spec.categorical_features == ("post",)
    assert spec.max_tokens == 16


def test_bad_text_input_is_one_line_naming_the_column_or_flag(tmp_path):
    rows = [{"post": "", "n": str(i % 7), "label": str(i % 2)} for i in range(200)]
    path = write_csv(tmp_path / "empty.csv", rows)
    spec = prepare(str(path), "label", tmp_path / "w")  # an all-empty text column: excluded
    assert spec.text_features == ()
    assert {"column": "post", "feature": "post", "reason": "empty on every row"} in spec.excluded
    numbers = [
        {"post": str(i) if i % 5 else "many words here", "label": str(i % 2)} for i in range(200)
    ]
    path = write_csv(tmp_path / "numbers.csv", numbers)
    # Mostly numbers: a numeric column with stray text, one line naming it; unless the user
    # says it is text.
    with pytest.raises(InputError, match="column 'post' is numeric but line 2 holds text"):
        prepare(str(path), "label", tmp_path / "w2")
    forced = prepare(
        str(path), "label", tmp_path / "w4", csv_options=CsvOptions(text_columns=("post",))
    )
    assert forced.text_features == ("post",)
    path = write_csv(tmp_path / "posts.csv", text_rows(200))
    with pytest.raises(InputError, match="--text-columns likes: column 'likes' holds int"):
        prepare(
            str(path), "label", tmp_path / "w3", csv_options=CsvOptions(text_columns=("likes",))
        )
    with pytest.raises(InputError, match="--max-tokens 600: must be between 1 and 512"):
        CsvOptions(max_tokens=600)
    with pytest.raises(InputError, match="--vocab-size 0"):
        CsvOptions(vocab_size=0)


@pytest.fixture(scope="module")
def bert():
    import keras

    from amp_pipeline.components.models.builtin import build_model

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = build_model(
            "bert", 2 + 16, 2, text_slices=(("post", 2, 18),), vocab_size=5000, size="tiny"
        )
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return model


def test_token_ids_reach_the_embedding_exactly_under_mixed_bfloat16(bert):
    """bfloat16 holds integers exactly only up to 256: the ids are cut out of `x` and cast to
    int in float32, and the embedding table stays float32."""
    import keras

    ids_layer = bert.get_layer("post_ids")
    assert ids_layer.compute_dtype == "float32"
    x = np.zeros((1, 18), np.float32)
    x[0, 2:6] = [4999, 4001, 257, 1]
    ids = keras.Model(bert.input, ids_layer.output)(x)
    assert np.asarray(ids)[0, :4].tolist() == [4999, 4001, 257, 1]
    embedding = bert.get_layer("post_token_embedding")
    assert embedding.compute_dtype == "bfloat16" and embedding.embeddings.dtype == "float32"
    assert embedding.embeddings.shape == (5000 + 2, 128)  # padding, vocabulary, OOV


def test_layer_norm_and_attention_softmax_run_in_float32(bert):
    import keras

    norms = [layer for layer in bert.layers if "norm" in layer.name]
    assert norms and all(layer.compute_dtype == "float32" for layer in norms)
    norm = norms[0]
    x = keras.ops.cast(np.random.default_rng(0).normal(size=(2, 16, 128)) * 50, "bfloat16")
    out = norm(x)
    assert out.dtype == "float32"
    ref = np.asarray(keras.ops.cast(x, "float32"))
    ref = (ref - ref.mean(-1, keepdims=True)) / np.sqrt(ref.var(-1, keepdims=True) + 1e-12)
    gamma, beta = (np.asarray(w) for w in norm.weights)
    np.testing.assert_allclose(np.asarray(out), ref * gamma + beta, atol=1e-4)


def test_attention_through_call_masks_padded_keys_and_a_text_of_only_padding():
    """The layer as the model calls it (no scores asked for, dropout 0: the path Keras 3.12
    sends to `ops.dot_product_attention`): padded keys change nothing, and a text of only
    padding attends to nothing (the output projection's bias alone)."""
    import keras

    from amp_pipeline.components.models.layers import Float32SoftmaxAttention

    keras.utils.set_random_seed(0)
    layer = Float32SoftmaxAttention(2, 4, dtype="mixed_bfloat16")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 8)).astype(np.float32)
    keys = np.array([[True, True, True, False, False], [False] * 5])[:, None, :]
    out = np.asarray(keras.ops.cast(layer(x, x, attention_mask=keys), "float32"))
    changed = x.copy()
    changed[:, 3:] = rng.normal(size=(2, 2, 8)) * 100  # only the padded positions
    again = np.asarray(keras.ops.cast(layer(x, changed, attention_mask=keys), "float32"))
    # Query rows 0-2 of text 0 see keys 0-2 only: new values at keys 3-4 change nothing.
    np.testing.assert_allclose(again[0, :3], out[0, :3], atol=1e-6)
    bias = np.asarray(keras.ops.cast(layer._output_dense.bias, "float32"))
    np.testing.assert_allclose(out[1], np.broadcast_to(bias, out[1].shape), atol=1e-6)
    # Scores asked for: the masked keys' weights are exactly 0, in float32 before the product.
    _, scores = layer(x, x, attention_mask=keys, return_attention_scores=True)
    scores = np.asarray(keras.ops.cast(scores, "float32"))
    assert (scores[0, :, :, 3:] == 0).all() and (scores[1] == 0).all()
    np.testing.assert_allclose(scores[0, :, :, :3].sum(-1), 1.0, atol=1e-2)


def test_padding_is_masked_so_padding_length_changes_nothing():
    """The same text padded to 16 or to 32 ids gives the same probabilities."""
    import keras

    from amp_pipeline.components.models.builtin import build_model

    def model(length):
        keras.utils.set_random_seed(3)
        return build_model(
            "bert", length, 2, text_slices=(("t", 0, length),), vocab_size=100, size="tiny"
        )

    short, long = model(16), model(32)
    # Position embeddings differ in length; copy the shared first 16 rows and the rest as is.
    weights = []
    for s, w in zip(short.get_weights(), long.get_weights(), strict=True):
        if s.shape != w.shape:
            w = w.copy()
            w[: s.shape[0]] = s
            weights.append(w)
        else:
            weights.append(s)
    long.set_weights(weights)
    ids = np.zeros((3, 32), np.float32)
    ids[0, :5] = [5, 9, 2, 77, 1]
    ids[1, :16] = np.arange(1, 17)
    # row 2: an empty text (all padding) still gives probabilities
    a = np.asarray(short(ids[:, :16]))
    b = np.asarray(long(ids))
    np.testing.assert_allclose(a, b, atol=1e-5)
    assert np.isfinite(b).all()


def test_the_text_model_module_example_gets_the_text_facts_and_trains_under_bfloat16(tmp_path):
    """examples/text_cnn.py as the pipeline builds a module: its spec from a real DataSpec."""
    import keras

    from amp_pipeline.components.data.preprocessing import feature_width, model_spec
    from amp_pipeline.components.models import user_module

    path = write_csv(tmp_path / "posts.csv", text_rows(300))
    data = prepare(str(path), "label", tmp_path / "w", csv_options=CsvOptions(vocab_size=500))
    spec = model_spec(data, feature_width(data))
    assert spec.text_features == ("post",) and spec.vocab_size == 500
    assert spec.max_tokens == data.max_tokens
    (text_slice,) = [s for s in spec.feature_slices if s[0] == "post"]
    assert text_slice[2] - text_slice[1] == spec.max_tokens == spec.input_width - 1  # + likes
    ref = user_module.ModuleRef(str(Path(__file__).parent.parent / "examples" / "text_cnn.py"))
    module = user_module.load(ref)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = user_module.build(ref, module, spec)
        rng = np.random.default_rng(0)
        x = np.zeros((64, spec.input_width), np.float32)
        x[:, text_slice[1] :] = rng.integers(0, 502, (64, spec.max_tokens))
        model.compile("adam", "sparse_categorical_crossentropy")
        history = model.fit(x, rng.integers(0, 2, 64), epochs=2, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert np.isfinite(history.history["loss"]).all()
    ids = keras.Model(model.input, model.get_layer("post_ids").output)(x)
    np.testing.assert_array_equal(np.asarray(ids), x[:, text_slice[1] :].astype(int))


def test_eval_texts_missing_from_a_domain_of_train_texts_are_not_drift():
    """On a small text CSV SchemaGen makes the train split's texts a string domain; the eval
    split's texts are then all 'unexpected'. Only that anomaly, on a vocabulary feature, is
    dropped (and a boolean domain SchemaGen guessed for an integer)."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    from amp_pipeline.components.data.anomaly_check import tolerate

    result = anomalies_pb2.Anomalies()
    unexpected = anomalies_pb2.AnomalyInfo.ENUM_TYPE_UNEXPECTED_STRING_VALUES
    for feature in ("post", "city"):
        result.anomaly_info[feature].reason.add(type=unexpected)
    result.anomaly_info["likes"].reason.add(type=anomalies_pb2.AnomalyInfo.BOOL_TYPE_BIG_INT)
    result.anomaly_info["post2"].reason.add(type=unexpected)
    result.anomaly_info["post2"].reason.add(type=anomalies_pb2.AnomalyInfo.SCHEMA_MISSING_COLUMN)
    tolerated = tolerate(result, vocabulary={"post", "post2"}, optional=set())
    assert {t["feature"] for t in tolerated} == {"post", "likes"}
    assert set(result.anomaly_info) == {"city", "post2"}  # not a vocabulary feature; a break


def test_the_encoder_passes_the_readiness_check_under_mixed_bfloat16():
    """The pipeline's own readiness check finds nothing in the encoder: token ids (int32) and
    the padding mask (bool) are not casts that ignore the policy, the float32 layers are float32
    by design, and its numbers under bfloat16 stay within the check's bound."""
    import keras

    from amp_pipeline.components.amp import readiness
    from amp_pipeline.components.models.builtin import build_model

    def build(policy):
        keras.mixed_precision.set_global_policy(policy)
        keras.utils.set_random_seed(0)
        try:
            return build_model(
                "bert", 18, 2, text_slices=(("post", 2, 18),), vocab_size=5000, size="tiny"
            )
        finally:
            keras.mixed_precision.set_global_policy("float32")

    x = np.zeros((8, 18), np.float32)
    x[:, 2:10] = np.random.default_rng(0).integers(1, 5001, (8, 8))
    report = readiness.readiness_report(
        build,
        None,
        x,
        np.arange(8) % 2,
        "mixed_bfloat16",
        xla=False,
        gpu_recipe=False,
        batch_size=8,
        num_classes=2,
        loss_fn=keras.losses.SparseCategoricalCrossentropy(),
    )
    assert report["ok"], report["findings"]


@pytest.mark.e2e
def test_the_loss_scale_history_stays_healthy_under_mixed_float16():
    """The GPU recipe on the encoder: mixed_float16 with Keras' LossScaleOptimizer, watched by
    the pipeline's monitor, on padded token ids. float16 on this CPU is emulated and slow, so a
    tiny encoder for a few steps: the scale must not collapse and the loss must stay finite."""
    import keras

    from amp_pipeline.components.amp.loss_scale import LossScaleMonitor
    from amp_pipeline.components.models.builtin import build_model

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(0)
        model = build_model("bert", 16, 2, text_slices=(("t", 0, 16),), vocab_size=200, size="tiny")
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-3))
        model.compile(optimizer, "sparse_categorical_crossentropy")
        rng = np.random.default_rng(0)
        x = np.zeros((64, 16), np.float32)
        lengths = rng.integers(0, 17, 64)  # empty texts and full ones among them
        for i, n in enumerate(lengths):
            x[i, :n] = rng.integers(1, 202, n)
        y = (x[:, 0] % 2).astype(int)
        monitor = LossScaleMonitor(patience=5)
        model.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[monitor])
    finally:
        keras.mixed_precision.set_global_policy("float32")
    summary = monitor.summary()
    assert len(summary["history"]) == 12 and not summary["collapsed"]
    assert summary["min"] >= 2.0**10  # a few halvings at most from the initial 2**15
    assert np.isfinite(monitor.losses).all()


def _text_spec(**kw):
    from amp_pipeline.components.models.user_module import ModelSpec

    return ModelSpec(
        input_width=6, feature_names=("likes", "age", "post"), num_classes=2,
        class_names=("neg", "pos"),
        feature_slices=(("likes", 0, 1), ("age", 1, 2), ("post", 2, 6)),
        text_features=("post",), vocab_size=5000, max_tokens=4, **kw,
    )  # fmt: skip


def test_mlp_reads_text_as_the_mean_of_its_token_embeddings_ids_exact_under_bfloat16():
    """fastText's text model: token ids through an embedding table and a mean over the
    non-padding tokens; no Dense layer sees an id, and bfloat16 rounds none (4999 stays 4999,
    not 4992; 257 stays 257, not 256)."""
    import keras

    from amp_pipeline.components.models.builtin import build_from_spec

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = build_from_spec("mlp", _text_spec())
    finally:
        keras.mixed_precision.set_global_policy("float32")
    table = model.get_layer("post_embedding")
    assert table.input_dim == 5002 and table.embeddings.dtype == "float32"
    ids = keras.Model(model.input, model.get_layer("post_ids").output)
    x = np.array([[0.5, -1.0, 4999, 257, 0, 0]], np.float32)
    assert np.asarray(ids(x)).tolist() == [[4999, 257, 0, 0]]
    pooled = keras.Model(model.input, model.get_layer("post_mean").output)
    rows = np.asarray(table.embeddings)[[4999, 257]]
    np.testing.assert_allclose(np.asarray(pooled(x))[0], rows.mean(axis=0), atol=1e-2)
    # The hidden layers read the two numbers only; the text's mean goes to the output layer
    # beside them (fastText's linear text model, wide and deep).
    assert model.get_layer("dense_columns").output.shape[-1] == 2
    joined = model.get_layer("wide_and_deep")
    assert [t.name for t in joined.input] == [
        model.get_layer("hidden_1").output.name,
        model.get_layer("post_mean").output.name,
    ]


def test_word_pairs_are_hashed_after_the_words_and_padding_pairs_are_padding():
    """HashedBigrams against the formula in plain Python: offset + (a * ids + b) mod buckets for
    neighbours a, b; 0 where either is padding. int32 throughout: ids the largest vocabulary
    can reach do not overflow, and a larger vocabulary is refused."""
    from amp_pipeline.components.models.layers import HashedBigrams

    ids, buckets = 46_000, 2**17
    layer = HashedBigrams(ids, buckets, ids)
    tokens = np.array([[5, 45_999, 45_998, 7, 0, 0], [0, 3, 4, 0, 0, 0]], np.int32)
    pairs = [zip(row[:-1], row[1:], strict=True) for row in tokens.tolist()]
    expected = [[ids + (a * ids + b) % buckets if a and b else 0 for a, b in p] for p in pairs]
    assert np.asarray(layer(tokens)).tolist() == expected
    assert expected[1] == [0, ids + (3 * ids + 4) % buckets, 0, 0, 0]
    with pytest.raises(ValueError, match="at most 46,000 token ids"):
        HashedBigrams(46_341, buckets, 46_341)


def test_the_ngrams_model_bags_words_and_pairs_in_one_float32_table_under_bfloat16():
    import keras

    from amp_pipeline.components.models.builtin import NGRAM_BUCKETS, build_from_spec

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = build_from_spec("ngrams", _text_spec())
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert model.name == "ngrams"
    table = model.get_layer("post_embedding")
    assert table.input_dim == 5002 + NGRAM_BUCKETS and table.embeddings.dtype == "float32"
    x = np.array([[0.5, -1.0, 4999, 257, 0, 0]], np.float32)
    bag = keras.Model(model.input, model.get_layer("post_ngrams").output)
    pair = 5002 + (4999 * 5002 + 257) % NGRAM_BUCKETS
    assert np.asarray(bag(x)).tolist() == [[4999, 257, 0, 0, pair, 0, 0]]
    pooled = keras.Model(model.input, model.get_layer("post_mean").output)
    rows = np.asarray(table.embeddings)[[4999, 257, pair]]
    np.testing.assert_allclose(np.asarray(pooled(x))[0], rows.mean(axis=0), atol=1e-2)
    with pytest.raises(ValueError, match="'ngrams' is a bag of a text's words"):
        build_from_spec("ngrams", dataclasses.replace(_text_spec(), text_features=()))


def test_the_ngrams_model_trains_ten_passes_by_default_and_says_so():
    from amp_pipeline.core.data_spec import DataSpec
    from amp_pipeline.pipeline.config import RunConfig, steps_text, with_data_steps

    data = DataSpec(
        source="t.csv", format="csv", input_base=".", input_pattern="t.csv", label="label",
        label_kind="string", classes=("neg", "pos"), numeric_features=(), rows=4_000,
        text_features=("post",),
    )  # fmt: skip
    auto = with_data_steps(RunConfig(auto_train_steps=True), data)
    assert auto.train.train_steps == 500  # ceil(10 * 3,200 / 64)
    assert "10 passes over about 3,200 train rows at batch 64" in steps_text(auto, data)
    mlp = with_data_steps(RunConfig(auto_train_steps=True, model="mlp"), data)
    assert mlp.train.train_steps == 300  # 2 passes take 100: the floor


@pytest.mark.parametrize("name", ["transformer", "cnn"])
def test_models_that_read_numbers_refuse_id_features_naming_the_model(name):
    from amp_pipeline.components.models.builtin import build_from_spec

    with pytest.raises(ValueError, match=f"'{name}' reads every column as a number.*post"):
        build_from_spec(name, _text_spec())


def test_auto_picks_the_text_model_by_the_labelled_rows_and_says_why():
    import dataclasses

    from amp_pipeline.core.data_spec import DataSpec
    from amp_pipeline.pipeline.config import (
        TEXT_ENCODER_MIN_ROWS,
        RunConfig,
        model_for,
        model_reason,
    )

    data = DataSpec(
        source="t.csv", format="csv", input_base=".", input_pattern="t.csv", label="label",
        label_kind="string", classes=("neg", "pos"), numeric_features=(), rows=4_000,
        text_features=("post",),
    )  # fmt: skip
    auto = RunConfig()
    assert model_for(auto, data) == "ngrams"
    assert "a bag of words and word pairs" in model_reason(auto, data)
    big = dataclasses.replace(data, rows=TEXT_ENCODER_MIN_ROWS + 100, unlabelled_rows=50)
    assert model_for(auto, big) == "bert" and "BERT-style encoder" in model_reason(auto, big)
    # Unlabelled rows do not count: 10,050 rows of which 100 have no label is under 10,000.
    short = dataclasses.replace(big, unlabelled_rows=100 + 50 + 1)
    assert model_for(auto, short) == "ngrams"
    assert model_reason(RunConfig(model="bert"), data) is None
    assert model_for(RunConfig(model="bert"), data) == "bert"


def _write_split(folder: Path, rows: list[dict[str, str]]) -> None:
    import tensorflow as tf

    from tests.helpers import tf_example

    folder.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(folder / "data.gz"), "GZIP") as w:
        for r in rows:
            w.write(tf_example(**r))


def test_the_text_baseline_scores_tfidf_on_the_runs_own_raw_split(tmp_path):
    """TF-IDF + logistic regression on ExampleGen's raw train split, scored on its eval split;
    an example without a label is not counted, a missing text is an empty one."""
    from amp_pipeline.components.gate.text_baseline import baseline_line, text_baseline

    rows = text_rows(400, seed=4, extra=False)
    _write_split(tmp_path / "Split-train", rows[:320])
    _write_split(tmp_path / "Split-eval", [*rows[320:], {"post": "good", "label": None}])
    base = text_baseline(tmp_path, ["post"], "label")
    assert base["train_examples"] == 320 and base["eval_examples"] == 80 and not base["cut"]
    assert base["accuracy"] > 0.8  # the sentiment words decide the label
    summary = {"text_baseline": base, "shipped_precision": "amp", "amp": {"accuracy": 0.9}}
    line = baseline_line(summary)
    assert line.startswith("TF-IDF of words and word pairs + logistic regression (scikit-learn)")
    assert f"accuracy {base['accuracy']:.4f} on the same 80 eval examples" in line
    assert f"{0.9 - base['accuracy']:+.4f} for the AMP twin (0.9000)" in line
    assert baseline_line({"text_baseline": {"error": "ValueError: x"}}).endswith(
        "not computed (ValueError: x)"
    )

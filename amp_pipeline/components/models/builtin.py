"""Keras 3 models. Each takes the Transform output `x` (a flat float vector) and returns class
probabilities, or for a regression label (`num_classes` 0) one linear value, the standardised
label. The last Dense layer (and the softmax) run in float32 under every policy.

`bert` is a BERT-style encoder over the text features' token ids in `x` (written here rather
than taken from keras-hub: docs/ARCHITECTURE.md says why), with the mixed-precision hazards
handled where they are: token ids cut out of `x` and cast to integers in float32, embedding
tables float32, LayerNorm and the attention softmax computed in float32, padding masked.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import keras

from amp_pipeline.components.models.layers import (
    Columns,
    DotInteraction,
    Float32LayerNorm,
    Float32SoftmaxAttention,
    HashedBigrams,
    KeyPaddingMask,
    MaskedMeanPool,
    PositionEmbedding,
    TokenIds,
)
from amp_pipeline.core.names import BERT_SIZE_NAMES, PREDICTIONS, PROBABILITIES

MODEL_NAMES = ("bert", "cnn", "dlrm", "mlp", "ngrams", "resnet50", "transformer")
# The `ngrams` model's hashed word-pair ids, after the words' (HashedBigrams): 2**17 rows of 64
# float32 = 32 MiB of table. benchmarks/RESULTS.md ("Text on small data") has the measurement.
NGRAM_BUCKETS = 2**17


# (layers, hidden width, attention heads); base is BERT-base's shape.
BERT_SIZES = dict(
    zip(BERT_SIZE_NAMES, ((2, 128, 2), (4, 256, 4), (4, 512, 8), (12, 768, 12)), strict=True)
)


def _head(x, num_classes: int):
    """Class probabilities, or for regression (`num_classes` 0) one float32 linear output."""
    if num_classes == 0:
        # float32: a bfloat16 output holds 3 significant digits of the standardised label.
        return keras.layers.Dense(1, dtype="float32", name=PREDICTIONS)(x)
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


def embedding_dim(size: int) -> int:
    """An embedding's width for a vocabulary of `size` ids: fastai's rule of thumb,
    1.6 * size^0.56, at least 4 and at most 64 (671 users: 61; 20 genres: 9)."""
    return max(4, min(64, round(1.6 * size**0.56)))


# A warm-started twin keeps the production model's widths (components/training/warm_start.py):
# a span with a few more IDs would otherwise change a width (550 ids: 55, 578: 56) and no row
# would fit. {feature: width}, set around the build.
_WIDTHS: contextvars.ContextVar[tuple[tuple[str, int], ...]] = contextvars.ContextVar(
    "widths", default=()
)


@contextlib.contextmanager
def embedding_widths(widths: dict[str, int]) -> Iterator[None]:
    """Builds inside the block give these features' embeddings these widths."""
    token = _WIDTHS.set(tuple(widths.items()))
    try:
        yield
    finally:
        _WIDTHS.reset(token)


def feature_embedding_dim(name: str, size: int) -> int:
    """The width of feature `name`'s embedding: embedding_widths' where set, else
    embedding_dim's."""
    return dict(_WIDTHS.get()).get(name) or embedding_dim(size)


def tabular(inputs, stop: int, categorical: tuple = (), bags: tuple = ()):
    """Columns [0, stop) of `x`: the numeric and one-hot ones as they are, each categorical
    feature's id (name, start, stop, size) through its own embedding, each multi-valued
    feature's ids (name, start, stop, size) through its own embedding and their mean over the
    present values (0 pads). The ids are cut out and cast to integers in float32 (TokenIds);
    the tables are float32 variables under every policy and the lookups give the compute dtype
    (Keras' Embedding under a mixed policy)."""
    embedded = sorted(
        [(*c, False) for c in categorical] + [(*b, True) for b in bags], key=lambda c: c[1]
    )
    if not embedded:
        return Columns(0, stop, name="dense_columns")(inputs) if stop < inputs.shape[1] else inputs
    parts, at = [], 0
    for name, start, end, size, bag in embedded:
        if start > at:
            parts.append(Columns(at, start, name=f"columns_{at}_{start}")(inputs))
        ids = TokenIds(start, end, name=f"{name}_id{'s' if bag else ''}")(inputs)
        width = feature_embedding_dim(name, size)
        vectors = keras.layers.Embedding(size, width, name=f"{name}_embedding")(ids)
        if bag:
            parts.append(MaskedMeanPool(name=f"{name}_mean")(vectors, ids))
        else:
            parts.append(keras.layers.Flatten(name=f"{name}_vector")(vectors))
        at = end
    if stop > at:
        parts.append(Columns(at, stop, name=f"columns_{at}_{stop}")(inputs))
    return parts[0] if len(parts) == 1 else keras.layers.Concatenate(name="tabular")(parts)


def build_mlp(
    input_dim: int,
    num_classes: int,
    width: int = 128,
    categorical: tuple = (),
    bags: tuple = (),
    text_slices: tuple = (),
    vocab_size: int = 0,
    bigram_buckets: int = 0,
    model_name: str = "mlp",
) -> keras.Model:
    """A two-hidden-layer MLP for tabular data; categorical and multi-valued features (name,
    start, stop, size) are embedded first. `ngrams` is this model with `bigram_buckets`: a
    text's word pairs join its words in the bag (HashedBigrams).

    The output layer also reads, beside the hidden layers' output (a wide and deep model):
    - a text feature (name, start, stop) as fastText's text model (Joulin et al. 2016): the
      mean of its tokens' 64-wide embeddings (`vocab_size` + 2 ids: padding, the vocabulary,
      out-of-vocabulary). Through the hidden layers the same text lost 1-3 points of accuracy
      on 1,000-8,614 tweets (benchmarks/RESULTS.md, "Text models by size");
    - a category's bias: one learned number per ID value (zero at the start), the per-user and
      per-item offsets of recommender practice. With them the MLP matched the bias model on
      InstEval and MovieLens ratings (benchmarks/RESULTS.md, "Ratings").
    """
    inputs = keras.Input((input_dim,), name="x")
    wide = []
    for name, start, stop in text_slices:
        ids = TokenIds(start, stop, name=f"{name}_ids")(inputs)
        rows = vocab_size + 2
        if bigram_buckets:  # the word pairs' ids follow the words' in one table
            pairs = HashedBigrams(rows, bigram_buckets, rows, name=f"{name}_bigrams")(ids)
            ids = keras.layers.Concatenate(name=f"{name}_ngrams", dtype="int32")([ids, pairs])
            rows += bigram_buckets
        vectors = keras.layers.Embedding(rows, 64, name=f"{name}_embedding")(ids)
        wide.append(MaskedMeanPool(name=f"{name}_mean")(vectors, ids))
    for name, start, stop, size in categorical:
        ids = TokenIds(start, stop, name=f"{name}_bias_id")(inputs)
        bias = keras.layers.Embedding(
            size, 1, embeddings_initializer="zeros", dtype="float32", name=f"{name}_bias"
        )(ids)
        wide.append(keras.layers.Flatten(name=f"{name}_bias_value")(bias))
    first_text = min((start for _, start, _ in text_slices), default=input_dim)
    parts = list(wide)
    if first_text > 0:  # the other columns come first in x (text last)
        x = tabular(inputs, first_text, categorical, bags)
        x = keras.layers.Dense(width, activation="relu", name="hidden_0")(x)
        x = keras.layers.Dense(width, activation="relu", name="hidden_1")(x)
        parts.insert(0, x)
    x = (
        parts[0]
        if len(parts) == 1
        else keras.layers.Concatenate(dtype="float32", name="wide_and_deep")(parts)
    )
    return keras.Model(inputs, _head(x, num_classes), name=model_name)


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


def bert_encoder(ids, vocab_size: int, size: str, prefix: str):
    """Token and position embeddings, `layers` transformer blocks, masked mean pooling and a
    tanh pooler: [batch, max_tokens] int ids -> [batch, hidden]."""
    depth, width, heads = BERT_SIZES[size]
    tokens = keras.layers.Embedding(vocab_size + 2, width, name=f"{prefix}_token_embedding")(ids)
    x = PositionEmbedding(name=f"{prefix}_position_embedding")(tokens)
    x = Float32LayerNorm(epsilon=1e-12, name=f"{prefix}_embedding_norm")(x)
    keys = KeyPaddingMask(name=f"{prefix}_padding_mask")(ids)
    for i in range(depth):
        attention = Float32SoftmaxAttention(heads, width // heads, name=f"{prefix}_attention_{i}")(
            x, x, attention_mask=keys
        )
        x = Float32LayerNorm(epsilon=1e-12, name=f"{prefix}_attention_norm_{i}")(x + attention)
        ff = keras.layers.Dense(4 * width, activation="gelu", name=f"{prefix}_ffn_in_{i}")(x)
        ff = keras.layers.Dense(width, name=f"{prefix}_ffn_out_{i}")(ff)
        x = Float32LayerNorm(epsilon=1e-12, name=f"{prefix}_ffn_norm_{i}")(x + ff)
    pooled = MaskedMeanPool(name=f"{prefix}_pool")(x, ids)
    return keras.layers.Dense(width, activation="tanh", name=f"{prefix}_pooler")(pooled)


def build_bert(
    input_dim: int,
    num_classes: int,
    text_slices: tuple[tuple[str, int, int], ...],
    vocab_size: int,
    size: str = "tiny",
    categorical: tuple = (),
    bags: tuple = (),
) -> keras.Model:
    """A BERT-style encoder per text feature; the other columns of `x` (tabular features) are
    concatenated after pooling."""
    if size not in BERT_SIZES:
        raise ValueError(
            f"Invalid value for argument size: expected one of {', '.join(BERT_SIZES)}. "
            f"Received: size={size!r}"
        )
    if not text_slices:
        raise ValueError(
            "Invalid value for argument model: 'bert' needs a text feature (a string column of "
            "multi-word values, or --text-columns). Received: model='bert'"
        )
    inputs = keras.Input((input_dim,), name="x")
    parts = []
    for name, start, stop in text_slices:
        ids = TokenIds(start, stop, name=f"{name}_ids")(inputs)
        parts.append(bert_encoder(ids, vocab_size, size, prefix=name))
    text_cols = {i for _, start, stop in text_slices for i in range(start, stop)}
    other = [i for i in range(input_dim) if i not in text_cols]
    if other:
        # The tabular features are the columns before the first text slice (text comes last).
        first = min(start for _, start, _ in text_slices)
        if other != list(range(first)):
            raise ValueError(f"text features must come last in x; tabular columns {other[:5]}")
        parts.append(tabular(inputs, first, categorical, bags))
    x = parts[0] if len(parts) == 1 else keras.layers.Concatenate(name="pooled_and_tabular")(parts)
    return keras.Model(inputs, _head(x, num_classes), name="bert")


def categorical_slices(spec) -> tuple[tuple[str, int, int, int], ...]:
    """(name, start, stop, number of ids) of each categorical feature in `x`."""
    from amp_pipeline.core.data_spec import CATEGORY_IDS_BEYOND_VOCABULARY, CATEGORY_TOP_K

    where = {name: (start, stop) for name, start, stop in spec.feature_slices}
    sizes = spec.categorical_sizes or (CATEGORY_TOP_K + CATEGORY_IDS_BEYOND_VOCABULARY,) * len(
        spec.categorical_features
    )
    return tuple(
        (name, *where[name], size)
        for name, size in zip(spec.categorical_features, sizes, strict=True)
    )


def build_dlrm(
    input_dim: int,
    num_classes: int,
    categorical: tuple = (),
    dim: int = 64,
    bottom: tuple[int, ...] = (256, 128),
    top: tuple[int, ...] = (512, 256),
    bags: tuple = (),
) -> keras.Model:
    """A DLRM-style recommender (Naumov et al. 2019, NVIDIA's recipe): the dense columns through
    a bottom MLP to `dim`, each categorical feature (name, start, stop, size) through its own
    `dim`-wide embedding (float32 tables), the pairwise dot products of all those vectors, and
    a top MLP over [bottom output, dots]."""
    if bags:
        raise ValueError(
            "Invalid value for argument model: 'dlrm' takes one id per category; this data has "
            f"multi-valued columns ({', '.join(b[0] for b in bags)}): use 'mlp'"
        )
    if not categorical:
        raise ValueError(
            "Invalid value for argument model: 'dlrm' needs categorical features (IDs or "
            "many-valued strings, or --categorical-columns). Received: model='dlrm'"
        )
    inputs = keras.Input((input_dim,), name="x")
    ids_at = {start for _, start, _, _ in categorical}
    dense_cols = [i for i in range(input_dim) if i not in ids_at]
    if dense_cols != list(range(len(dense_cols))):
        raise ValueError("dlrm: the category ids must come after the dense columns in x")
    x = Columns(0, len(dense_cols), name="dense_columns")(inputs) if dense_cols else None
    vectors = []
    if x is not None:
        for i, units in enumerate((*bottom, dim)):
            x = keras.layers.Dense(units, activation="relu", name=f"bottom_{i}")(x)
        vectors.append(keras.layers.Reshape((1, dim), name="bottom_vector")(x))
    for name, start, stop, size in categorical:
        ids = TokenIds(start, stop, name=f"{name}_id")(inputs)
        vectors.append(keras.layers.Embedding(size, dim, name=f"{name}_embedding")(ids))
    stacked = keras.layers.Concatenate(axis=1, name="vectors")(vectors)
    dots = DotInteraction(name="interaction")(stacked)
    h = keras.layers.Concatenate(name="top_input")([x, dots]) if x is not None else dots
    for i, units in enumerate(top):
        h = keras.layers.Dense(units, activation="relu", name=f"top_{i}")(h)
    return keras.Model(inputs, _head(h, num_classes), name="dlrm")


def bag_slices(spec) -> tuple[tuple[str, int, int, int], ...]:
    """(name, start, stop, number of ids) of each multi-valued feature in `x`."""
    from amp_pipeline.core.data_spec import CATEGORY_TOP_K

    where = {name: (start, stop) for name, start, stop in spec.feature_slices}
    sizes = spec.bag_sizes or (CATEGORY_TOP_K + 2,) * len(spec.bag_features)
    return tuple(
        (name, *where[name], size) for name, size in zip(spec.bag_features, sizes, strict=True)
    )


# Built-in models that read every column of `x` as a number: ids (categories, bags, text tokens)
# would enter their first Dense or convolution as magnitudes, and bfloat16 rounds them above 256.
NUMBERS_ONLY = ("cnn", "resnet50", "transformer")


def id_features(spec) -> list[str]:
    """The features whose columns of `x` are ids: categories, multi-valued columns, text (of a
    ModelSpec, or of a DataSpec, whose bag features are (name, values kept) pairs)."""
    bags = [b if isinstance(b, str) else b[0] for b in spec.bag_features]
    return [*spec.categorical_features, *bags, *spec.text_features]


def build_from_spec(name: str, spec, **options) -> keras.Model:
    """Builds built-in `name` for a ModelSpec (components/models/user_module.py): bert and mlp
    read their text features' slices and vocabulary size from it. A model of NUMBERS_ONLY is
    refused for data with id features."""
    ids = id_features(spec)
    if name in NUMBERS_ONLY and ids:
        raise ValueError(
            f"Invalid value for argument model: {name!r} reads every column as a number, and "
            f"{', '.join(ids)} hold ids (categories, values or tokens); use 'mlp' (ids through "
            f"embeddings), 'bert' for text or 'dlrm' for IDs. Received: model={name!r}"
        )
    if name in ("mlp", "ngrams", "bert", "dlrm"):
        if spec.categorical_features:
            options = {"categorical": categorical_slices(spec), **options}
        if spec.bag_features:
            options = {"bags": bag_slices(spec), **options}
    if name in ("bert", "mlp", "ngrams") and spec.text_features:
        text = set(spec.text_features)
        slices = tuple(s for s in spec.feature_slices if s[0] in text)
        options = {"text_slices": slices, "vocab_size": spec.vocab_size, **options}
    return build_model(name, spec.input_width, spec.num_classes, spec.image_shape, **options)


def build_model(
    name: str,
    input_dim: int,
    num_classes: int,
    image_shape: tuple[int, int, int] | None = None,
    **options,
) -> keras.Model:
    """Builds `name` under the current global dtype policy.

    `options`: `resolution` for resnet50; `seq_len`, `depth`, `width`, `heads` for transformer;
    `text_slices`, `vocab_size` for bert (and `size`), mlp and ngrams (and `bigram_buckets`);
    `categorical` for mlp, ngrams, bert and dlrm (and `dim` for dlrm).
    """
    if name in ("cnn", "resnet50") and image_shape is None:
        raise ValueError(
            f"Invalid value for argument model: {name!r} needs image input (pixel columns, an "
            "`image` feature or an image folder); use 'mlp' for tabular data. "
            f"Received: model={name!r}"
        )
    if name == "resnet50" and image_shape is not None:
        return build_resnet50(input_dim, image_shape, num_classes, **options)
    if name == "bert":
        return build_bert(input_dim, num_classes, **options)
    if name == "transformer":
        return build_transformer(input_dim, num_classes, **options)
    if name == "cnn" and image_shape is not None:
        return build_cnn(input_dim, image_shape, num_classes)
    if name == "mlp":
        return build_mlp(input_dim, num_classes, **options)
    if name == "ngrams":
        if not options.get("text_slices"):
            raise ValueError(
                "Invalid value for argument model: 'ngrams' is a bag of a text's words and word "
                "pairs and needs a text feature (a string column of multi-word values, or "
                "--text-columns); use 'mlp' for tabular data. Received: model='ngrams'"
            )
        options = {"bigram_buckets": NGRAM_BUCKETS, **options}
        return build_mlp(input_dim, num_classes, model_name="ngrams", **options)
    if name == "dlrm":
        return build_dlrm(input_dim, num_classes, **options)
    raise ValueError(
        f"Invalid value for argument model: expected one of {', '.join(MODEL_NAMES)}. "
        f"Received: model={name!r}"
    )

"""Transform's preprocessing_fn: every input becomes one dense float vector `x` and a class id.

- Images (pixel columns or an `image` vector) are divided by their pixel scale.
- Other numeric features are standardised (z-score); missing values take the mean.
- String features go through a vocabulary (top 16 values plus one out-of-vocabulary bucket)
  and are one-hot encoded.
- Categorical features with many values (strings with more than 16, integer IDs) go through a
  vocabulary of their 100,000 most frequent values plus one id for all others
  (`tft.compute_and_apply_vocabulary`, a run artifact); each one's id comes after the one-hot
  strings in `x`, as a float32 value, and the model embeds it.
- Multi-valued features (`Animation|Children`) are split at the separator; each value goes
  through a vocabulary of the 100,000 most frequent values (ids from 1, one id for any other)
  and each row keeps up to its bag length of ids, 0 padding, after the categories in `x`; the
  model averages the values' embeddings.
- Text features are tokenised (components/data/text.py), looked up in a vocabulary of their
  most frequent tokens (`tft.compute_and_apply_vocabulary`, a run artifact) and padded or cut to
  `max_tokens` ids, 0 being padding. They come last in `x`, as float32 values (token ids are
  exact in float32 below 2**24); the built-in BERT encoder casts them back to integers before
  any mixed-precision layer sees them.
- The label becomes its class id, in the order of DataSpec.classes; a regression label is
  standardised, `(y - mean) / std` with its mean and standard deviation over the train split
  (Transform's analyzers), and the serving signatures answer `z * std + mean` (`label_scale`
  reads the two back from the Transform graph).

The Trainer, the exported serving signature and the Evaluator all use this one function through
the Transform graph, so training and serving cannot skew.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft

from amp_pipeline.components.data import text
from amp_pipeline.components.models.user_module import ModelSpec
from amp_pipeline.core.data_spec import (
    CATEGORY_IDS_BEYOND_VOCABULARY,
    CATEGORY_OOV_BUCKETS,
    CATEGORY_TOP_K,
    DataSpec,
)
from amp_pipeline.core.names import FEATURES_KEY, LABEL_KEY

VOCAB_TOP_K = 16


def _dense(t, default, length: int = 1) -> tf.Tensor:
    """A [batch, length] dense tensor from a dense, sparse or ragged input."""
    if isinstance(t, tf.SparseTensor):
        t = tf.sparse.to_dense(
            tf.SparseTensor(t.indices, t.values, [t.dense_shape[0], length]), default
        )
    elif isinstance(t, tf.RaggedTensor):
        t = t.to_tensor(default, shape=[None, length])
    return tf.reshape(t, [-1, length])


def _present_mask(t) -> tf.Tensor:
    """[batch, 1] bool: whether a scalar feature has a value in each example."""
    if isinstance(t, tf.SparseTensor):
        ones = tf.SparseTensor(t.indices, tf.ones_like(t.values, tf.int32), t.dense_shape)
        return tf.reshape(tf.sparse.reduce_sum(ones, axis=1, output_is_sparse=False) > 0, [-1, 1])
    if isinstance(t, tf.RaggedTensor):
        return tf.reshape(t.row_lengths() > 0, [-1, 1])
    return tf.ones_like(tf.reshape(t, [-1, 1])[:, :1], tf.bool)


def label_to_id(label, spec: DataSpec) -> tf.Tensor:
    """Maps raw labels to class ids in DataSpec.classes order (-1 for an unknown class)."""
    label = _dense(label, "" if spec.label_kind == "string" else 0)
    text = label if label.dtype == tf.string else tf.strings.as_string(label)
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(spec.classes), tf.range(spec.num_classes, dtype=tf.int64)
        ),
        default_value=-1,
    )
    return tf.reshape(table.lookup(text), [-1])


def standardized_label(label, spec: DataSpec | None = None) -> tf.Tensor:
    """[batch] float32 z-scores of a regression label, by its mean and standard deviation over
    the train split (Transform's analyzers, which read train only: the eval labels never move
    them). `label_scale` reads the two numbers back out of the Transform graph, for the
    serving signatures and the mean baseline."""
    y = tf.reshape(tf.cast(_dense(label, 0), tf.float32), [-1])
    mean = tft.mean(y)
    return (y - mean) * tf.math.rsqrt(tf.maximum(tft.var(y), 1e-12))


def label_scale(transform_output: str, spec: DataSpec) -> tuple[float, float]:
    """(mean, standard deviation) of a regression label over the train split, as Transform
    standardised it: the graph maps y to (y - mean) / std, so two labels give both.

    Labels 0 and 1 give a rough pair; then, three times, two labels a standard deviation apart
    at the pair's mean give z-scores nearer 0 and 1, read without cancellation. (Labels 0 and
    1 alone lose float32's precision where the mean is many standard deviations from 0: labels
    around 1,000,000 with a std of 935 came back with the mean 2.7% off, every served answer
    with it; tests/test_tfx_api.py.)"""
    output = tft.TFTransformOutput(transform_output)
    feature = output.raw_feature_spec()[spec.label]

    def z_scores(a: float, b: float) -> tuple[float, float]:
        values = tf.constant([a, b], feature.dtype)
        if isinstance(feature, tf.io.VarLenFeature):
            raw = tf.SparseTensor([[0, 0], [1, 0]], values, [2, 1])
        else:
            raw = tf.reshape(values, [2, *[d for d in feature.shape]])
        z = output.transform_raw_features({spec.label: raw}, drop_unused_features=True)
        z0, z1 = (float(v) for v in tf.reshape(z[LABEL_KEY], [-1]).numpy())
        return z0, z1

    def solve(a: float, b: float) -> tuple[float, float]:
        z0, z1 = z_scores(a, b)
        std = (b - a) / (z1 - z0) if z1 != z0 else float("inf")
        return a - z0 * std, std

    for spread in (1.0, 1e3, 1e6, 1e9):  # a std so large that 0 and 1 read alike
        mean, std = solve(0.0, spread)
        if np.isfinite(std):
            break
    for _ in range(3):  # each pass probes nearer the mean: z-scores nearer 0 and 1
        a = float(np.round(mean)) if feature.dtype.is_integer else mean
        b = a + (max(1.0, float(np.round(std))) if feature.dtype.is_integer else std)
        mean, std = solve(a, b)
    return mean, std


def _standardized_scalars(raws: list) -> tf.Tensor:
    """Z-scores of scalar numeric features, each over its present values; missing values are 0
    (the mean).

    All scalars go through one mean and one variance analyzer on a [batch, k] sparse tensor of
    the present values (per column, `reduce_instance_dims=False`): two Beam combiners in all,
    not two per feature, which made Transform the slowest step on wide CSVs. Both are in
    Transform's first phase (a z-score of mean-imputed values would need a second phase, which
    TFX 1.16's Transform cannot run on Beam 2.74: tft's deep_copy breaks there).
    """
    values = tf.concat([tf.cast(_dense(raw, 0, 1), tf.float32) for raw in raws], axis=1)
    present = tf.concat([_present_mask(raw) for raw in raws], axis=1)
    indices = tf.where(present)
    known = tf.SparseTensor(indices, tf.gather_nd(values, indices), tf.shape(values, tf.int64))
    mean = tft.mean(known, reduce_instance_dims=False)
    var = tft.var(known, reduce_instance_dims=False)
    z = (values - mean) * tf.math.rsqrt(tf.maximum(var, 1e-12))
    return tf.where(present, z, tf.zeros_like(z))


def features_to_x(inputs: dict, spec: DataSpec) -> tf.Tensor:
    """The model input: a [batch, width] float32 tensor."""
    parts = []
    if spec.image_shape is not None:
        for name, length in spec.numeric_features:
            parts.append(tf.cast(_dense(inputs[name], 0, length), tf.float32) / spec.pixel_scale)
        return tf.concat(parts, axis=1)
    scalars = [name for name, length in spec.numeric_features if length == 1]
    if scalars:
        parts.append(_standardized_scalars([inputs[name] for name in scalars]))
    for name, length in spec.numeric_features:
        if length > 1:
            values = tf.cast(_dense(inputs[name], 0, length), tf.float32)
            parts.append(tft.scale_to_z_score(values))
    for name in spec.string_features:
        ids = tft.compute_and_apply_vocabulary(
            _dense(inputs[name], ""), top_k=VOCAB_TOP_K, num_oov_buckets=1, vocab_filename=name
        )
        parts.append(tf.one_hot(tf.reshape(ids, [-1]), VOCAB_TOP_K + 1, dtype=tf.float32))
    for name in spec.categorical_features:
        parts.append(tf.cast(category_ids(inputs[name], name), tf.float32))
    for name, length in spec.bag_features:
        parts.append(tf.cast(bag_ids(inputs[name], name, length, spec.bag_separator), tf.float32))
    for name in spec.text_features:
        parts.append(tf.cast(text_ids(inputs[name], name, spec), tf.float32))
    return tf.concat(parts, axis=1)


def bag_vocab(feature: str) -> str:
    """The name of a multi-valued feature's vocabulary in Transform's assets."""
    return f"bag_{feature}"


def bag_ids(raw, name: str, length: int, separator: str) -> tf.Tensor:
    """[batch, length] int64 ids of a multi-valued feature: its values split at `separator`
    and stripped, 1.. for the vocabulary (most frequent first), len(vocabulary) + 1 for any
    other value, 0 for padding; values beyond `length` are cut."""
    values = tf.reshape(_dense(raw, ""), [-1])
    parts = tf.ragged.map_flat_values(tf.strings.strip, tf.strings.split(values, sep=separator))
    parts = tf.ragged.boolean_mask(parts, tf.strings.length(parts) > 0)
    ids = tft.compute_and_apply_vocabulary(
        parts, top_k=CATEGORY_TOP_K, num_oov_buckets=1, vocab_filename=bag_vocab(name)
    )
    return text.tf_pad_ids(ids + 1, length)


def category_vocab(feature: str) -> str:
    """The name of a categorical feature's vocabulary in Transform's assets."""
    return f"category_{feature}"


def category_ids(raw, name: str) -> tf.Tensor:
    """[batch, 1] int64 ids of a categorical feature's values (components/data/categories.py):
    0 for a missing cell, 1.. for its vocabulary (most frequent first), len(vocabulary) + 1 for
    any value not in it. Integers are looked up as their decimal text; a missing integer is not
    the ID 0."""
    present = _present_mask(raw)
    values = _dense(raw, "" if raw.dtype == tf.string else 0)
    if values.dtype != tf.string:
        values = tf.strings.as_string(values)
    present = tf.logical_and(present, tf.strings.length(values) > 0)
    ids = tft.compute_and_apply_vocabulary(
        tf.where(present, values, ""),  # tft leaves empty strings out of the vocabulary
        top_k=CATEGORY_TOP_K,
        num_oov_buckets=CATEGORY_OOV_BUCKETS,
        vocab_filename=category_vocab(name),
    )
    return tf.where(present, ids + 1, tf.zeros_like(ids))


def vocab_filename(feature: str) -> str:
    """The name of a text feature's vocabulary in Transform's assets."""
    return f"text_{feature}"


def text_ids(raw, name: str, spec: DataSpec) -> tf.Tensor:
    """[batch, max_tokens] int64 token ids of a text feature: 1.. for the vocabulary (most
    frequent first), len(vocabulary) + 1 for any other token, 0 for padding."""
    tokens = text.tf_tokens(tf.reshape(_dense(raw, ""), [-1]))
    ids = tft.compute_and_apply_vocabulary(
        tokens, top_k=spec.vocab_size, num_oov_buckets=1, vocab_filename=vocab_filename(name)
    )
    return text.tf_pad_ids(ids + 1, spec.max_tokens)


def feature_width(spec: DataSpec) -> int:
    """Width of the `x` vector preprocessing_fn makes for `spec`."""
    return (
        sum(n for _, n in spec.numeric_features)
        + len(spec.string_features) * (VOCAB_TOP_K + 1)
        + len(spec.categorical_features)
        + sum(length for _, length in spec.bag_features)
        + len(spec.text_features) * spec.max_tokens
    )


def feature_slices(spec: DataSpec) -> tuple[tuple[str, int, int], ...]:
    """(name, start, stop) of each raw feature's columns in `x`, in `x`'s order."""
    out, start = [], 0
    if spec.image_shape is not None:
        widths = list(spec.numeric_features)
    else:  # features_to_x's order: scalars, vectors, one-hot strings, categories, bags, text
        widths = [f for f in spec.numeric_features if f[1] == 1]
        widths += [f for f in spec.numeric_features if f[1] > 1]
        widths += [(n, VOCAB_TOP_K + 1) for n in spec.string_features]
        widths += [(n, 1) for n in spec.categorical_features]
        widths += list(spec.bag_features)
        widths += [(n, spec.max_tokens) for n in spec.text_features]
    for name, width in widths:
        out.append((name, start, start + width))
        start += width
    return tuple(out)


def model_spec(spec: DataSpec, width: int, custom_preprocessing: bool = False) -> ModelSpec:
    """What a model builder is told about `x`
    (amp_pipeline.components.models.user_module.ModelSpec)."""
    names = (
        tuple(n for n, _ in spec.numeric_features)
        + tuple(spec.string_features)
        + tuple(spec.categorical_features)
        + tuple(n for n, _ in spec.bag_features)
        + tuple(spec.text_features)
    )
    categorical = () if custom_preprocessing else tuple(spec.categorical_features)
    bags = () if custom_preprocessing else tuple(n for n, _ in spec.bag_features)
    image = spec.image_shape
    if image is not None and image[0] * image[1] * image[2] != width:
        image = None  # a user preprocessing_fn changed the layout
    return ModelSpec(
        input_width=width,
        feature_names=names,
        num_classes=spec.num_classes,
        class_names=tuple(spec.classes),
        task=spec.task,
        feature_slices=() if custom_preprocessing else feature_slices(spec),
        image_shape=image,
        text_features=() if custom_preprocessing else tuple(spec.text_features),
        categorical_features=categorical,
        # Upper bounds until Transform has built the vocabularies
        # (components/training/model_building.py replaces them with their sizes).
        categorical_sizes=(CATEGORY_TOP_K + CATEGORY_IDS_BEYOND_VOCABULARY,) * len(categorical),
        bag_features=bags,
        bag_sizes=(CATEGORY_TOP_K + 2,) * len(bags),
        vocab_size=spec.vocab_size,
        max_tokens=spec.max_tokens,
    )


def _user_features(inputs: dict, spec: DataSpec, module_ref: dict) -> tf.Tensor:
    """`x` from the user module's preprocessing_fn, checked to be a [batch, width] tensor."""
    from amp_pipeline.components.models import user_module as model_module

    ref = model_module.ModuleRef(**module_ref)
    module = model_module.load(ref)
    features = {k: v for k, v in inputs.items() if k != spec.label}
    outputs = model_module.call_hook(ref, module, "preprocessing_fn", features)
    if not isinstance(outputs, dict) or FEATURES_KEY not in outputs:
        raise model_module.ModelModuleError(
            f"model module {ref.label}: preprocessing_fn must return a dict holding "
            f"{FEATURES_KEY!r}, the model input; it returned "
            f"{sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__}"
        )
    x = outputs[FEATURES_KEY]
    if not isinstance(x, tf.Tensor) or x.shape.rank != 2 or x.shape[1] is None:
        raise model_module.ModelModuleError(
            f"model module {ref.label}: preprocessing_fn's {FEATURES_KEY!r} must be a dense "
            f"[batch, width] tensor of fixed width; it is {x!r}"
        )
    return tf.cast(x, tf.float32)


def preprocessing_fn(inputs: dict, custom_config: dict) -> dict:
    """TFX Transform entry point (`amp_pipeline.components.data.preprocessing.preprocessing_fn`).

    With a user model module that defines `preprocessing_fn`, `x` comes from it; the label is
    mapped to class ids (or standardised, for regression) here either way.
    """
    spec = DataSpec.from_dict(custom_config["data_spec"])
    module_ref = custom_config.get("model_module")
    if module_ref and custom_config.get("custom_preprocessing"):
        outputs = {FEATURES_KEY: _user_features(inputs, spec, module_ref)}
    else:
        outputs = {FEATURES_KEY: features_to_x(inputs, spec)}
    if spec.label in inputs:
        label = inputs[spec.label]
        outputs[LABEL_KEY] = (
            standardized_label(label, spec) if spec.regression else label_to_id(label, spec)
        )
    return outputs

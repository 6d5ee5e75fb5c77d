"""Training under one precision policy: small pure units and `train_and_export(spec)`.

This runs inside a fresh process (components/training/process.py) so that the global dtype policy of
one trainer never leaks into the other and its peak memory is its own.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import resource
import sys
from pathlib import Path

import numpy as np

from components.training.options import TrainSpec
from core import names

logger = logging.getLogger(__name__)


def make_dataset(
    file_patterns,
    transform_output: str,
    batch_size: int,
    seed: int,
    train: bool,
    compression: str = "GZIP",
):
    """Batches of (x, label) from Transform's gzipped TFRecords (or, `compression` "", the
    shuffled copy of shuffled_split)."""
    import tensorflow as tf
    import tensorflow_transform as tft

    from core.names import FEATURES_KEY, LABEL_KEY

    feature_spec = tft.TFTransformOutput(transform_output).transformed_feature_spec()
    files = sorted(f for p in file_patterns for f in tf.io.gfile.glob(p))
    ds = tf.data.TFRecordDataset(files, compression_type=compression)
    if train:
        ds = ds.shuffle(10_000, seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=train)
    ds = ds.map(lambda s: tf.io.parse_example(s, feature_spec))
    ds = ds.map(lambda f: (f[FEATURES_KEY], f[LABEL_KEY]))
    return ds.prefetch(tf.data.AUTOTUNE)


# A train split whose Transform output takes at most this much memory as float32 is read once
# and trained from memory, as `model.fit` trains from arrays: no tf.Example parsing per step on
# cores the training needs (benchmarks/trainer_overhead.py measures the difference). Larger
# splits stream from Transform's files.
IN_MEMORY_MAX_BYTES = 256 * 2**20


def in_memory_bytes(spec: TrainSpec) -> int:
    """The train split's size in memory as float32 rows of x and the label, estimated from the
    input's row count (0 where it is unknown)."""
    rows = int(spec.data_spec.get("rows") or 0)
    return rows * (input_width(spec) + 1) * 4 if rows else 0


@functools.lru_cache(maxsize=1)
def split_arrays(files: tuple[str, ...], transform_output: str) -> tuple:
    """(x, y) of a whole Transform output split, read once per process."""
    return dataset_arrays(make_dataset(files, transform_output, 4096, 0, False), sys.maxsize)


def memory_dataset(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int):
    """Endless batches from in-memory arrays, as Keras batches arrays: each pass a fresh
    permutation of the rows (stateless, from `seed` and the pass), each batch gathered whole."""
    import tensorflow as tf

    steps = len(y) // batch_size
    xt, yt = tf.constant(x), tf.constant(y)

    def one_pass(epoch):
        order = tf.random.experimental.stateless_shuffle(
            tf.range(len(y), dtype=tf.int64), seed=tf.stack([tf.constant(seed, tf.int64), epoch])
        )
        return tf.data.Dataset.from_tensor_slices(
            tf.reshape(order[: steps * batch_size], [steps, batch_size])
        )

    batches = tf.data.Dataset.range(2**62).flat_map(one_pass)
    return batches.map(lambda i: (tf.gather(xt, i), tf.gather(yt, i))).prefetch(tf.data.AUTOTUNE)


def memory_arrays(spec: TrainSpec, batch_size: int, strategy=None) -> tuple | None:
    """The train split's (x, y) where it is trained from memory: it fits IN_MEMORY_MAX_BYTES,
    holds at least one batch, and one process trains (no strategy to shard it); else None."""
    if strategy is not None or not 0 < in_memory_bytes(spec) <= IN_MEMORY_MAX_BYTES:
        return None
    x, y = split_arrays(tuple(spec.train_files), spec.transform_output)
    return (x, y) if len(y) >= batch_size else None


# A streamed train split is trained from a copy in a random order: Transform's files keep the
# input's order (an image folder class by class, a CSV sorted by label or time), and a
# 10,000-example shuffle buffer over a sorted split trains on batches of one class at a time.
# The copy is an external shuffle in buckets of at most SHUFFLE_BUCKET_BYTES (each row to a
# random bucket, then each bucket permuted in memory): a uniform random order in bounded memory,
# one more write and read of the split (benchmarks/RESULTS.md, "Training order", measures it).
SHUFFLE_BUCKET_BYTES = 64 * 2**20
PROGRESS_SECONDS = 10.0


def shuffled_split(
    files: list[str], out: Path, seed: int, expected_bytes: int, bucket_bytes: int
) -> list[str]:
    """The records of gzipped TFRecord `files` rewritten under `out` in a uniform random order
    (from `seed`), as uncompressed TFRecord parts; `expected_bytes` sizes the buckets."""
    import shutil
    import time

    import tensorflow as tf

    buckets = max(1, math.ceil(expected_bytes / bucket_bytes))
    rng = np.random.default_rng(seed)
    scratch = out / "buckets"
    shutil.rmtree(out, ignore_errors=True)
    scratch.mkdir(parents=True)
    started = last = time.monotonic()
    writers = [tf.io.TFRecordWriter(str(scratch / f"bucket-{i:05d}")) for i in range(buckets)]
    rows = 0
    source = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(8192).prefetch(2)
    for chunk in source.as_numpy_iterator():
        picks = rng.integers(buckets, size=len(chunk)).tolist()
        for record, bucket in zip(chunk, picks, strict=True):
            writers[bucket].write(record)
        rows += len(chunk)
        if time.monotonic() - last >= PROGRESS_SECONDS:
            logger.info("shuffling the train split: %s rows bucketed", f"{rows:,}")
            last = time.monotonic()
    for writer in writers:
        writer.close()
    parts = []
    for i in range(buckets):
        bucket = scratch / f"bucket-{i:05d}"
        records = [r for c in tf.data.TFRecordDataset(str(bucket)).batch(8192) for r in c.numpy()]
        part = out / f"part-{i:05d}.tfrecord"
        with tf.io.TFRecordWriter(str(part)) as writer:
            for j in rng.permutation(len(records)).tolist():
                writer.write(records[j])
        bucket.unlink()
        parts.append(str(part))
    scratch.rmdir()
    logger.info(
        "train split shuffled: %s rows in %d parts, %.1f s",
        f"{rows:,}",
        buckets,
        time.monotonic() - started,
    )
    return parts


def shuffled_train_files(spec: TrainSpec) -> tuple[str, ...]:
    """The train split's shuffled copy under the job's model_run_dir (made once per process,
    removed when the process ends)."""
    return _shuffled_copy(
        tuple(spec.train_files), spec.model_run_dir, spec.seed, in_memory_bytes(spec)
    )


@functools.lru_cache(maxsize=1)
def _shuffled_copy(
    patterns: tuple[str, ...], model_run_dir: str, seed: int, expected_bytes: int
) -> tuple[str, ...]:
    import atexit
    import shutil

    import tensorflow as tf

    files = sorted(f for p in patterns for f in tf.io.gfile.glob(p))
    # Gzipped tf.Examples of float32 rows expand about 4x: the larger guess sizes the buckets.
    compressed = sum(tf.io.gfile.stat(f).length for f in files)
    expected_bytes = max(expected_bytes, 4 * compressed)
    out = Path(model_run_dir) / "train_shuffled"
    atexit.register(shutil.rmtree, out, True)
    return tuple(shuffled_split(files, out, seed, expected_bytes, SHUFFLE_BUCKET_BYTES))


def train_dataset(spec: TrainSpec, batch_size: int, seed: int, strategy=None):
    """The training batches: from memory where memory_arrays gives the split, else streamed
    from its shuffled copy (shuffled_train_files; with a multi-worker strategy, each worker
    from Transform's files through the shuffle buffer); a share of the category and bag ids
    read as out-of-vocabulary (with_oov_share)."""
    arrays = memory_arrays(spec, batch_size, strategy)
    if arrays is not None:
        ds = memory_dataset(*arrays, batch_size, seed)
    elif strategy is None or not multi_worker(strategy):
        files = shuffled_train_files(spec)
        ds = make_dataset(files, spec.transform_output, batch_size, seed, True, compression="")
    else:
        ds = make_dataset(spec.train_files, spec.transform_output, batch_size, seed, True)
    columns = oov_columns(spec)
    return with_oov_share(ds, columns, input_width(spec), seed) if columns else ds


def oov_columns(spec: TrainSpec) -> dict[int, int]:
    """{column of x: its out-of-vocabulary id} of every category id and bag value id."""
    from components.models.builtin import bag_slices, categorical_slices

    data = spec.data_spec
    if not spec.transform_output or not (
        data.get("categorical_features") or data.get("bag_features")
    ):
        return {}
    mspec = model_spec(spec)
    if not mspec.feature_slices:  # a module's own preprocessing_fn: its ids are its own
        return {}
    columns = {}
    for _, start, stop, size in (*categorical_slices(mspec), *bag_slices(mspec)):
        columns.update(dict.fromkeys(range(start, stop), size - 1))
    return columns


def with_oov_share(ds, columns: dict[int, int], width: int, seed: int, share: float | None = None):
    """`ds`'s (x, y) batches with each id in `columns` (oov_columns; not a missing cell, not
    padding) replaced by its out-of-vocabulary id with probability `share`
    (components/data/categories.py OOV_SHARE), so that the out-of-vocabulary row learns an
    average unseen value. Training only."""
    import tensorflow as tf

    from components.data.categories import OOV_SHARE

    share = OOV_SHARE if share is None else share
    is_id = np.zeros(width, np.float32)
    oov = np.zeros(width, np.float32)
    for column, oov_id in columns.items():
        is_id[column], oov[column] = 1.0, float(oov_id)
    is_id_t, oov_t = tf.constant(is_id > 0), tf.constant(oov)

    def replace(x, y):
        draw = tf.random.uniform(tf.shape(x), seed=seed)
        hit = tf.logical_and(tf.logical_and(draw < share, is_id_t), x > 0)
        return tf.where(hit, tf.broadcast_to(oov_t, tf.shape(x)), x), y

    return ds.map(replace, num_parallel_calls=tf.data.AUTOTUNE)


def multi_worker(strategy) -> bool:
    return "MultiWorker" in type(strategy).__name__


def host_batches(spec: TrainSpec, batch_size: int, count: int) -> list:
    """`count` training batches of `batch_size` as numpy (x, y) pairs, for timed probes (their
    order does not matter: a streamed split is read as it stands)."""
    arrays = memory_arrays(spec, batch_size)
    if arrays is not None:
        ds = memory_dataset(*arrays, batch_size, spec.seed)
    else:
        ds = make_dataset(spec.train_files, spec.transform_output, batch_size, spec.seed, True)
    return [(np.asarray(x), np.asarray(y)) for x, y in ds.take(count)]


def user_module(spec: TrainSpec):
    """(ModuleRef, module) of the user's model module, or (None, None) for a built-in model."""
    if not spec.model_module:
        return None, None
    from components.models import user_module as model_module

    ref = model_module.ModuleRef(**spec.model_module)
    return ref, model_module.load(ref)


def make_optimizer(spec: TrainSpec):
    """The module's `optimizer()` or Adam at the spec's learning rate; wrapped in a
    LossScaleOptimizer where the recipe scales the loss."""
    import keras

    from components.models import user_module as model_module

    ref, module = user_module(spec)
    if module is not None and model_module.hook(module, "optimizer"):
        optimizer = model_module.call_hook(ref, module, "optimizer")
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise model_module.ModelModuleError(
                f"model module {ref.label}: optimizer() returned {type(optimizer).__name__}, "
                "not a keras.optimizers.Optimizer"
            )
    else:
        optimizer = keras.optimizers.Adam(spec.learning_rate)
    if spec.loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(
            optimizer,
            initial_scale=spec.loss_scale_initial,
            dynamic_growth_steps=spec.loss_scale_growth_interval,
        )
    return optimizer


def is_regression(spec: TrainSpec) -> bool:
    from core.data_spec import REGRESSION

    return spec.data_spec.get("task") == REGRESSION


def make_loss(spec: TrainSpec):
    """The module's `loss()`, else sparse categorical cross-entropy on probabilities, or for a
    regression label the spec's `regression_loss` on the standardised label: mean squared
    error, or Huber (delta 1: one standard deviation of the label)."""
    import keras

    from components.models import user_module as model_module

    ref, module = user_module(spec)
    if module is not None and model_module.hook(module, "loss"):
        return model_module.call_hook(ref, module, "loss")
    if is_regression(spec):
        if spec.regression_loss == "huber":
            return keras.losses.Huber(delta=1.0)
        return keras.losses.MeanSquaredError()
    return keras.losses.SparseCategoricalCrossentropy()


def train_metrics(spec: TrainSpec) -> list:
    """What Keras reports while training: accuracy, or for regression the mean absolute error
    of the standardised label (the gate's figures are in the label's units, from the served
    model: `regression_metrics`)."""
    import keras

    if is_regression(spec):
        return [keras.metrics.MeanAbsoluteError(name="mae")]
    return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]


def learning_rate_of(optimizer) -> float:
    """The optimizer's current learning rate, for diagnoses (NaN where it is a schedule)."""
    import keras

    inner = getattr(optimizer, "inner_optimizer", optimizer)
    try:
        return float(keras.ops.convert_to_numpy(inner.learning_rate))
    except (TypeError, ValueError):
        return float("nan")


def input_width(spec: TrainSpec) -> int:
    """Width of `x` as Transform wrote it (or as the built-in preprocessing makes it)."""
    from components.data.preprocessing import feature_width
    from core.data_spec import DataSpec
    from core.names import FEATURES_KEY

    if not spec.transform_output:
        return feature_width(DataSpec.from_dict(spec.data_spec))
    import tensorflow_transform as tft

    from components.models.user_module import ModelModuleError

    feature = tft.TFTransformOutput(spec.transform_output).transformed_feature_spec()[FEATURES_KEY]
    shape = list(getattr(feature, "shape", []) or [])
    if len(shape) != 1:
        raise ModelModuleError(
            f"preprocessing_fn: output {FEATURES_KEY!r} must be a [batch, width] float tensor "
            f"of fixed width; Transform recorded {feature}"
        )
    return int(shape[0])


def model_spec(spec: TrainSpec):
    """The ModelSpec `build_model(spec)` receives, with the sizes of the vocabularies Transform
    built (categories, bags; for text, an embedding table no larger than what was seen)."""
    from components.data import preprocessing
    from core.data_spec import CATEGORY_IDS_BEYOND_VOCABULARY, DataSpec

    custom = bool(spec.model_module and spec.model_module.get("preprocessing"))
    data = DataSpec.from_dict(spec.data_spec)
    mspec = preprocessing.model_spec(data, input_width(spec), custom)
    embedded = mspec.categorical_features or mspec.bag_features or mspec.text_features
    if not (embedded and spec.transform_output):
        return mspec
    import tensorflow_transform as tft

    size = tft.TFTransformOutput(spec.transform_output).vocabulary_size_by_name
    changes = {}
    if mspec.categorical_features:
        changes["categorical_sizes"] = tuple(
            size(preprocessing.category_vocab(name)) + CATEGORY_IDS_BEYOND_VOCABULARY
            for name in mspec.categorical_features
        )
    if mspec.bag_features:  # padding 0, the vocabulary from 1, one id for any other value
        changes["bag_sizes"] = tuple(
            size(preprocessing.bag_vocab(name)) + 2 for name in mspec.bag_features
        )
    if mspec.text_features:
        seen = max(size(preprocessing.vocab_filename(name)) for name in mspec.text_features)
        changes["vocab_size"] = min(mspec.vocab_size, seen)
    return dataclasses.replace(mspec, **changes)


def build_checked(spec: TrainSpec, policy: str):
    """The spec's model built under `policy`, its output made float32: (model, OutputFix)."""
    import keras

    from components.amp import rules as amp_rules
    from components.models import user_module as model_module
    from components.models.builtin import build_from_spec

    keras.mixed_precision.set_global_policy(policy)
    mspec = model_spec(spec)
    ref, module = user_module(spec)
    if module is not None:
        model = model_module.build(ref, module, mspec)
    else:
        model = build_from_spec(spec.model, mspec, **spec.model_options)
    return amp_rules.float32_output(model, mspec.input_width, policy)


def build_under_policy(spec: TrainSpec, policy: str):
    """The spec's model architecture, built under `policy` (float32 output)."""
    return build_checked(spec, policy)[0]


def float32_rebuild(spec: TrainSpec, model):
    """The same architecture under the float32 policy, holding the trained weights.

    Under mixed_float16/mixed_bfloat16 the variables are float32 already, so the weights carry
    over unchanged; only the compute dtype changes.
    """
    rebuilt = build_under_policy(spec, "float32")
    rebuilt.set_weights(model.get_weights())
    return rebuilt


def compile_model(spec: TrainSpec, model, jit_compile: bool, strategy=None) -> None:
    """Compiles `model` with the recipe's optimizer and loss, and train_metrics (in `strategy`'s
    scope, when given)."""

    from components.training.distribution import scope

    with scope(strategy):
        model.compile(
            optimizer=make_optimizer(spec),
            loss=make_loss(spec),
            metrics=train_metrics(spec),
            jit_compile=jit_compile,
        )


def build_and_compile(spec: TrainSpec, xla: bool | None = None, strategy=None):
    """The model under `spec.policy`, compiled with the recipe's optimizer and XLA setting."""
    model, _ = build_fresh(spec, spec.policy, strategy)
    compile_model(spec, model, spec.xla if xla is None else xla, strategy)
    return model


def build_fresh(spec: TrainSpec, policy: str, strategy=None):
    """Like build_checked, from a cleared session and the spec's seed: the same initial weights
    (and layer names) every time. Under `strategy`, the variables are the strategy's (the
    session is cleared before its scope is entered: clearing it inside breaks the scope)."""
    import keras

    from components.training.distribution import scope

    keras.backend.clear_session()
    keras.utils.set_random_seed(spec.seed)
    with scope(strategy):
        return build_checked(spec, policy)


def check_readiness(spec: TrainSpec, train_ds) -> dict:
    """The AMP readiness check on the first real batch of `train_ds`."""
    import numpy as np

    from components.amp.readiness import readiness_report

    x, y = next(iter(train_ds))
    x, y = np.asarray(x), np.asarray(y)
    return readiness_report(
        build=lambda policy: build_fresh(spec, policy)[0],
        compile_model=lambda model, jit: compile_model(spec, model, jit),
        x=x[:64],
        y=y[:64],
        policy=spec.policy,
        xla=spec.xla,
        gpu_recipe=spec.policy == "mixed_float16",
        batch_size=spec.batch_size,
        num_classes=len(spec.data_spec["classes"]),
        loss_fn=make_loss(spec),
    )


def dataset_arrays(ds, max_rows: int) -> tuple:
    """(x, y) numpy arrays of up to `max_rows` rows of a batched dataset."""
    import numpy as np

    xs, ys, n = [], [], 0
    for x, y in ds:
        xs.append(x.numpy())
        ys.append(y.numpy())
        n += len(ys[-1])
        if n >= max_rows:
            break
    return np.concatenate(xs)[:max_rows], np.concatenate(ys)[:max_rows]


def with_train_label_scale(spec: TrainSpec) -> TrainSpec:
    """A regression label's mean and standard deviation as Transform standardised it (over the
    train split), in the spec's DataSpec: the served model, the TFLite sidecar and every figure
    in the label's units use them, never the input check's figures over every row."""
    data = spec.data_spec
    if data.get("task") != "regression":
        return spec
    from components.data.preprocessing import label_scale
    from core.data_spec import DataSpec

    mean, std = label_scale(spec.transform_output, DataSpec.from_dict(data))
    logger.info("Label scale over the train split: mean %.6g, std %.6g", mean, std)
    return dataclasses.replace(spec, data_spec={**data, "label_mean": mean, "label_std": std})


def label_units(spec: TrainSpec, standardised: np.ndarray) -> np.ndarray:
    """A regression label or prediction back in the label's own units (float64)."""
    data = spec.data_spec
    return np.asarray(standardised, np.float64) * data["label_std"] + data["label_mean"]


def quality_text(figures: dict) -> str:
    """'accuracy 0.9195', or for regression 'MAE 123.4, RMSE 150.2, R² 0.871' (label units)."""
    if figures.get("accuracy") is not None:
        return f"accuracy {figures['accuracy']:.4f}"
    m = {"mae": math.nan, "rmse": math.nan, "r2": math.nan, **(figures.get("metrics") or {})}
    return f"MAE {m['mae']:.4g}, RMSE {m['rmse']:.4g}, R² {m['r2']:.3f}"


def regression_metrics(labels: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
    """MAE, RMSE and R² of predictions against labels, both in the label's units."""
    errors = np.asarray(predictions, np.float64) - labels
    total = float(np.sum((labels - labels.mean()) ** 2)) if len(labels) else 0.0
    return {
        "mae": float(np.mean(np.abs(errors))),
        "rmse": float(np.sqrt(np.mean(errors**2))),
        "r2": 1.0 - float(np.sum(errors**2)) / total if total > 0 else float("nan"),
    }


def served_outputs(saved_model_dir: str, x: np.ndarray, batch: int = 1024) -> np.ndarray:
    """The probabilities (for regression: the predictions, in the label's units) the exported
    serving SavedModel itself gives the Transform output `x` (its predict_features signature,
    read back from disk)."""
    import tensorflow as tf

    serve = tf.saved_model.load(saved_model_dir).signatures[names.FEATURES_SIGNATURE]
    key = (
        names.PREDICTIONS if names.PREDICTIONS in serve.structured_outputs else names.PROBABILITIES
    )
    out = [
        serve(x=tf.constant(x[i : i + batch], tf.float32))[key].numpy()
        for i in range(0, len(x), batch)
    ]
    return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


def export_edge_models(spec: TrainSpec, model, train_ds, eval_x, eval_y) -> dict:
    """TFLite variants under `<serving_model_dir>/tflite/`, with parity on the eval split
    against the exported serving SavedModel (what TF Serving answers), read back from disk."""
    from components.export.tflite import ParityThresholds, export_tflite
    from core.data_spec import DataSpec

    data = DataSpec.from_dict(spec.data_spec)
    out = Path(spec.serving_model_dir) / "tflite"
    shipped = ship_vocabularies(spec, data, out)  # with the model, TFLite or not
    if not spec.tflite_variants:
        return {"variants": {}}
    reference = float32_rebuild(spec, model)
    keras_dir = str(Path(spec.model_run_dir) / "keras_float32")
    reference.export(keras_dir, verbose=False)
    train_x, _ = dataset_arrays(train_ds, 200)
    return export_tflite(
        keras_dir,
        out,
        eval_x,
        label_units(spec, eval_y) if data.regression else eval_y,
        served_outputs(spec.serving_model_dir, eval_x),
        train_x,
        list(data.classes),
        {
            "name": "x",
            "shape": [None, int(eval_x.shape[1])],
            "dtype": "float32",
            "preprocessing": "the Transform output `x` (see the SavedModel's "
            "transform_features signature): images divided by their pixel scale, numeric "
            "features standardised, strings one-hot, categories as their vocabulary ids (see "
            "`categories`), text as token ids (components/data/"
            "text.py: tokenise, look up in the vocabulary file, pad or cut)",
            "image_shape": list(data.image_shape) if data.image_shape else None,
            "text": [v for v in shipped if v.get("kind") not in ("category", "bag")],
            "categories": [v for v in shipped if v.get("kind") in ("category", "bag")],
        },
        variants=tuple(spec.tflite_variants),
        thresholds=ParityThresholds(spec.tflite_min_agreement, spec.tflite_max_int8_drop),
        label_scale=(data.label_mean, data.label_std) if data.regression else None,
    )


def ship_vocabularies(spec: TrainSpec, data, out: Path) -> list[dict]:
    """Copies each text feature's vocabulary (`vocab_<feature>.txt`), each categorical
    feature's (`categories_<feature>.txt`) and each multi-valued feature's (`bag_<feature>.txt`)
    from Transform's output next to the TFLite models and says where their ids sit in `x`
    (the sidecar's `text`, and `categories` for the others: `kind` "category" or "bag", with
    the `rule` that gives their ids: components/data/categories.py)."""
    import shutil

    import tensorflow_transform as tft

    from components.data import categories, preprocessing, text

    if not data.text_features and not data.categorical_features and not data.bag_features:
        return []
    out.mkdir(parents=True, exist_ok=True)
    transform = tft.TFTransformOutput(spec.transform_output)
    slices = {name: (start, stop) for name, start, stop in preprocessing.feature_slices(data)}

    def ship(name: str, vocab: str, prefix: str, **facts) -> dict:
        target = out / f"{prefix}_{name}.txt"
        shutil.copyfile(transform.vocabulary_file_by_name(vocab), target)
        size = len(text.read_vocabulary(target))
        return {
            "feature": name,
            "column": data.original_name(name),
            "x_columns": list(slices[name]),
            "vocabulary_file": target.name,
            "vocabulary_size": size,
            **{k: v(size) if callable(v) else v for k, v in facts.items()},
        }

    return [
        *(
            ship(name, preprocessing.bag_vocab(name), "bag", kind="bag",
                 separator=data.bag_separator, values_kept=length, rule=categories.BAG_RULE,
                 padding_id=categories.MISSING_ID, oov_id=categories.oov_id)
            for name, length in data.bag_features
        ),
        *(
            ship(name, preprocessing.category_vocab(name), "categories", kind="category",
                 rule=categories.CATEGORY_RULE, missing_id=categories.MISSING_ID,
                 oov_id=categories.oov_id)
            for name in data.categorical_features
        ),
        *(
            ship(name, preprocessing.vocab_filename(name), "vocab", max_tokens=data.max_tokens,
                 padding_id=text.PAD_ID, oov_id=text.oov_id,
                 tokenizer="components/data/text.py: encode()")
            for name in data.text_features
        ),
    ]  # fmt: skip


def distributed(spec: TrainSpec, strategy) -> tuple[TrainSpec, dict | None]:
    """The spec at the global batch (and linearly scaled learning rate) of `strategy`'s
    replicas, and the figures that say so (None without one). Where a worker that is not the
    chief writes is decided before this process starts
    (components/training/trainer.py::for_this_task)."""
    from components.training import distribution

    if strategy is None:
        return spec, None
    own_optimizer = False
    _, module = user_module(spec)
    if module is not None:
        from components.models import user_module as model_module

        own_optimizer = bool(model_module.hook(module, "optimizer"))
    scaling = distribution.Scaling(
        distribution.replicas(strategy), spec.batch_size, spec.learning_rate
    )
    config = distribution.tf_config()
    figures = {
        "strategy": type(strategy).__name__,
        "replicas": scaling.replicas,
        "workers": max(distribution.cluster_workers(config), 1),
        "per_replica_batch": scaling.per_replica_batch,
        "global_batch": scaling.global_batch,
        "learning_rate": scaling.learning_rate if own_optimizer else scaling.scaled_learning_rate,
        "chief": distribution.is_chief(config),
        "note": scaling.note(own_optimizer),
    }
    scaled = dataclasses.replace(
        spec, batch_size=scaling.global_batch, learning_rate=scaling.scaled_learning_rate
    )
    return scaled, figures


def fit(model, strategy, train_ds, **kwargs):
    """model.fit, under MultiWorkerMirroredStrategy through its Keras 3 workaround."""
    from components.training.distribution import keras_multiworker

    with keras_multiworker(model, strategy, train_ds):
        return model.fit(train_ds, **kwargs)


def evaluate(model, strategy, eval_ds, **kwargs):
    """model.evaluate, likewise."""
    from components.training.distribution import keras_multiworker

    with keras_multiworker(model, strategy, eval_ds):
        return model.evaluate(eval_ds, **kwargs)


def fit_watched(spec: TrainSpec, model, strategy, train_ds, what: str = ""):
    """`model.fit` for `spec.train_steps` steps under the step timer, the loss-scale monitor and
    the peak-memory measurement: (history, timer, monitor, memory, peak MB). A collapsed loss
    scale or a loss that stays NaN raises LossScaleCollapse, its diagnosis after `what`."""
    from components.amp.loss_scale import LossScaleCollapse, LossScaleMonitor
    from components.amp.perf import PeakMemory, StepTimer

    monitor = LossScaleMonitor(
        patience=spec.collapse_patience, learning_rate=learning_rate_of(model.optimizer)
    )
    timer = StepTimer(spec.batch_size, warmup_steps=min(5, max(spec.train_steps - 1, 0)))
    memory = PeakMemory(spec.device)
    memory.start()
    history = fit(
        model,
        strategy,
        train_ds,
        steps_per_epoch=spec.train_steps,
        epochs=1,
        callbacks=[timer, monitor],
        verbose=0,
    )
    peak_mb = memory.peak_mb()
    if monitor.collapse:
        raise LossScaleCollapse(f"{what}{monitor.collapse}")
    return history, timer, monitor, memory, peak_mb


def train_and_export(spec: TrainSpec, strategy=None) -> dict:
    """Trains (data-parallel under `strategy`, when given), evaluates, exports the serving
    SavedModel, and returns the measured figures."""
    from components.amp import fp32_math

    # The float32 twin's matmuls as --fp32-math asks (strict: no TF32); the AMP twin keeps
    # TensorFlow's default for the parts it runs in float32.
    math_record = fp32_math.apply(spec.fp32_math if spec.policy == "float32" else fp32_math.TF32)
    spec = with_train_label_scale(spec)
    spec, distribution_figures = distributed(spec, strategy)
    train_ds = train_dataset(spec, spec.batch_size, spec.seed, strategy)
    eval_ds = make_dataset(
        spec.eval_files, spec.transform_output, spec.batch_size, spec.seed, train=False
    )
    readiness = check_readiness(spec, train_ds) if spec.readiness else None
    xla, xla_fallback = xla_after_readiness(spec, readiness)
    trained = train_first_seed(spec, strategy, train_ds, eval_ds, xla)
    serving, layers = export_checked(spec, trained["model"], readiness, trained["dtype_warnings"])
    eval_x, eval_y = dataset_arrays(eval_ds, spec.tflite_parity_examples)
    tflite = export_edge_models(spec, trained["model"], train_ds, eval_x, eval_y)
    del eval_x, eval_y
    reference = reference_baseline(spec, eval_ds) if is_regression(spec) else None
    category_figures = category_coverage(spec, eval_ds)
    seed_runs = predict_every_seed(spec, xla, eval_ds, serving, trained, strategy, reference)
    diagnostics = None
    if spec.diagnose:
        from components.amp import diagnosis as amp_diagnosis

        mspec = model_spec(spec)
        diagnostics = amp_diagnosis.measure(
            trained["model"],
            train_ds,
            spec.policy,
            spec.batch_size,
            mspec.input_width,
            mspec.output_width,
        )
    timer, monitor = trained["timer"], trained["monitor"]
    figures = {
        "policy": spec.policy,
        "xla": xla,
        "xla_requested": spec.xla,
        "xla_fallback": xla_fallback,
        "loss_scaling": spec.loss_scaling,
        "model": spec.model,
        "model_module": spec.model_module,
        "train_steps": spec.train_steps,
        "batch_size": spec.batch_size,
        "threads": spec.intra_op_threads,
        "device": spec.device,
        "accuracy": (None if is_regression(spec) else float(trained["results"]["accuracy"])),
        "metrics": seed_runs[0].get("metrics"),  # regression: MAE, RMSE, R² in label units
        "loss": float(trained["results"]["loss"]),
        **timer.summary(),
        "peak_memory_mb": trained["peak_mb"],
        "memory_method": trained["memory"].method,
        "history": {k: [float(v) for v in vs] for k, vs in trained["history"].history.items()},
        "layers": layers,
        "dtype_warnings": trained["dtype_warnings"],
        "output_fix": trained["output_fix"].to_dict(),
        "readiness": readiness,
        "diagnostics": diagnostics,
        "loss_scale": monitor.summary(),
        # Per step: Keras' running means over the (single) epoch.
        "curve": {"loss": monitor.losses, "accuracy": monitor.accuracies},
        "serving_precision": spec.serving_precision,
        "fp32_math": math_record,
        # A regression label's train-split mean and std (Transform's): the mean baseline's.
        "label_scale": None
        if not is_regression(spec)
        else {
            "mean": spec.data_spec.get("label_mean"),
            "std": spec.data_spec.get("label_std"),
            "from": "the train split (Transform's analyzers)",
        },
        "tflite": tflite,
        "reference": None if reference is None else reference["figures"],
        "categories": category_figures,
        "process_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seeds": seed_runs,
        "distribution": distribution_figures,
    }
    (Path(spec.model_run_dir) / names.FIGURES_JSON).write_text(
        json.dumps(figures, indent=2, default=_json_default)
    )
    return figures


def xla_after_readiness(spec: TrainSpec, readiness: dict | None) -> tuple[bool, str | None]:
    """(XLA on or off, why it was turned off): the readiness check's compile probe failing
    turns XLA off for the run."""
    if readiness and readiness["compile"] and not readiness["compile"]["ok"]:
        logger.warning("Training without XLA: %s", readiness["compile"]["error"])
        return False, readiness["compile"]["error"]
    return spec.xla, None


def train_first_seed(spec: TrainSpec, strategy, train_ds, eval_ds, xla: bool) -> dict:
    """The spec's model built, compiled, trained under the watch of fit_watched and evaluated:
    the model and what was measured on the way."""
    from components.amp import rules as amp_rules

    model, output_fix = build_fresh(spec, spec.policy, strategy)
    compile_model(spec, model, xla, strategy)
    dtype_warnings = amp_rules.variable_dtype_warnings(model, spec.policy)
    history, timer, monitor, memory, peak_mb = fit_watched(spec, model, strategy, train_ds)
    results = evaluate(model, strategy, eval_ds, steps=spec.eval_steps, return_dict=True, verbose=0)
    return {
        "model": model,
        "output_fix": output_fix,
        "dtype_warnings": dtype_warnings,
        "history": history,
        "timer": timer,
        "monitor": monitor,
        "memory": memory,
        "peak_mb": peak_mb,
        "results": results,
    }


def export_checked(
    spec: TrainSpec, model, readiness: dict | None, warnings: list[str]
) -> tuple[object, list]:
    """Saves model.keras, exports the serving SavedModel (the float32 rebuild by default) and
    checks its dtypes on the artifact as written and read back (dtype_report.json, with the
    variables' dtype `warnings`): (the served model, the layers' dtype report).

    Raises:
        ValueError: the written artifact is not what it should be.
    """
    from components.amp import rules as amp_rules
    from components.export.saved_model import artifact_dtypes, check_artifact, export_serving_model

    run_dir = Path(spec.model_run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        model.save(run_dir / names.KERAS_MODEL)
    except Exception as e:  # noqa: BLE001 - a user model that Keras cannot serialise still serves
        logger.warning("model.keras not written (%s); the SavedModel is the model", e)
    observed = (readiness or {}).get("numeric", {}).get("output_dtypes")
    layers = amp_rules.dtype_report(model, spec.policy, observed)
    report = {"policy": spec.policy, "layers": layers, "warnings": warnings}
    serving = float32_rebuild(spec, model) if spec.serving_precision == "float32" else model
    export_serving_model(serving, spec.transform_output, spec.serving_model_dir, spec.data_spec)
    # Checked on the artifact as written and read back, not on the model in memory.
    report["artifact"] = artifact_dtypes(spec.serving_model_dir)
    (Path(spec.serving_model_dir) / names.DTYPE_REPORT_JSON).write_text(
        json.dumps(report, indent=2)
    )
    problems = check_artifact(report["artifact"], spec.serving_precision)
    if problems:
        raise ValueError(
            f"the exported serving model {spec.serving_model_dir} is not what it should be: "
            + "; ".join(problems)
        )
    return serving, layers


def predict_every_seed(
    spec: TrainSpec, xla, eval_ds, serving, trained, strategy, reference: dict | None = None
):
    """The first seed's figures, every further seed trained the same way, and each seed's
    served predictions on the whole eval split (streamed batch by batch) written to
    `eval_predictions.npz` for the gate's pairs (class ids; for regression, values in the
    label's units): the per-seed figures, with
    their accuracy (regression: `metrics`, MAE, RMSE and R² in the label's units, and accuracy
    None)."""
    first = {
        "seed": spec.seed,
        **trained["timer"].summary(),
        "peak_memory_mb": trained["peak_mb"],
        "accuracy": None,
    }
    seed_runs, answered = train_other_seeds(spec, xla, eval_ds, serving, first, strategy)
    predictions = [answers for answers, _ in answered]
    scores = [s for _, s in answered if s is not None]
    regression = is_regression(spec)
    eval_y = np.concatenate([np.asarray(y) for _, y in eval_ds])
    labels = label_units(spec, eval_y) if regression else eval_y.astype(np.int64)
    for run, predicted in zip(seed_runs, predictions, strict=True):
        if regression:
            run["metrics"] = regression_metrics(labels, predicted)
        else:
            run["accuracy"] = float(np.mean(predicted == eval_y))
    if reference is not None:
        reference["figures"]["metrics"] = regression_metrics(labels, reference["predictions"])
    np.savez_compressed(
        Path(spec.model_run_dir) / names.EVAL_PREDICTIONS,
        labels=labels,
        predictions=np.stack(predictions).astype(np.float64 if regression else np.int64),
        seeds=np.array([r["seed"] for r in seed_runs], np.int64),
        **({"scores": np.stack(scores)} if scores else {}),
        **({"reference": reference["predictions"]} if reference is not None else {}),
    )
    return seed_runs


def category_coverage(spec: TrainSpec, eval_ds) -> dict:
    """Per categorical feature: its vocabulary's size, whether it was cut at CATEGORY_TOP_K
    (the other values then share the out-of-vocabulary id, and `train_oov_share` says on what
    share of the train rows read), and how many eval rows hold a value the train split did not
    have (served from the out-of-vocabulary row)."""
    from components.models.builtin import categorical_slices
    from core.data_spec import CATEGORY_IDS_BEYOND_VOCABULARY, CATEGORY_TOP_K

    if not spec.data_spec.get("categorical_features") or not spec.transform_output:
        return {}
    mspec = model_spec(spec)
    if not mspec.feature_slices:
        return {}
    slices = categorical_slices(mspec)
    unseen = dict.fromkeys((name for name, *_ in slices), 0)
    rows = 0
    for x, _ in eval_ds:
        x = np.asarray(x)
        rows += len(x)
        for name, start, _, size in slices:
            unseen[name] += int(np.sum(np.rint(x[:, start]) == size - 1))
    out = {
        name: {
            "vocabulary": size - CATEGORY_IDS_BEYOND_VOCABULARY,
            "capped": size - CATEGORY_IDS_BEYOND_VOCABULARY >= CATEGORY_TOP_K,
            "eval_unseen_rows": unseen[name],
            "eval_rows": rows,
        }
        for name, _, _, size in slices
    }
    if any(c["capped"] for c in out.values()):
        x, _ = train_sample(spec)
        for name, start, _, size in slices:
            if out[name]["capped"]:
                out[name]["train_oov_share"] = float(np.mean(np.rint(x[:, start]) == size - 1))
                out[name]["train_rows_read"] = len(x)
    return out


def train_sample(spec: TrainSpec) -> tuple[np.ndarray, np.ndarray]:
    """The train split's (x, y): from memory where it is trained from memory, else its first
    rows as Transform wrote them, at most REFERENCE_MAX_ROWS and IN_MEMORY_MAX_BYTES of them."""
    arrays = memory_arrays(spec, 1)
    if arrays is None:
        fits = IN_MEMORY_MAX_BYTES // ((input_width(spec) + 1) * 4)
        rows = max(1, min(REFERENCE_MAX_ROWS, fits))
        arrays = first_rows(tuple(spec.train_files), spec.transform_output, rows)
    return arrays


@functools.lru_cache(maxsize=1)
def first_rows(files: tuple[str, ...], transform_output: str, rows: int) -> tuple:
    """(x, y) of the first `rows` rows of a split, read once per process (the reference
    baseline and the category coverage both read them)."""
    plain = make_dataset(files, transform_output, 4096, 0, False)
    return dataset_arrays(plain, rows)


# The reference baseline reads at most this many train rows (from memory where the split is
# trained from memory, else the first rows of Transform's files).
REFERENCE_MAX_ROWS = 1_000_000


def reference_baseline(spec: TrainSpec, eval_ds) -> dict | None:
    """The regression label's reference baseline (components/training/reference.py), fitted on
    the train split and run on every eval example: {"figures", "predictions" (label units)};
    None with a module's own preprocessing (its `x` is its own)."""
    import time

    from components.models.builtin import bag_slices, categorical_slices
    from components.training.reference import Reference

    mspec = model_spec(spec)
    if not mspec.feature_slices:
        return None
    started = time.perf_counter()
    ids = [start for _, start, _, _ in categorical_slices(mspec)]
    excluded = {c for _, start, stop, _ in bag_slices(mspec) for c in range(start, stop)}
    excluded |= {
        c for name, start, stop in mspec.feature_slices if name in mspec.text_features
        for c in range(start, stop)
    }  # fmt: skip
    dense = [c for c in range(mspec.input_width) if c not in excluded and c not in ids]
    reference = Reference(ids, dense).fit(*train_sample(spec))
    predicted = np.concatenate([reference.predict(np.asarray(x)) for x, _ in eval_ds])
    return {
        "figures": {
            "kind": reference.kind,
            "detail": reference.describe(),
            "train_rows": reference.rows,
            "seconds": time.perf_counter() - started,
        },
        "predictions": label_units(spec, predicted),
    }


def predicted_answers(spec: TrainSpec, model, eval_ds) -> tuple[np.ndarray, np.ndarray | None]:
    """The model's class ids for every example of the batched `eval_ds` (its x), or for
    regression its predictions in the label's units; and for a binary label the positive
    class's probability (the gate's ROC and PR AUC), else None."""
    outputs = model.predict(eval_ds.map(lambda x, y: x), verbose=0)
    if is_regression(spec):
        return label_units(spec, np.reshape(outputs, [-1])), None
    scores = outputs[:, 1].astype(np.float32) if outputs.shape[1] == 2 else None
    return np.argmax(outputs, axis=1), scores


def train_other_seeds(spec: TrainSpec, xla: bool, eval_ds, served, first: dict, strategy=None):
    """The spec's model trained again under each further seed of `spec.seed_list` (same data, same
    steps): ([figures per seed], [(eval predictions, binary scores) per seed]), the first
    seed's given."""
    import dataclasses as dc

    runs, predictions = [first], [predicted_answers(spec, served, eval_ds)]
    for seed in spec.seed_list[1:]:
        sub = dc.replace(spec, seed=seed)
        model, _ = build_fresh(sub, sub.policy, strategy)
        compile_model(sub, model, xla, strategy)
        train_ds = train_dataset(sub, sub.batch_size, seed, strategy)
        # Every seed is watched as the first one is: a collapsed loss scale stops the run.
        _, timer, monitor, _, peak_mb = fit_watched(
            sub, model, strategy, train_ds, f"seed {seed}: "
        )
        runs.append(
            {
                "seed": seed,
                **timer.summary(),
                "peak_memory_mb": peak_mb,
                "loss_scale": {k: v for k, v in monitor.summary().items() if k != "history"},
            }
        )
        served_model = float32_rebuild(sub, model) if sub.serving_precision == "float32" else model
        predictions.append(predicted_answers(sub, served_model, eval_ds))
        logger.info("seed %d: %s", seed, runs[-1])
    return runs, predictions


def _json_default(value):
    """numpy scalars in figures.json."""
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")

"""The trainer's data: Transform's files as tf.data (in memory where the split fits
IN_MEMORY_MAX_BYTES, else streamed from a shuffled copy of the split), the share of category and bag
ids read as out-of-vocabulary, and the host-side samples that probes and baselines read."""

from __future__ import annotations

import functools
import json
import logging
import math
import sys
from pathlib import Path

import numpy as np

from amp_pipeline.components.training.model_building import input_width, model_spec
from amp_pipeline.components.training.options import TrainSpec

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

    from amp_pipeline.core.names import FEATURES_KEY, LABEL_KEY

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
# cores the training needs (benchmarks/scale/trainer_overhead.py measures the difference). Larger
# splits stream from Transform's files.
IN_MEMORY_MAX_BYTES = 256 * 2**20


def in_memory_bytes(spec: TrainSpec) -> int:
    """The train split's size in memory as float32 rows of x and the label, estimated from the
    input's row count (0 where it is unknown)."""
    rows = int(spec.data_spec.get("rows") or 0)
    return rows * (input_width(spec) + 1) * 4 if rows else 0


@functools.lru_cache(maxsize=2)
def split_arrays(files: tuple[str, ...], transform_output: str) -> tuple:
    """(x, y) of a whole Transform output split, read once per process."""
    return dataset_arrays(make_dataset(files, transform_output, 4096, 0, False), sys.maxsize)


# The eval split's share of the rows (ExampleGen's 4:1 hash buckets), for its size in memory.
EVAL_SHARE = 0.2


def eval_dataset(spec: TrainSpec, strategy=None):
    """The eval split's (x, label) batches in file order, every example once. Read once into
    memory where it fits IN_MEMORY_MAX_BYTES and one process evaluates: the trainer reads the
    split four times (evaluate, category coverage, every seed's predictions, the labels), and
    parsing 200,000 tf.Examples is the cost each time. Else streamed from Transform's files."""
    import tensorflow as tf

    if strategy is None and 0 < in_memory_bytes(spec) * EVAL_SHARE <= IN_MEMORY_MAX_BYTES:
        x, y = split_arrays(tuple(spec.eval_files), spec.transform_output)
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(spec.batch_size)
    return make_dataset(
        spec.eval_files, spec.transform_output, spec.batch_size, spec.seed, train=False
    )


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


def memory_arrays(
    spec: TrainSpec, batch_size: int, strategy=None
) -> tuple[np.ndarray, np.ndarray] | None:
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
    """The train split's shuffled copy for the spec's seed (shared_shuffle_dir: made once for
    both twins)."""
    return _shuffled_copy(
        tuple(spec.train_files), spec.model_run_dir, spec.seed, in_memory_bytes(spec)
    )


# Beside a split's Split-* folders in Transform's transformed-examples artifact: both twins of
# a run read one shuffled copy per seed, made by whichever trainer gets there first (the copy
# was made again for each twin: 89 s of a float32 twin's 106 s on 1M rows, issue 50). The local
# runner removes it when the run ends (remove_shared_shuffles); on another orchestrator it
# stays with the artifact, where a rerun on the cached Transform output reuses it.
SHARED_SHUFFLE_DIR = "_train_shuffled"
PARTS_JSON = "parts.json"


def shared_shuffle_dir(patterns: tuple[str, ...], model_run_dir: str, seed: int) -> Path:
    """Where the copy for `seed` goes: beside the Split-* folders of the artifact the train
    files come from, when they are local files; else the trainer's own model_run_dir."""
    split_dir = Path(patterns[0]).parent if patterns else None
    if split_dir is not None and split_dir.name.startswith("Split-") and split_dir.is_dir():
        return split_dir.parent / SHARED_SHUFFLE_DIR / f"seed-{seed}"
    return Path(model_run_dir) / "train_shuffled"


def remove_shared_shuffles(pipeline_root: str) -> list[Path]:
    """Removes every shared shuffled copy under `pipeline_root`'s artifacts; the removed."""
    import shutil

    found = sorted(Path(pipeline_root).glob(f"*/*/*/{SHARED_SHUFFLE_DIR}"))
    for folder in found:
        shutil.rmtree(folder, ignore_errors=True)
    return found


@functools.lru_cache(maxsize=1)
def _shuffled_copy(
    patterns: tuple[str, ...], model_run_dir: str, seed: int, expected_bytes: int
) -> tuple[str, ...]:
    import atexit
    import fcntl
    import shutil

    import tensorflow as tf

    out = shared_shuffle_dir(patterns, model_run_dir, seed)
    shared = out.parent.name == SHARED_SHUFFLE_DIR
    if not shared:
        atexit.register(shutil.rmtree, out, True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".seed-{seed}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other twin waits while one writes the copy
        made = out / PARTS_JSON
        if shared and made.exists():
            parts = json.loads(made.read_text())
            if all(Path(p).exists() for p in parts):
                logger.info("train split's shuffled copy for seed %d reused: %s", seed, out)
                return tuple(parts)
        files = sorted(f for p in patterns for f in tf.io.gfile.glob(p))
        # Gzipped tf.Examples of float32 rows expand about 4x: the larger guess sizes the buckets.
        compressed = sum(tf.io.gfile.stat(f).length for f in files)
        expected_bytes = max(expected_bytes, 4 * compressed)
        parts = shuffled_split(files, out, seed, expected_bytes, SHUFFLE_BUCKET_BYTES)
        made.write_text(json.dumps(parts))
        return tuple(parts)


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
    from amp_pipeline.components.models.builtin import bag_slices, categorical_slices

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

    from amp_pipeline.components.data.categories import OOV_SHARE

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


def train_sample(spec: TrainSpec) -> tuple[np.ndarray, np.ndarray]:
    """The train split's (x, y): from memory where it is trained from memory, else a uniform
    random sample of it, at most REFERENCE_MAX_ROWS and IN_MEMORY_MAX_BYTES of rows: the first
    rows of its shuffled copy (the one the twins train from), not of Transform's files, which
    keep the input's order (a CSV sorted by time, label or id)."""
    arrays = memory_arrays(spec, 1)
    if arrays is None:
        fits = IN_MEMORY_MAX_BYTES // ((input_width(spec) + 1) * 4)
        rows = max(1, min(REFERENCE_MAX_ROWS, fits))
        arrays = first_rows(shuffled_train_files(spec), spec.transform_output, rows, "")
    return arrays


@functools.lru_cache(maxsize=1)
def first_rows(
    files: tuple[str, ...], transform_output: str, rows: int, compression: str = "GZIP"
) -> tuple:
    """(x, y) of the first `rows` rows of `files`, read once per process (the reference
    baseline and the category coverage both read them)."""
    plain = make_dataset(files, transform_output, 4096, 0, False, compression=compression)
    return dataset_arrays(plain, rows)


# The reference baseline reads at most this many train rows (from memory where the split is
# trained from memory, else the first rows of its shuffled copy: a uniform sample).
REFERENCE_MAX_ROWS = 1_000_000

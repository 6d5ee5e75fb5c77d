"""The majority-class baseline: the accuracy of always answering the most common class, on the
eval split the gate's accuracies are measured on."""

from __future__ import annotations

import collections
import os


def majority(examples_uri: str, label: str, label_kind: str, split: str = "eval") -> dict:
    """{"class", "share", "count", "examples"} of the most common label in `split`.

    Only the label is parsed (tf.data, in batches), so it is quick on large splits.
    """
    import tensorflow as tf

    files = tf.io.gfile.glob(os.path.join(examples_uri, f"Split-{split}", "*"))
    dtype = tf.string if label_kind == "string" else tf.int64
    spec = {label: tf.io.VarLenFeature(dtype)}
    counts: collections.Counter = collections.Counter()
    ds = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096)
    for batch in ds.map(lambda s: tf.io.parse_example(s, spec)[label].values):
        counts.update(v.decode() if isinstance(v, bytes) else str(v) for v in batch.numpy())
    total = sum(counts.values())
    if not total:
        return {"class": None, "share": None, "count": 0, "examples": 0}
    cls, count = counts.most_common(1)[0]
    return {"class": cls, "share": count / total, "count": count, "examples": total}

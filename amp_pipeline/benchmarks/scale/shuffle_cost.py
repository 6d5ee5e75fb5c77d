"""`python -m amp_pipeline.benchmarks.scale.shuffle_cost [--rows N] [--width W]`: what the trainer's
shuffled copy of a streamed train split costs (components/training/datasets.py::shuffled_split).

Writes N gzipped tf.Examples of W float32 features (random normal, as Transform writes `x`) once
under bench/shuffle_cost/, then times one read pass over them and the shuffled copy, and
reports the process's peak resident memory before and after the copy (`ru_maxrss`).
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np

from amp_pipeline.benchmarks.records import ROOT, cpu_name


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_split(path: Path, rows: int, width: int) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(0)
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for start in range(0, rows, 10_000):
            for row in rng.normal(size=(min(10_000, rows - start), width)).astype(np.float32):
                feature = {
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=row)),
                    "label_xf": tf.train.Feature(int64_list=tf.train.Int64List(value=[1])),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())


def main(argv: list[str] | None = None) -> int:
    import tensorflow as tf

    from amp_pipeline.components.training import datasets

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--width", type=int, default=64)
    args = p.parse_args(argv)
    root = ROOT / "bench" / "shuffle_cost"
    root.mkdir(parents=True, exist_ok=True)
    source = root / f"train-{args.rows}x{args.width}.gz"
    if not source.exists():
        write_split(source, args.rows, args.width)
    started = time.perf_counter()
    dataset = tf.data.TFRecordDataset([str(source)], compression_type="GZIP").batch(8192)
    rows = sum(len(chunk) for chunk in dataset.as_numpy_iterator())
    read_s = time.perf_counter() - started
    before = peak_mib()
    started = time.perf_counter()
    parts = datasets.shuffled_split(
        [str(source)], root / "copy", 0, rows * (args.width + 1) * 4, datasets.SHUFFLE_BUCKET_BYTES
    )
    copy_s = time.perf_counter() - started
    print(
        f"{cpu_name()}: {rows:,} rows of {args.width} floats, {source.stat().st_size / 2**20:.0f} "
        f"MiB gzipped: one read pass {read_s:.1f} s; the shuffled copy {copy_s:.1f} s in "
        f"{len(parts)} parts; peak resident memory {before:.0f} MiB before it, "
        f"{peak_mib():.0f} MiB after"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

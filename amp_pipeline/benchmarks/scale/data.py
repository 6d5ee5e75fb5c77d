"""`python -m amp_pipeline.benchmarks.scale.data`: the scale benchmark's inputs, generated, never
downloaded.

- Tabular: N rows x 65 columns (64 features: 48 numeric with 5% `NA`, 8 integer, 8 categorical
  with 12 values; a 4-class label from a noisy linear rule), about 15 MB per 100k rows.
- Images: N 32x32 RGB PNGs in 10 class folders (a coloured square whose corner depends on the
  class, over noise).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def tabular(rows: int, path: Path, seed: int = 0, chunk: int = 100_000) -> Path:
    """Writes the CSV in chunks (bounded memory) and returns its path."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    weights = rng.normal(size=48)
    path.parent.mkdir(parents=True, exist_ok=True)
    with pacsv.CSVWriter(str(path), _schema()) as writer:
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            numeric = rng.normal(size=(n, 48)).round(3)
            score = numeric @ weights + rng.normal(scale=2.0, size=n)
            label = np.digitize(score, np.quantile(score, [0.25, 0.5, 0.75]))
            columns = {}
            for k in range(48):
                values = pa.array(numeric[:, k])
                mask = rng.random(n) < 0.05
                columns[f"num_{k}"] = (
                    pa.array(numeric[:, k], pa.float64(), mask=mask) if mask.any() else values
                )
            for k in range(8):
                columns[f"count_{k}"] = pa.array(rng.poisson(3 + k, n))
            for k in range(8):
                columns[f"cat_{k}"] = pa.array(rng.choice([f"v{j}" for j in range(12)], n))
            columns["label"] = pa.array(label)
            writer.write_table(pa.table(columns, schema=_schema()))
    return path


def _schema():
    import pyarrow as pa

    fields = [pa.field(f"num_{k}", pa.float64()) for k in range(48)]
    fields += [pa.field(f"count_{k}", pa.int64()) for k in range(8)]
    fields += [pa.field(f"cat_{k}", pa.string()) for k in range(8)]
    return pa.schema([*fields, pa.field("label", pa.int64())])


def images(count: int, folder: Path, size: int = 32, seed: int = 0) -> Path:
    """Writes `count` PNGs into `folder/<class>/` and returns the folder."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(count):
        cls = i % 10
        pixels = rng.integers(0, 96, size=(size, size, 3), dtype=np.uint8)
        y, x = divmod(cls, 4)
        pixels[y * 8 : y * 8 + 8, x * 8 : x * 8 + 8, cls % 3] = 255
        target = folder / f"c{cls}"
        target.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(target / f"{i:06d}.png")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amp_pipeline.benchmarks.scale.data", description=__doc__
    )
    parser.add_argument("--rows", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--images", type=int, nargs="*", default=[2_000, 20_000, 50_000])
    parser.add_argument("--out", type=Path, default=Path("bench/scale-data"))
    args = parser.parse_args(argv)
    for n in args.rows:
        print(tabular(n, args.out / f"tabular_{n}.csv"))
    for n in args.images:
        print(images(n, args.out / f"images_{n}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m amp_pipeline.benchmarks.quality.ratings_curve CSV USER ITEM LABEL [NUMBERS]`: how a
ratings model's error moves with the passes over the train split.

One seeded random 80/20 split of the CSV (rows without a label dropped); the two ID columns
numbered by frequency on the train part (0: missing, the last id: unseen), the numeric columns
standardised. Reports the eval RMSE of always answering the train mean, of the reference bias
model (components/training/reference.py) and of the built-in `mlp` (components/models/builtin.py,
ID embeddings and per-ID biases) after 0.25 to 3 passes at batch 64 and Adam 1e-3, the
pipeline's defaults. In process, float32: it sizes the default training length
(pipeline/config.py AUTO_PASSES), it is not a speed benchmark.
"""

from __future__ import annotations

import argparse

import numpy as np

PASSES = (0.25, 0.5, 0.75, 1, 1.5, 2, 3)


def main(argv: list[str] | None = None) -> int:
    import keras
    import pandas as pd
    import tensorflow as tf

    from amp_pipeline.components.models import builtin
    from amp_pipeline.components.training.reference import Reference

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv")
    p.add_argument("user")
    p.add_argument("item")
    p.add_argument("label")
    p.add_argument("numbers", nargs="?", default="")
    args = p.parse_args(argv)
    numbers = [n for n in args.numbers.split(",") if n]
    data = pd.read_csv(args.csv).dropna(subset=[args.label])
    order = np.random.default_rng(0).permutation(len(data))
    cut = int(0.8 * len(data))
    train, test = data.iloc[order[:cut]], data.iloc[order[cut:]]

    def ids(column: str):
        vocab = {v: i + 1 for i, v in enumerate(train[column].value_counts().index)}
        unseen = len(vocab) + 1
        return [
            np.array([vocab.get(v, unseen) for v in f[column]]) for f in (train, test)
        ], unseen + 1

    (u_train, u_test), u_size = ids(args.user)
    (i_train, i_test), i_size = ids(args.item)
    mean, std = train[numbers].mean(), train[numbers].std()

    def x_of(frame, users, items):
        dense = ((frame[numbers] - mean) / std).fillna(0).to_numpy()
        return np.column_stack([dense, users, items]).astype(np.float32)

    x_train, x_test = x_of(train, u_train, i_train), x_of(test, u_test, i_test)
    y_mean, y_std = train[args.label].mean(), train[args.label].std()
    y_train = ((train[args.label] - y_mean) / y_std).to_numpy(np.float32)
    y_test = test[args.label].to_numpy()
    k = len(numbers)

    def rmse(predicted_z) -> float:
        return float(np.sqrt(np.mean((predicted_z * y_std + y_mean - y_test) ** 2)))

    reference = Reference([k, k + 1], list(range(k))).fit(x_train, y_train)
    print(
        f"{args.csv}: {len(y_train):,} train ratings; eval RMSE of the mean "
        f"{float(np.sqrt(np.mean((y_mean - y_test) ** 2))):.4f}, of the reference baseline "
        f"{rmse(reference.predict(x_test)):.4f}"
    )
    keras.utils.set_random_seed(0)
    categorical = ((args.user, k, k + 1, u_size), (args.item, k + 1, k + 2, i_size))
    model = builtin.build_mlp(k + 2, 0, categorical=categorical)
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    batches = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train))
        .shuffle(len(y_train), seed=0)
        .repeat()
        .batch(64)
    )
    per_pass, done, row = len(y_train) / 64, 0, []
    for passes in PASSES:
        steps = int(passes * per_pass)
        model.fit(batches, steps_per_epoch=steps - done, epochs=1, verbose=0)
        done = steps
        predicted = model.predict(x_test, verbose=0, batch_size=8192).reshape(-1)
        row.append(f"{passes:g} ({steps:,} steps): {rmse(predicted):.4f}")
    print("mlp eval RMSE after " + "; ".join(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The model a device runs: raw columns in, Transform's work folded into the graph with TFLite
builtin ops only, the float32 Keras model, and the answer out (`probabilities` in labels.txt
order, or `predictions` in the label's units).

A phone app has a row, not Transform's output `x`: this graph takes one input per raw column,
by the names of the SavedModel's `predict_raw`:

- a number: float32 [batch], NaN for a missing cell (in an optional column the train mean:
  z-score 0, as Transform imputes; a column never missing in training answers NaN, as
  predict_raw does); a vector [batch, n];
- an image: one float32 [batch, pixels] tensor of raw pixels in the CSV's units, in column order
  (divided by the pixel scale here);
- a string with few values: bytes [batch], "" for missing; looked up in its vocabulary (a string
  hash table, which LiteRT's builtins hold) and one-hot encoded;
- a category: bytes or int64 [batch] ("" or INT64_MISSING for missing); integer IDs are found
  by binary rank in the sorted vocabulary (builtins have string tables only);
- a bag: bytes [batch, values_kept], the cell split at its separator by the app, "" padding;
- text: int64 [batch, max_tokens] token ids (string splitting is no builtin op: the app runs
  the shipped pure-Python tokenizer, tflite/tokenizer.py).

Every constant (means, standard deviations, vocabularies) is read from the Transform output of
the run: numbers by probing Transform's graph with two values per column (the z-score is
affine), vocabularies from its asset files. `describe` says the same for the sidecar, and
`inputs_from_x` turns training rows back into raw inputs for int8 calibration.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from amp_pipeline.components.data import preprocessing, text
from amp_pipeline.core import names
from amp_pipeline.core.data_spec import DataSpec

SIGNATURE = names.DEVICE_SIGNATURE
INT64_MISSING = names.INT64_MISSING  # a missing integer cell, as the device feeds it
PIXELS = "pixels"  # the one input of an image model with one column per pixel


@dataclasses.dataclass(frozen=True)
class DeviceInput:
    """One input of the device signature.

    Attributes:
        name: the signature's input name (the feature's, as predict_raw takes it).
        kind: number, vector, pixels, string, category, bag or text.
        dtype: float32, int64 or string.
        width: values per row (1 for [batch] inputs).
        columns: the CSV columns it is made of (one, except pixels).
        features: the raw features it stands for (one, except pixels).
        optional: whether the column may be missing (its Transform input is VarLen).
        vocabulary: the vocabulary file's lines (string, category, bag, text).
        x_columns: where its values land in `x` ([start, stop)).
    """

    name: str
    kind: str
    dtype: str
    width: int
    columns: tuple[str, ...]
    features: tuple[str, ...]
    optional: bool
    x_columns: tuple[int, int]
    vocabulary: tuple[str, ...] = ()

    @property
    def shape(self) -> list:
        return [None] if self.kind in ("number", "string", "category") else [None, self.width]

    def missing(self):
        """What the device feeds for a missing cell."""
        if self.kind == "text":
            return None
        return {"float32": float("nan"), "int64": int(INT64_MISSING), "string": ""}[self.dtype]


def device_inputs(transform_output: str, spec: DataSpec) -> tuple[DeviceInput, ...]:
    """The raw inputs of `spec`'s device signature, in `x`'s order."""
    import tensorflow as tf
    import tensorflow_transform as tft

    output = tft.TFTransformOutput(transform_output)
    raw = output.raw_feature_spec()
    slices = {name: (start, stop) for name, start, stop in preprocessing.feature_slices(spec)}

    def vocab(name: str) -> tuple[str, ...]:
        path = output.vocabulary_file_by_name(name)
        if path is None:
            raise ValueError(f"{transform_output}: the Transform graph has no vocabulary {name!r}")
        return tuple(text.read_vocabulary(path))

    def one(name: str, kind: str, dtype: str, width: int = 1, vocabulary=()) -> DeviceInput:
        return DeviceInput(
            name, kind, dtype, width, (spec.original_name(name),), (name,),
            isinstance(raw[name], tf.io.VarLenFeature), slices[name], vocabulary,
        )  # fmt: skip

    if spec.image_shape is not None:
        features = tuple(n for n, _ in spec.numeric_features)
        width = sum(n for _, n in spec.numeric_features)
        name = features[0] if len(features) == 1 else PIXELS
        columns = tuple(spec.original_name(n) for n in features)
        optional = any(isinstance(raw[n], tf.io.VarLenFeature) for n in features)
        return (DeviceInput(name, "pixels", "float32", width, columns, features, optional,
                            (0, width)),)  # fmt: skip
    out = [one(n, "number", "float32") for n, length in spec.numeric_features if length == 1]
    out += [
        one(n, "vector", "float32", length) for n, length in spec.numeric_features if length > 1
    ]
    out += [one(n, "string", "string", 1, vocab(n)) for n in spec.string_features]
    for n in spec.categorical_features:
        dtype = "string" if raw[n].dtype == tf.string else "int64"
        out.append(one(n, "category", dtype, 1, vocab(preprocessing.category_vocab(n))))
    out += [one(n, "bag", "string", length, vocab(preprocessing.bag_vocab(n)))
            for n, length in spec.bag_features]  # fmt: skip
    out += [one(n, "text", "int64", spec.max_tokens, vocab(preprocessing.vocab_filename(n)))
            for n in spec.text_features]  # fmt: skip
    return tuple(out)


def _probe_batch(raw_spec: dict, spec: DataSpec, values: dict[str, np.ndarray]) -> dict:
    """Raw Transform inputs for len(rows) rows: the numeric features' given values
    ([rows, length] each), every other feature empty ("" or 0)."""
    import tensorflow as tf

    rows = len(next(iter(values.values())))
    batch = {}
    for name, feature in raw_spec.items():
        if name == spec.label:
            continue
        if name in values:
            v = values[name].astype(feature.dtype.as_numpy_dtype)
        else:
            v = np.full((rows, 1), "" if feature.dtype == tf.string else 0, dtype=object)
            v = v.astype(bytes if feature.dtype == tf.string else feature.dtype.as_numpy_dtype)
        if isinstance(feature, tf.io.VarLenFeature):
            idx = [[r, c] for r in range(rows) for c in range(v.shape[1])]
            batch[name] = tf.SparseTensor(idx, tf.constant(v.reshape(-1)), [rows, v.shape[1]])
        else:
            batch[name] = tf.constant(v.reshape(rows, *[int(d) for d in feature.shape]))
    return batch


def numeric_scale(transform_output: str, spec: DataSpec, inputs) -> dict[str, tuple]:
    """{feature: (mean, std)} of each number and vector, as Transform's graph standardises it:
    z = (v - mean) / std, read by probing it with two values per column (label_scale's method,
    per column: refined three times so that the probes sit a standard deviation apart at the
    mean and float32 cancellation does not move the constants)."""
    import tensorflow_transform as tft

    numeric = [i for i in inputs if i.kind in ("number", "vector")]
    if not numeric:
        return {}
    output = tft.TFTransformOutput(transform_output)
    raw_spec = output.raw_feature_spec()
    is_int = {i.name: raw_spec[i.name].dtype.is_integer for i in numeric}

    def z_of(a: dict, b: dict) -> dict:
        values = {i.name: np.stack([np.full(i.width, a[i.name]), np.full(i.width, b[i.name])])
                  for i in numeric}  # fmt: skip
        x = (
            output.transform_raw_features(
                _probe_batch(raw_spec, spec, values), drop_unused_features=True
            )[names.FEATURES_KEY]
            .numpy()
            .astype(np.float64)
        )
        return {i.name: (x[0, i.x_columns[0]], x[1, i.x_columns[0]]) for i in numeric}

    def solve(a: dict, b: dict) -> dict:
        out = {}
        for name, (z0, z1) in z_of(a, b).items():
            std = (b[name] - a[name]) / (z1 - z0) if z1 != z0 else float("inf")
            out[name] = (a[name] - z0 * std, std)
        return out

    spread = dict.fromkeys(is_int, 1.0)
    scale = solve(dict.fromkeys(is_int, 0.0), spread)
    for _ in range(3):  # a std so large that 0 and 1 read alike: wider probes
        wide = [n for n, (_, s) in scale.items() if not np.isfinite(s)]
        if not wide:
            break
        spread = {n: spread[n] * (1e3 if n in wide else 1.0) for n in spread}
        scale = {**scale, **{n: v for n, v in solve(dict.fromkeys(is_int, 0.0), spread).items()
                             if n in wide}}  # fmt: skip
    for _ in range(3):  # each pass probes nearer the mean: z-scores nearer 0 and 1
        a = {n: float(np.round(m)) if is_int[n] else m for n, (m, _) in scale.items()}
        b = {n: a[n] + (max(1.0, float(np.round(s))) if is_int[n] else s)
             for n, (_, s) in scale.items()}  # fmt: skip
        scale = solve(a, b)
    return scale


def _string_table(keys: list[str], values: list[int], default: int):
    import tensorflow as tf

    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.string), tf.constant(values, tf.int64)
        ),
        default_value=default,
    )


def _sorted_lookup(keys: np.ndarray, ids: np.ndarray, default: int):
    """int64 -> int64 lookup with builtin ops (TFLite's hash tables are keyed by strings):
    the rank of each value in the sorted keys, and whether the key there equals it."""
    import tensorflow as tf

    order = np.argsort(keys)
    k = tf.constant(keys[order], tf.int64)
    v = tf.constant(ids[order], tf.int64)

    def lookup(x):
        rank = tf.reduce_sum(tf.cast(k[None, :] <= x[:, None], tf.int32), axis=1)
        pos = tf.maximum(rank - 1, 0)
        hit = tf.logical_and(rank > 0, tf.equal(tf.gather(k, pos), x))
        return tf.where(
            hit, tf.gather(v, pos), tf.fill(tf.shape(x), tf.constant(default, tf.int64))
        )

    return lookup


class DeviceGraph:
    """The raw-input preprocessing and the model as one function of the device inputs."""

    def __init__(self, model, transform_output: str, spec: DataSpec, x_width: int | None = None):
        """`x_width`: a user preprocessing_fn made `x` (width `x_width`), which no graph here
        can redo: the device input is then `x` itself."""
        self.model = model
        self.spec = spec
        self.inputs: tuple[DeviceInput, ...]
        if x_width is not None:
            self.inputs = (DeviceInput(names.FEATURES_KEY, "x", "float32", x_width, (), (),
                                       False, (0, x_width)),)  # fmt: skip
        else:
            self.inputs = device_inputs(transform_output, spec)
        self.scale = numeric_scale(transform_output, spec, self.inputs)
        self.tables: list[Any] = []  # TensorFlow lookup tables
        self._parts = [self._part(i) for i in self.inputs]

    def _part(self, i: DeviceInput):
        """A function of the input's tensor to its [batch, width] float32 block of `x`."""
        import tensorflow as tf

        if i.kind == "pixels":
            return (
                lambda v: tf.where(tf.math.is_nan(v), tf.zeros_like(v), v) / self.spec.pixel_scale
            )
        if i.kind in ("number", "vector"):
            mean, std = (np.float32(c) for c in self.scale[i.name])
            inv = np.float32(1.0 / std)
            if i.kind == "vector":  # Transform reads a missing element as 0
                return lambda v: (tf.where(tf.math.is_nan(v), tf.zeros_like(v), v) - mean) * inv
            if not i.optional:  # Transform never sees a missing cell here: NaN stays NaN
                return lambda v: ((v - mean) * inv)[:, None]
            # missing: z-score 0 (the mean), as Transform imputes an optional column
            return lambda v: tf.where(tf.math.is_nan(v), tf.zeros_like(v), (v - mean) * inv)[
                :, None
            ]
        if i.kind == "text":
            return lambda v: tf.cast(v, tf.float32)
        if i.kind == "x":
            return lambda v: v
        size = len(i.vocabulary)
        if i.kind == "string":  # one-hot; missing and unseen both read the OOV bucket
            table = _string_table(list(i.vocabulary), list(range(size)), size)
            self.tables.append(table)
            depth = preprocessing.VOCAB_TOP_K + 1
            return lambda v: tf.one_hot(table.lookup(v), depth, dtype=tf.float32)
        oov = size + 1  # categories and bags: 0 missing or padding, 1.. the vocabulary
        if i.dtype == "string":
            keys = [k for k in i.vocabulary if k != ""]
            table = _string_table([*keys, ""], [*(i.vocabulary.index(k) + 1 for k in keys), 0], oov)
            self.tables.append(table)
            if i.kind == "bag":
                return lambda v: tf.cast(table.lookup(v), tf.float32)
            return lambda v: tf.cast(table.lookup(v), tf.float32)[:, None]
        ints = [(int(k), n + 1) for n, k in enumerate(i.vocabulary) if _is_int(k)]
        if i.optional:  # a missing cell is id 0; in a required column -2**63 is just unseen
            ints.append((INT64_MISSING, 0))
        int_keys = np.array([k for k, _ in ints], np.int64)
        ids = np.array([n for _, n in ints], np.int64)
        lookup = _sorted_lookup(int_keys, ids, oov)
        return lambda v: tf.cast(lookup(v), tf.float32)[:, None]

    def signature(self) -> dict:
        import tensorflow as tf

        dtypes = {"float32": tf.float32, "int64": tf.int64, "string": tf.string}
        return {i.name: tf.TensorSpec(i.shape, dtypes[i.dtype], name=i.name) for i in self.inputs}

    def x(self, features: dict):
        import tensorflow as tf

        parts = zip(self.inputs, self._parts, strict=True)
        return tf.concat([part(features[i.name]) for i, part in parts], 1)

    def __call__(self, features: dict) -> dict:
        import tensorflow as tf

        out = tf.cast(self.model(self.x(features), training=False), tf.float32)
        if self.spec.regression:
            return {names.PREDICTIONS: tf.reshape(out, [-1]) * self.spec.label_std
                    + self.spec.label_mean}  # fmt: skip
        return {names.PROBABILITIES: out}

    def write(self, out_dir: str | Path) -> str:
        """The device function as a SavedModel (Keras' ExportArchive: the TFLite converter
        reads it; tf.saved_model.save of a Keras 3 model does not convert on TF 2.16)."""
        import keras

        archive = keras.export.ExportArchive()
        archive.track(self.model)
        for table in self.tables:
            archive.track(table)
        archive.add_endpoint(SIGNATURE, self.__call__, input_signature=[self.signature()])
        archive.write_out(str(out_dir), verbose=False)
        return str(out_dir)

    def sidecar(self) -> dict:
        """What a `model_<variant>.json` says: each input (what an app feeds) and the output."""
        spec = self.spec
        if spec.regression:
            output = {
                "name": names.PREDICTIONS,
                "task": "regression",
                "units": f"the label's ({spec.original_name(spec.label)}), not standardised",
                "label_std": spec.label_std,
            }
        else:
            output = {
                "name": names.PROBABILITIES,
                "task": "classification",
                "classes": list(spec.classes),
                "labels_file": "labels.txt",
            }
        return {
            "inputs": [describe(i, self.scale.get(i.name), spec) for i in self.inputs],
            "output": output,
            "builder": "edge_rows.py: feed(card, row, folder) makes every input of one row",
        }


def _is_int(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def vocabulary_file(i: DeviceInput) -> str | None:
    """The file beside the TFLite models that holds the input's vocabulary."""
    prefix = {"string": "strings", "category": "categories", "bag": "bag", "text": "vocab"}
    return f"{prefix[i.kind]}_{i.name}.txt" if i.kind in prefix else None


def describe(i: DeviceInput, scale: tuple | None, spec: DataSpec) -> dict:
    """One input as the sidecar tells an app to feed it (edge_rows.py reads this)."""
    out: dict[str, Any] = {
        "name": i.name,
        "kind": i.kind,
        "dtype": i.dtype,
        "shape": i.shape,
        "columns": list(i.columns),
        "features": list(i.features),
        "x_columns": list(i.x_columns),  # where Transform puts it in `x`
        "missing": "NaN" if i.dtype == "float32" else i.missing(),
        "optional": i.optional,
    }
    if i.kind == "number":
        out["missing_means"] = (
            "the train mean (as Transform imputes this optional column)"
            if i.optional
            else "nothing: the column had no missing cell in training, a NaN gives a NaN answer"
        )
    if i.kind in ("number", "vector") and scale is not None:
        out["standardised_in_graph"] = {"mean": scale[0], "std": scale[1]}
    if i.kind == "x":
        out["missing"] = None
        out["preprocessing"] = "your module's preprocessing_fn output `x` (run it yourself)"
    if i.kind == "pixels":
        out["pixel_scale_in_graph"] = spec.pixel_scale
        out["image_shape"] = list(spec.image_shape or ())
    if i.vocabulary or i.kind in ("string", "category", "bag", "text"):
        out["vocabulary_file"] = vocabulary_file(i)
        out["vocabulary_size"] = len(i.vocabulary)
    if i.kind == "bag":
        out["separator"] = spec.bag_separator
        out["values_kept"] = i.width
        out["rule"] = "split the cell at `separator`, strip ASCII whitespace, drop empty parts, "
        out["rule"] += 'keep the first `values_kept` and pad with "" (edge_rows.py: bag_values)'
    if i.kind == "text":
        out["max_tokens"] = i.width
        out["tokenizer"] = "tokenizer.py: encode(text, vocabulary, max_tokens)"
        out["padding_id"] = text.PAD_ID
        out["oov_id"] = text.oov_id(len(i.vocabulary))
    return out


def write_vocabularies(inputs, out_dir: str | Path) -> None:
    """Each input's vocabulary beside the TFLite models (one value per line, Transform's)."""
    for i in inputs:
        if file := vocabulary_file(i):
            lines = "".join(f"{v}\n" for v in i.vocabulary)
            (Path(out_dir) / file).write_text(lines, encoding="utf-8")


def inputs_from_x(graph: DeviceGraph, x: np.ndarray) -> list[dict]:
    """Raw device inputs (one row each) that give these rows of `x`: Transform undone, for the
    int8 converter's calibration (its representative rows must be raw, as a device feeds)."""
    rows = []
    for row in np.asarray(x, np.float64):
        feed = {}
        for i in graph.inputs:
            block = row[i.x_columns[0] : i.x_columns[1]]
            if i.kind == "x":
                feed[i.name] = block.astype(np.float32)[None, :]
            elif i.kind == "pixels":
                feed[i.name] = (block * graph.spec.pixel_scale).astype(np.float32)[None, :]
            elif i.kind in ("number", "vector"):
                mean, std = graph.scale[i.name]
                v = (block * std + mean).astype(np.float32)
                feed[i.name] = v if i.kind == "number" else v[None, :]
            elif i.kind == "text":
                feed[i.name] = np.rint(block).astype(np.int64)[None, :]
            elif i.kind == "string":
                k = int(np.argmax(block))
                feed[i.name] = np.array(
                    [(i.vocabulary[k] if k < len(i.vocabulary) else "").encode()]
                )
            else:
                ids = np.rint(block).astype(np.int64)
                values = [i.vocabulary[k - 1] if 0 < k <= len(i.vocabulary) else "" for k in ids]
                if i.dtype == "int64":
                    feed[i.name] = np.array([int(v) if v else INT64_MISSING for v in values])
                elif i.kind == "bag":
                    feed[i.name] = np.array([[v.encode() for v in values]])
                else:
                    feed[i.name] = np.array([v.encode() for v in values])
        rows.append(feed)
    return rows

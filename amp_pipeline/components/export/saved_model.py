"""The serving SavedModel: Transform graph + Keras model behind TF Serving signatures.

Signatures:
- `serving_default`: serialized raw `tf.Example` -> `probabilities`, `class_ids`, `classes`
  (the label names); for a regression label, `predictions` ([batch] float32, in the label's
  own units: the model's standardised output times DataSpec's label_std plus its label_mean).
  Preprocessing runs inside, so serving cannot skew from training.
- `predict_raw`: one tensor per raw feature (the label excluded; [batch] for scalars,
  [batch, n] for vectors) -> the same outputs. For REST JSON clients, MLflow and the gate's
  device parity. In an optional column NaN (floats) and -2**63 (integers) are missing cells,
  imputed as Transform does, as the TFLite models take them.
- `transform_features`: serialized raw `tf.Example` (label included) -> Transform's outputs.
  TFMA calls it to get the class-id label (EvalConfig `preprocessing_function_names`).
- `predict_features`: the Transform output `x` (float32 [batch, width]) -> the same outputs:
  what the TFLite models take, so their parity is measured against this artifact itself.

`artifact_dtypes` reads the written SavedModel back and reports the dtypes it really has (each
signature's inputs and outputs, its variables, and any op computing in bfloat16 or float16):
the dtype check is made on what is served, not on the model in memory.

The trainer hands in the model to serve: by default its float32 rebuild (the same architecture
under the float32 policy with the trained weights:
components/training/model_building.py::float32_rebuild), which runs well on any CPU server; with
`serving_precision="mixed"`, the model as trained.
"""

from __future__ import annotations

import json

import tensorflow as tf
import tensorflow_transform as tft

from amp_pipeline.core.data_spec import DataSpec
from amp_pipeline.core.names import (
    CLASS_IDS,
    CLASSES,
    FEATURES_KEY,
    FEATURES_SIGNATURE,
    INT64_MISSING,
    PREDICTIONS,
    PROBABILITIES,
    RAW_SIGNATURE,
    SERVING_SIGNATURE,
    TRANSFORM_SIGNATURE,
)


def _raw_shape(spec) -> list:
    """[batch] for scalar features (fixed [1] or optional), [batch, n] for vectors."""
    if isinstance(spec, tf.io.FixedLenFeature) and list(spec.shape) != [1]:
        return [None, *spec.shape]
    return [None]


def present_mask(value: tf.Tensor) -> tf.Tensor:
    """[batch] bool: which values of a raw [batch] column are cells, not missing."""
    if value.dtype.is_floating:
        return tf.logical_not(tf.math.is_nan(value))
    if value.dtype.is_integer:
        return tf.not_equal(value, tf.constant(INT64_MISSING, value.dtype))
    return tf.ones_like(value, tf.bool)


class ServingModule(tf.Module):
    """Holds the model, the Transform layer and the label vocabulary for tf.saved_model.save.

    The signatures are traced without AutoGraph: nothing in them branches on a tensor. (The
    export's time went to tf_keras tracing the Transform layer, see __init__; turning AutoGraph
    off alone saved nothing measurable: 16.4 s before and after.)
    """

    def __init__(self, model, transform_output: str, data_spec: DataSpec):
        super().__init__()
        self.model = model
        tft_output = tft.TFTransformOutput(transform_output)
        # The Transform layer is a tf_keras Model: tracked as an attribute, tf_keras' saver
        # traces a default signature and every call function for it (12 s of AutoGraph per
        # export, all unused). What the saved signatures need of it is its loaded transform
        # graph (variables, tables, vocabulary assets), tracked here the way the layer itself
        # tracks it.
        layer = tft_output.transform_features_layer()
        object.__setattr__(self, "tft_layer", layer)
        self.transform_graph = layer._saved_model_loader.__dict__  # noqa: SLF001
        self._raw_spec = tft_output.raw_feature_spec()
        self._serving_spec = {k: v for k, v in self._raw_spec.items() if k != data_spec.label}
        self.class_names = tf.constant(list(data_spec.classes))
        # A regression label's standardisation, undone in every signature.
        self.label_scale = (
            (float(data_spec.label_mean), float(data_spec.label_std))
            if data_spec.regression
            else None
        )
        self.raw_signature = {
            name: tf.TensorSpec(_raw_shape(spec), spec.dtype, name=name)
            for name, spec in self._serving_spec.items()
        }
        self.serve_raw = tf.function(
            self._serve_raw, input_signature=[self.raw_signature], autograph=False
        )
        width = tft_output.transformed_feature_spec()[FEATURES_KEY].shape[-1]
        self.serve_features = tf.function(
            lambda x: self.predict_from_features({FEATURES_KEY: x}),
            input_signature=[tf.TensorSpec([None, width], tf.float32, name="x")],
            autograph=False,
        )

    def _serve_raw(self, features):
        raw = {}
        for name, spec in self._serving_spec.items():
            value = features[name]
            if isinstance(spec, tf.io.VarLenFeature):
                # One value per example, where present: NaN (floats) and INT64_MISSING
                # (integers) are missing cells, as a device feeds them (device_graph.py).
                n = tf.shape(value, out_type=tf.int64)[0]
                present = present_mask(value)
                rows = tf.boolean_mask(tf.range(n), present)
                indices = tf.stack([rows, tf.zeros_like(rows)], axis=1)
                value = tf.SparseTensor(indices, tf.boolean_mask(value, present), [n, 1])
            elif list(spec.shape) == [1]:
                value = tf.reshape(value, [-1, 1])
            raw[name] = value
        return self.predict_from_features(self.tft_layer(raw))

    def predict_from_features(self, transformed: dict) -> dict:
        probs = tf.cast(self.model(transformed[FEATURES_KEY], training=False), tf.float32)
        if self.label_scale is not None:
            mean, std = self.label_scale
            return {PREDICTIONS: tf.reshape(probs, [-1]) * std + mean}
        ids = tf.argmax(probs, axis=-1)
        return {PROBABILITIES: probs, CLASS_IDS: ids, CLASSES: tf.gather(self.class_names, ids)}

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="examples")], autograph=False
    )
    def serve_examples(self, examples):
        raw = tf.io.parse_example(examples, self._serving_spec)
        return self.predict_from_features(self.tft_layer(raw))

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="examples")], autograph=False
    )
    def transform_features(self, examples):
        raw = tf.io.parse_example(examples, self._raw_spec)
        return self.tft_layer(raw)


CLASSES_FILE = "classes.txt"  # components/gate/evidence.py reads it
RAW_COLUMNS_FILE = "raw_columns.json"  # the MLflow model's signature is made from it


def raw_columns(transform_output: str, spec: DataSpec) -> list[dict]:
    """predict_raw's inputs as a client sends them, in the CSV's column order: each feature's
    CSV column, dtype, width and whether it may be missing (an optional column: NaN or -2**63
    there)."""
    raw = tft.TFTransformOutput(transform_output).raw_feature_spec()
    order = [n for n, _ in spec.numeric_features] + list(spec.string_features)
    order += list(spec.categorical_features) + [n for n, _ in spec.bag_features]
    order += list(spec.text_features)
    if spec.csv_format:  # the CSV's own column order where it is known
        order = [n for n in spec.csv_format["names"] if n in raw] + order
    rank = {name: k for k, name in reversed(list(enumerate(order)))}
    return [
        {
            "feature": name,
            "column": spec.original_name(name),
            "dtype": feature.dtype.name,
            "shape": _raw_shape(feature),
            "optional": isinstance(feature, tf.io.VarLenFeature),
        }
        for name, feature in sorted(raw.items(), key=lambda kv: rank.get(kv[0], len(rank)))
        if name != spec.label
    ]


def export_serving_model(model, transform_output: str, export_dir: str, data_spec: dict) -> str:
    """Writes the serving SavedModel to `export_dir` (and, for classes, `classes.txt`: the
    class names in id order) and returns it."""
    spec = DataSpec.from_dict(data_spec)
    module = ServingModule(model, transform_output, spec)
    tf.saved_model.save(
        module,
        export_dir,
        signatures={
            SERVING_SIGNATURE: module.serve_examples,
            RAW_SIGNATURE: module.serve_raw,
            TRANSFORM_SIGNATURE: module.transform_features,
            FEATURES_SIGNATURE: module.serve_features,
        },
    )
    with tf.io.gfile.GFile(f"{export_dir.rstrip('/')}/{RAW_COLUMNS_FILE}", "w") as f:
        f.write(json.dumps(raw_columns(transform_output, spec), indent=2))
    if not spec.regression:  # the class names in id order: the gate matches models by name
        with tf.io.gfile.GFile(f"{export_dir.rstrip('/')}/{CLASSES_FILE}", "w") as f:
            f.write("".join(f"{name}\n" for name in spec.classes))
    return export_dir


REDUCED = {"bfloat16", "half"}


def artifact_dtypes(export_dir: str) -> dict:
    """The dtypes of the SavedModel as written: signatures' inputs and outputs, variables, and
    the ops (in every function of the serving signature's graph) that compute in bfloat16 or
    float16."""
    from collections import Counter

    from tensorflow.core.framework import types_pb2

    loaded = tf.saved_model.load(export_dir)
    signatures = {
        name: {
            "inputs": {k: v.dtype.name for k, v in fn.structured_input_signature[1].items()},
            "outputs": {k: v.dtype.name for k, v in fn.structured_outputs.items()},
        }
        for name, fn in loaded.signatures.items()
    }
    reduced_types = {types_pb2.DT_BFLOAT16, types_pb2.DT_HALF}
    ops: Counter = Counter()
    graph = loaded.signatures[SERVING_SIGNATURE].graph.as_graph_def()
    for function in graph.library.function:
        for node in function.node_def:
            if any(attr.type in reduced_types for attr in node.attr.values()):
                ops[node.op] += 1
    return {
        "signatures": signatures,
        "variables": dict(Counter(dtype.name for dtype in _variable_dtypes(export_dir))),
        "reduced_precision_ops": dict(ops),
    }


def _variable_dtypes(export_dir: str) -> list:
    """The dtype of every variable in the SavedModel's checkpoint (not its bookkeeping)."""
    import os

    reader = tf.train.load_checkpoint(os.path.join(export_dir, "variables", "variables"))
    return [
        dtype
        for name, dtype in reader.get_variable_to_dtype_map().items()
        if name != "_CHECKPOINTABLE_OBJECT_GRAPH"
    ]


def check_artifact(dtypes: dict, serving_precision: str) -> list[str]:
    """What is wrong with the written artifact's dtypes ([] when nothing): probabilities (or
    regression predictions) must
    be float32 in every signature, the variables float32, and a float32 serving model must not
    compute in reduced precision anywhere."""
    problems = []
    for name, sig in dtypes["signatures"].items():
        for key in (PROBABILITIES, PREDICTIONS):
            dtype = sig["outputs"].get(key)
            if dtype is not None and dtype != "float32":
                problems.append(f"signature {name} returns {key} as {dtype}")
    reduced_vars = {k: n for k, n in dtypes["variables"].items() if k in REDUCED}
    if reduced_vars:
        problems.append(f"variables stored in reduced precision: {reduced_vars}")
    if serving_precision == "float32" and dtypes["reduced_precision_ops"]:
        ops = ", ".join(f"{op} x{n}" for op, n in sorted(dtypes["reduced_precision_ops"].items()))
        problems.append(f"the float32 serving model computes in reduced precision: {ops}")
    return problems

"""The device graph (raw columns in, Transform folded in with builtin ops) against Transform's own
graph, and its TFLite conversion run under LiteRT on rows an app builds with tflite/edge_rows.py:
numbers far from 0 and missing, a string with few values (missing, unseen), integer IDs and
string categories (missing, unseen), a bag, and text."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest

from amp_pipeline.components.data import preprocessing
from amp_pipeline.components.export import device_graph, edge_rows
from amp_pipeline.core import names
from amp_pipeline.core.data_spec import DataSpec
from tests.helpers import tf_example

TRAIN = [
    # mass (optional float), year (int), island (few values), user (int ID), city (string
    # category), genres (bag), note (text)
    (3750.0, 2007, "Torgersen", 10, "Paris", "Action|Comedy", "a bright small bird"),
    (None, 2008, "Biscoe", 11, "Lyon", " Drama |Action", "large and loud"),
    (4675.0, 2009, None, 10, "Paris", "Action", "small, quiet bird!"),
    (3250.0, 2007, "Dream", 12, None, "Comedy||", ""),
    (5200.0, 2008, "Biscoe", 999_999_999_999, "Nice", None, "BRIGHT bird"),
    (4100.0, 2009, "Dream", 11, "Paris", "Drama| Comedy", "loud"),
]
SERVED = [
    *TRAIN,
    (None, 2010, None, None, None, None, None),  # every optional cell missing
    (9000.0, 2001, "Atlantis", 77, "Oslo", "Western| Action |", "unseen words only"),
    (0.0, 2008, "", 12, "", "  |  ", "a a a a a a a a a a a a"),  # "" cells, more than max_tokens
]
COLUMNS = ("mass", "year", "island", "user", "city", "genres", "note")


def _spec() -> DataSpec:
    return DataSpec(
        source="t", format="tfrecord", input_base="", input_pattern="", label="species",
        label_kind="string", classes=("Adelie", "Gentoo", "Chinstrap"),
        numeric_features=(("mass", 1), ("year", 1)), string_features=("island",),
        categorical_features=("user", "city"), bag_features=(("genres", 3),),
        text_features=("note",), max_tokens=6, vocab_size=100,
    )  # fmt: skip


def _example(row, species: str | None = "Adelie") -> bytes:
    cells = dict(zip(COLUMNS, row, strict=True))
    return tf_example(species=species, **cells)


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    """A real Transform output of preprocessing_fn over TRAIN."""
    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils
    from tfx_bsl.public import tfxio

    tmp = tmp_path_factory.mktemp("t")
    spec = _spec()
    feature_spec = {
        "mass": tf.io.VarLenFeature(tf.float32),
        "year": tf.io.FixedLenFeature([1], tf.int64),
        "island": tf.io.VarLenFeature(tf.string),
        "user": tf.io.VarLenFeature(tf.int64),
        "city": tf.io.VarLenFeature(tf.string),
        "genres": tf.io.VarLenFeature(tf.string),
        "note": tf.io.VarLenFeature(tf.string),
        "species": tf.io.FixedLenFeature([1], tf.string),
    }
    schema = schema_utils.schema_from_feature_spec(feature_spec)
    source = tfxio.TFExampleBeamRecord(physical_format="inmem", schema=schema)

    def fn(inputs):
        return preprocessing.preprocessing_fn(inputs, {"data_spec": spec.to_dict()})

    with beam.Pipeline() as p, tft_beam.Context(temp_dir=str(tmp / "tmp")):
        raw = p | beam.Create([_example(r) for r in TRAIN]) | source.BeamSource()
        transform_fn = (raw, source.TensorAdapterConfig()) | tft_beam.AnalyzeDataset(fn)
        _ = transform_fn | tft_beam.WriteTransformFn(str(tmp / "transform"))
    # The raw schema beside it, as TFX's Transform writes it.
    metadata_io.write_metadata(
        dataset_metadata.DatasetMetadata(schema), str(tmp / "transform" / "metadata")
    )
    return spec, str(tmp / "transform"), feature_spec, tmp


def _transform_x(transform_output: str, feature_spec: dict, rows) -> np.ndarray:
    import tensorflow as tf
    import tensorflow_transform as tft

    serving = {k: v for k, v in feature_spec.items() if k != "species"}
    parsed = tf.io.parse_example([_example(r, None) for r in rows], serving)
    out = tft.TFTransformOutput(transform_output).transform_raw_features(parsed)
    return out[names.FEATURES_KEY].numpy()


def _row(values) -> dict:
    """A row as a CSV gives it: strings, "" for an empty cell."""
    return {c: "" if v is None else str(v) for c, v in zip(COLUMNS, values, strict=True)}


@pytest.mark.e2e
def test_the_device_inputs_give_transforms_x_on_missing_unseen_and_far_values(transformed):
    import tensorflow as tf

    spec, transform_output, feature_spec, _ = transformed
    width = preprocessing.feature_width(spec)
    graph = device_graph.DeviceGraph(
        keras.Sequential([keras.Input((width,))]), transform_output, spec
    )
    kinds = {i.name: (i.kind, i.dtype) for i in graph.inputs}
    assert kinds == {
        "mass": ("number", "float32"), "year": ("number", "float32"),
        "island": ("string", "string"), "user": ("category", "int64"),
        "city": ("category", "string"), "genres": ("bag", "string"), "note": ("text", "int64"),
    }  # fmt: skip
    expected = _transform_x(transform_output, feature_spec, SERVED)
    card = graph.sidecar()
    tmp = transformed[3] / "kit"
    tmp.mkdir(exist_ok=True)
    device_graph.write_vocabularies(graph.inputs, tmp)
    feeds = [edge_rows.feed(card, _row(r), tmp) for r in SERVED]
    batch = {k: tf.constant(np.concatenate([f[k] for f in feeds])) for k in feeds[0]}
    got = graph.x(batch).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # The missing mass reads the mean (z 0), as Transform imputes; an unseen ID the OOV id.
    assert got[6, 0] == 0.0 and math.isclose(
        card["inputs"][0]["standardised_in_graph"]["mean"], 4195.0, rel_tol=1e-5
    )


@pytest.mark.e2e
def test_a_float32_tflite_of_the_device_graph_answers_as_transform_then_the_model(transformed):
    """Converted with builtins only and run by ai-edge-litert, one row at a time from CSV-like
    cells: the same probabilities as the model on Transform's x."""
    from amp_pipeline.components.export.tflite import LiteRTRunner, export_tflite

    spec, transform_output, feature_spec, tmp = transformed
    width = preprocessing.feature_width(spec)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((width,)), keras.layers.Dense(8, activation="relu"),
         keras.layers.Dense(3, activation="softmax")]
    )  # fmt: skip
    graph = device_graph.DeviceGraph(model, transform_output, spec)
    out = tmp / "tflite"
    out.mkdir(exist_ok=True)
    device_graph.write_vocabularies(graph.inputs, out)
    saved = graph.write(tmp / "device")
    x = _transform_x(transform_output, feature_spec, TRAIN)
    report = export_tflite(
        saved, out, device_graph.inputs_from_x(graph, x), graph.sidecar(),
        variants=("float32", "float16"),
    )  # fmt: skip
    assert all(v["converted"] for v in report["variants"].values()), report
    card = edge_rows.card(out)
    expected = model.predict(_transform_x(transform_output, feature_spec, SERVED), verbose=0)
    for variant, tolerance in (("float32", 1e-5), ("float16", 2e-3)):
        runner = LiteRTRunner(out / f"model_{variant}.tflite")
        got = np.stack([runner(edge_rows.feed(card, _row(r), out)) for r in SERVED])
        np.testing.assert_allclose(got, expected, atol=tolerance)


@pytest.mark.e2e
def test_a_litert_only_app_reads_the_table_from_csv_as_the_model_on_transforms_x(transformed):
    """examples/edge/predict.py in a venv with ai-edge-litert and numpy only, on the folder as
    the trainer ships it (models, sidecars, vocabularies, edge_rows.py, tokenizer.py) and a CSV
    of raw rows with empty cells: the probabilities of the model on Transform's x."""
    import shutil

    from amp_pipeline.components.data import text
    from amp_pipeline.components.export.tflite import export_tflite
    from tests.helpers import litert_only_python, run_edge_app, write_csv

    spec, transform_output, feature_spec, tmp = transformed
    width = preprocessing.feature_width(spec)
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((width,)), keras.layers.Dense(3, activation="softmax")])
    graph = device_graph.DeviceGraph(model, transform_output, spec)
    out = tmp / "app" / "tflite"
    out.mkdir(parents=True)
    device_graph.write_vocabularies(graph.inputs, out)
    shutil.copyfile(edge_rows.__file__, out / "edge_rows.py")
    shutil.copyfile(text.__file__, out / "tokenizer.py")
    x = _transform_x(transform_output, feature_spec, TRAIN)
    export_tflite(graph.write(tmp / "app" / "device"), out, device_graph.inputs_from_x(graph, x),
                  graph.sidecar(), variants=("float32",))  # fmt: skip
    rows = [_row(r) for r in SERVED]
    lines = run_edge_app(litert_only_python(tmp), out, write_csv(tmp / "app" / "rows.csv", rows))
    expected = model.predict(_transform_x(transform_output, feature_spec, SERVED), verbose=0)
    got = np.array([[float(v) for v in line[3:]] for line in lines])
    np.testing.assert_allclose(got, expected, atol=2e-6)
    assert [line[1] for line in lines] == [spec.classes[k] for k in expected.argmax(1)]

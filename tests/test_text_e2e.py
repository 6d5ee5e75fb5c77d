"""A text CSV from `amp-pipeline run` to a gate decision: the BERT-style encoder under AMP, the
pushed model answering raw text over gRPC and REST, and the TFLite model answering through the
project's tokenizer and the vocabulary shipped beside it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.helpers import predict_over_both_protocols, text_rows, write_csv

pytestmark = pytest.mark.e2e
MODEL = "posts"


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("text")
    data = write_csv(root / "posts.csv", text_rows(800))
    out = root / "out"
    result = run_cli(
        "run", "--data", str(data), "--output", str(out), "--train-steps", "60", "--model", "bert",
        "--tflite", "float32,int8", "--tflite-parity-examples", "100", "--speed-rounds", "0",
        "--accuracy-tolerance", "0.05", "--min-speedup", "0",
    )  # fmt: skip
    return data, out, result


def test_a_text_csv_trains_bert_under_amp_and_is_gated(text_run):
    data, out, result = text_run
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["status"] == "promoted"
    assert summary["fp32"]["model"] == "bert" and summary["amp"]["model"] == "bert"
    assert "model bert" in result.stdout and "column 'post' is text" in result.stdout
    assert "no int8 TFLite variant for a text model" in result.stdout
    assert summary["amp"]["accuracy"] > 0.8  # the sentiment words decide the label
    decision = json.loads((out / "decision.json").read_text())
    (rule,) = [r for r in decision["rules"] if r["name"] == "tflite_tokenizer"]
    # The tokenizer and every variant read the stated sample: the first 100 eval examples.
    assert rule["passed"] and rule["value"] == 1.0 and rule["n"] == 100
    (feature,) = decision["tokenizer"]["features"]
    assert feature["identical"] == feature["checked"] == rule["n"] and feature["kind"] == "text"
    assert summary["exports"]["tflite"]["float32"]["n"] == 100
    assert "parity on 100 examples in" in result.stdout
    through = decision["tokenizer"]["tflite_through_tokenizer"]
    assert set(through) == {"float32"}  # int8 was asked for, and is not built for text
    assert through["float32"]["agreeing"] >= 0.99 * through["float32"]["n"]
    assert summary["data"]["text_features"] == ["post"] and summary["data"]["max_tokens"] > 0
    # The vocabulary is tracked with the model in MLflow.
    from mlflow import MlflowClient

    client = MlflowClient(summary["mlflow"]["tracking_uri"])
    parent = client.get_run(summary["mlflow"]["run_id"])
    (export,) = client.search_runs(
        [parent.info.experiment_id],
        f"tags.mlflow.parentRunId = '{parent.info.run_id}' and tags.mlflow.runName = 'export'",
    )
    shipped = {a.path for a in client.list_artifacts(export.info.run_id, "vocabulary")}
    assert shipped == {"vocabulary/vocab_post.txt"}


def test_the_tflite_model_answers_through_the_shipped_tokenizer(text_run):
    """What a device app does: tokenise with components/data/text.py and the vocabulary next to
    the .tflite, put the ids where the sidecar says, run the interpreter."""
    import tensorflow as tf

    from amp_pipeline.components.data import text
    from amp_pipeline.components.export.tflite import TFLiteRunner
    from tests.helpers import csv_rows

    data, out, result = text_run
    assert result.returncode == 0
    pushed = Path(json.loads((out / "run_summary.json").read_text())["exports"]["saved_model"])
    card = json.loads((pushed / "tflite" / "model_float32.json").read_text())
    (spec,) = card["input"]["text"]
    assert spec["column"] == "post" and spec["padding_id"] == 0
    vocabulary = text.read_vocabulary(pushed / "tflite" / spec["vocabulary_file"])
    assert spec["oov_id"] == len(vocabulary) + 1 and "great" in vocabulary
    rows = csv_rows(data)[:200]
    loaded = tf.saved_model.load(str(pushed))
    raw = loaded.signatures["predict_raw"](
        post=tf.constant([r["post"] for r in rows]),
        likes=tf.constant([int(r["likes"]) for r in rows], tf.int64),
    )
    # The tabular part of x (likes, standardised) comes from the SavedModel's Transform graph;
    # the token ids from the device tokenizer.
    from tests.helpers import to_example

    x = loaded.signatures["transform_features"](
        examples=tf.constant([to_example(r, drop="") for r in rows])
    )["x"].numpy()
    start, stop = spec["x_columns"]
    ids = np.array([text.encode(r["post"], vocabulary, spec["max_tokens"]) for r in rows])
    np.testing.assert_array_equal(ids, x[:, start:stop])
    x[:, start:stop] = ids
    probs, _ = TFLiteRunner(pushed / "tflite" / "model_float32.tflite").predict(x)
    agree = np.mean(probs.argmax(axis=1) == raw["class_ids"].numpy().reshape(-1))
    assert agree >= 0.99, agree


def test_the_pushed_model_answers_raw_text_over_grpc_and_rest(text_run, tmp_path):
    import tensorflow as tf

    from tests.helpers import csv_rows

    data, out, result = text_run
    assert result.returncode == 0
    rows = csv_rows(data)[:20]
    rows[0]["post"] = 'Great, "quoted", multi-line\ntext with a comma!'
    rows[1]["post"] = ""
    request = write_csv(
        tmp_path / "rows.csv", [{"post": r["post"], "likes": r["likes"]} for r in rows]
    )
    answers = predict_over_both_protocols(out / "serving" / MODEL, MODEL, request)
    pushed = json.loads((out / "run_summary.json").read_text())["exports"]["saved_model"]
    want = tf.saved_model.load(pushed).signatures["predict_raw"](
        post=tf.constant([r["post"] for r in rows]),
        likes=tf.constant([int(r["likes"]) for r in rows], tf.int64),
    )
    for protocol, answer in answers.items():
        assert answer.returncode == 0, protocol + answer.stdout + answer.stderr
        printed = [line.split()[1] for line in answer.stdout.splitlines()[2:]]
        assert printed == [c.decode() for c in want["classes"].numpy().reshape(-1)], protocol
        assert set(printed) <= {"pos", "neg"}

"""A text CSV from `amp-pipeline run` to a gate decision: the BERT-style encoder under AMP, the
pushed model answering raw text over gRPC and REST, and the TFLite model answering through the
project's tokenizer and the vocabulary shipped beside it."""

from __future__ import annotations

import json
from pathlib import Path

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
    # What a simple model reaches on the same split, beside the twins: TF-IDF + LR.
    base = summary["text_baseline"]
    rules = json.loads((out / "decision.json").read_text())["rules"]
    (parity,) = [r for r in rules if r["name"] == "accuracy_parity"]
    assert base["accuracy"] > 0.8 and base["eval_examples"] == parity["n"]
    assert "  baseline     TF-IDF of words and word pairs + logistic regression" in result.stdout
    assert "- Text baseline, TF-IDF" in (out / "report.md").read_text()
    decision = json.loads((out / "decision.json").read_text())
    (rule,) = [r for r in decision["rules"] if r["name"] == "tflite_tokenizer"]
    # The tokenizer and every variant read the stated sample: the first 100 eval examples.
    assert rule["passed"] and rule["value"] == 1.0 and rule["n"] == 100
    (feature,) = decision["tokenizer"]["features"]
    assert feature["identical"] == feature["checked"] == rule["n"] and feature["kind"] == "text"
    tflite = summary["exports"]["tflite"]
    assert set(tflite) == {"float32"}  # int8 was asked for, and is not built for text
    # The variant ran on LiteRT with the shipped tokenizer's ids and the other columns raw.
    assert tflite["float32"]["n"] == 100 and tflite["float32"]["agreement"] >= 0.99
    assert "parity on 100 raw rows, LiteRT 1 thread" in result.stdout
    assert summary["data"]["text_features"] == ["post"] and summary["data"]["max_tokens"] > 0
    # The pushed tflite/ folder (vocabulary, tokenizer, models) is tracked in MLflow.
    from mlflow import MlflowClient

    client = MlflowClient(summary["mlflow"]["tracking_uri"])
    parent = client.get_run(summary["mlflow"]["run_id"])
    assert parent.data.metrics["text_baseline_accuracy"] == pytest.approx(base["accuracy"])
    (export,) = client.search_runs(
        [parent.info.experiment_id],
        f"tags.mlflow.parentRunId = '{parent.info.run_id}' and tags.mlflow.runName = 'export'",
    )
    shipped = {a.path for a in client.list_artifacts(export.info.run_id, "tflite")}
    assert {"tflite/vocab_post.txt", "tflite/tokenizer.py", "tflite/edge_rows.py"} <= shipped


def test_the_tflite_model_answers_through_the_shipped_tokenizer(text_run, tmp_path):
    """What a device app does, with LiteRT and numpy only: tokenise each post with the shipped
    tokenizer.py and vocabulary, feed the ids and the raw `likes`, and answer as predict_raw."""
    from tests.helpers import check_edge_app, csv_rows, litert_only_python

    data, out, result = text_run
    assert result.returncode == 0
    pushed = Path(json.loads((out / "run_summary.json").read_text())["exports"]["saved_model"])
    card = json.loads((pushed / "tflite" / "model_float32.json").read_text())
    inputs = {i["name"]: i for i in card["inputs"]}
    assert inputs["post"]["kind"] == "text" and inputs["post"]["dtype"] == "int64"
    assert inputs["post"]["padding_id"] == 0 and inputs["likes"]["dtype"] == "float32"
    assert (pushed / "tflite" / "tokenizer.py").is_file()
    rows = csv_rows(data)[:300]
    measured = check_edge_app(litert_only_python(tmp_path), pushed, rows, tmp_path)
    assert measured["float32"]["agreement"] >= 0.99 and measured["float32"]["max_diff"] < 1e-3


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

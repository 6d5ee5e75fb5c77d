"""The data path at its edges, in one run: a regression label beside a text column, rows with
no label, a small string column with values seen once, and a column whose only missing cells
fall into the eval split. The run reaches a decision; the tokenizer check and the TFLite text
parity read the regression output; the unlabelled rows are counted and left out; the rare
values and the missing cells are reported, not fatal."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.helpers import text_rows, write_csv

pytestmark = pytest.mark.e2e
UNLABELLED = 9  # rows 5, 105, ..., 805 have no rating
ONE_OFF = ("kiosk", "fax", "pigeon", "telegram", "radio", "tv")


def eval_rows(path: Path) -> set[int]:
    """The positions (among the labelled rows) ExampleGen puts in the eval split, by the same
    row keys and 4:1 hash buckets (components/data/example_gen.py)."""
    from amp_pipeline.components.data.csv_format import CsvFormat, batches, row_keys, with_required
    from amp_pipeline.components.data.ingest import prepare

    spec = prepare(str(path), "rating", path.parent / "inspect")
    fmt = CsvFormat.from_dict(spec.csv_format)
    keys = np.concatenate([row_keys(with_required(b, fmt)) for b in batches(path, fmt)])
    return set(np.flatnonzero(keys % np.uint64(5) == 4).tolist())


def edge_csv(root: Path) -> tuple[Path, list[str]]:
    """Reviews whose sentiment words and price make the rating; 'price' missing on a few rows
    that land in eval (rows that would land in train get their price back)."""
    rng = np.random.default_rng(3)
    rows = []
    for i, r in enumerate(text_rows(900, seed=3, extra=False)):
        price = float(rng.uniform(5, 50))
        rating = 3 + (1.2 if r["label"] == "pos" else -1.2) + (price - 27) / 30
        rows.append(
            {
                "review": r["post"],
                "price": f"{price:.2f}",
                "channel": ONE_OFF[i // 150] if i % 150 == 77 else ["web", "store", "phone"][i % 3],
                "rating": "" if i % 100 == 5 else f"{rating + rng.normal(0, 0.3):.2f}",
            }
        )
    path = root / "reviews.csv"
    candidates = [i for i in range(900) if i % 100 == 40]
    for r in candidates:
        rows[r]["price"] = ""
    for _ in range(3):  # a filled cell changes that row's key only
        write_csv(path, rows)
        labelled = [i for i in range(900) if rows[i]["rating"]]
        in_eval = {labelled[p] for p in eval_rows(path)}
        for r in candidates:
            if r not in in_eval:
                rows[r]["price"] = "30.00"
    write_csv(path, rows)
    missing = [i for i in candidates if not rows[i]["price"]]
    assert missing and set(missing) <= {labelled[p] for p in eval_rows(path)}
    return path, missing


@pytest.fixture(scope="module")
def edge_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("edges")
    data, missing = edge_csv(root)
    out = root / "out"
    result = run_cli(
        "run", "--data", str(data), "--label", "rating", "--task", "regression",
        "--output", str(out), "--train-steps", "80", "--tflite", "float32",
        "--tflite-parity-examples", "120", "--speed-rounds", "0", "--min-speedup", "0",
        "--accuracy-tolerance", "0.5",
    )  # fmt: skip
    return out, result, missing


def test_text_beside_a_regression_label_reaches_a_decision_read_on_the_regression_output(edge_run):
    out, result, _ = edge_run
    assert result.returncode in (0, 3), result.stdout + result.stderr
    # The exit skips the interpreter's teardown: no TensorFlow destructor tracebacks.
    assert "Exception ignored" not in result.stderr, result.stderr[-2000:]
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["task"] == "regression" and summary["data"]["text_features"] == ["review"]
    # 891 labelled rows: the bag of words and word pairs, the text never fed to a dense layer;
    # its TFLite variant (on the tokenizer's ids, word pairs hashed inside) passes parity.
    assert summary["amp"]["model"] == "ngrams"
    assert "model: a bag of words and word pairs (ngrams)" in result.stdout
    decision = json.loads((out / "decision.json").read_text())
    rules = {r["name"]: r for r in decision["rules"]}
    tokenizer = rules["tflite_tokenizer"]
    assert tokenizer["passed"] and tokenizer["n"] == 120
    # TFLite on LiteRT (the tokenizer's ids, the price raw, NaN where it is missing) predicts
    # the SavedModel's ratings in label units.
    tflite = summary["exports"]["tflite"]["float32"]
    assert tflite["n"] == 120 and tflite["within_1pct_std"] >= 0.999, tflite
    assert summary["fp32"]["metrics"]["r2"] > 0.3  # the words and the price carry the rating


def test_a_litert_only_app_predicts_ratings_from_rows_with_missing_prices(edge_run, tmp_path):
    """The pushed float32 variant, run by examples/edge/predict.py with LiteRT and numpy only on
    raw CSV rows (text, and prices with empty cells), within 1% of the label's standard
    deviation of predict_raw on 99.9% of the rows."""
    from tests.helpers import check_edge_app, csv_rows, litert_only_python

    out, result, missing = edge_run
    assert result.returncode in (0, 3), result.stdout + result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    trained = next((out / "tfx" / "TrainerAmp").rglob("Format-Serving"))
    pushed = Path(summary["exports"]["saved_model"] or trained)
    rows = csv_rows(Path(summary["data"]["source"]))
    assert sum(1 for r in rows if r["price"] == "") >= len(missing) > 0
    std = json.loads((pushed / "tflite" / "model_float32.json").read_text())["output"]["label_std"]
    measured = check_edge_app(litert_only_python(tmp_path), pushed, rows, tmp_path, label_std=std)
    assert measured["float32"]["within_1pct_std"] >= 0.999, measured


def test_unlabelled_rows_are_counted_and_left_out(edge_run):
    out, result, _ = edge_run
    assert (
        f"note: {UNLABELLED} of 900 rows have no label 'rating' and are left out" in result.stdout
    )
    data = json.loads((out / "run_summary.json").read_text())["data"]
    assert data["unlabelled_rows"] == UNLABELLED and data["rows"] == 900
    assert "have no label 'rating'" in (out / "report.md").read_text()


def test_rare_values_and_eval_only_missing_cells_are_reported_not_fatal(edge_run):
    out, result, missing = edge_run
    data = json.loads((out / "run_summary.json").read_text())["data"]
    tolerated = {(t["split"], t["feature"]) for t in data["tolerated"]}
    assert ("eval", "channel") in tolerated and ("eval", "price") in tolerated
    assert data["missing"]["price"] == len(missing)
    assert "validation   split 'eval', 'channel': values the train split does not have" in (
        result.stdout
    )
    assert (
        "feature 'price': missing cells where the train split had none"
        in (out / "report.md").read_text()
    )

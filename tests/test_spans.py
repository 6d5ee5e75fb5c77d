"""Spans (components/data/spans/selection.py), their ExampleGen config, the warm start's remapping
(components/training/warm_start.py) and the drift between spans (components/data/spans/drift.py),
without a pipeline run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from amp_pipeline.components.data import ingest
from amp_pipeline.components.data.spans import drift as span_drift
from amp_pipeline.components.data.spans import selection as spans
from amp_pipeline.components.training import warm_start
from amp_pipeline.components.training.options import TrainSpec
from amp_pipeline.core.errors import InputError


def _span_folders(root: Path, numbers, rows: int = 40, name: str = "span-{:02d}") -> str:
    rng = np.random.default_rng(0)
    for n in numbers:
        folder = root / name.format(n)
        folder.mkdir(parents=True)
        lines = ["x,colour,y"] + [
            f"{rng.normal() + n:.3f},{rng.choice(['red', 'blue'])},{int(rng.integers(2))}"
            for _ in range(rows)
        ]
        (folder / "part.csv").write_text("\n".join(lines) + "\n")
    return str(root / "span-{SPAN}" / "*.csv")


def test_the_newest_span_by_default_a_named_one_and_a_rolling_window(tmp_path):
    pattern = _span_folders(tmp_path, [1, 2, 3, 5])
    newest = spans.select(pattern)
    assert newest.spans == (5,) and newest.available == (1, 2, 3, 5)
    # The files write two digits: TFX is given {SPAN:2}, which it pads as the files are.
    assert newest.pattern == "span-{SPAN:2}/*.csv" and newest.resolved(0) == "span-05/*.csv"
    assert spans.select(pattern, span=2).files == ((str(tmp_path / "span-02" / "part.csv"),),)
    window = spans.select(pattern, span=3, rolling=3)
    assert window.spans == (1, 2, 3) and window.describe() == "spans 1-3 (of 1-3, 5)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"span": 4}, "--span 4: no files for span 4 under --data"),
        ({"rolling": 2}, "--rolling-spans 2: spans 4-5 are needed and 4 is missing"),
        ({"rolling": 0}, "--rolling-spans 0: must be at least 1"),
    ],
)
def test_a_missing_span_or_a_gap_is_one_line_naming_the_flag(tmp_path, kwargs, message):
    pattern = _span_folders(tmp_path, [1, 2, 3, 5])
    with pytest.raises(InputError, match="^" + message.replace("(", r"\(")):
        spans.select(pattern, **kwargs)


def test_a_pattern_that_matches_nothing_or_uses_span_twice(tmp_path):
    _span_folders(tmp_path, [1])
    with pytest.raises(InputError, match="the pattern matches no files"):
        spans.select(str(tmp_path / "day-{SPAN}" / "*.csv"))
    with pytest.raises(InputError, match="write {SPAN} once"):
        spans.select(str(tmp_path / "span-{SPAN}" / "{SPAN}.csv"))


def test_versions_take_the_highest_one_per_span(tmp_path):
    for span, version in ((1, 1), (1, 2), (2, 1)):
        folder = tmp_path / f"span-{span}" / f"v{version}"
        folder.mkdir(parents=True)
        (folder / "a.csv").write_text("x,y\n1,0\n")
    chosen = spans.select(str(tmp_path / "span-{SPAN}" / "v{VERSION}" / "*.csv"), span=1)
    assert chosen.versions == (2,) and chosen.resolved(0) == "span-1/v2/*.csv"


def test_prepare_reads_every_selected_span_and_records_them(tmp_path):
    pattern = _span_folders(tmp_path, [1, 2, 3])
    data = ingest.prepare(pattern, "y", tmp_path / "work", rolling_spans=2)
    assert data.rows == 80 and data.spans["spans"] == [2, 3]
    assert data.input_base == str(tmp_path) and data.input_pattern == "span-{SPAN:2}/*.csv"
    assert data.spans["resolved"] == ["span-02/*.csv", "span-03/*.csv"]
    with pytest.raises(InputError, match=r"^--span: --data .* has no \{SPAN\}"):
        ingest.prepare(str(tmp_path / "span-01" / "part.csv"), "y", tmp_path / "w", span=1)


def test_example_gen_reads_the_newest_span_through_tfx_and_the_earlier_ones_beside_it(tmp_path):
    from amp_pipeline.components.data.example_gen import EARLIER_SPANS_KEY
    from amp_pipeline.pipeline.pipeline import make_example_gen

    pattern = _span_folders(tmp_path, [1, 2, 3])
    data = ingest.prepare(pattern, "y", tmp_path / "w", rolling_spans=3)
    node = make_example_gen(data, data.input_base, data.input_pattern)
    properties = node.exec_properties
    static = json.loads(properties["range_config"])["static_range"]
    assert static == {"start_span_number": 3, "end_span_number": 3}
    earlier = json.loads(properties[EARLIER_SPANS_KEY])
    assert earlier["patterns"] == ["span-01/*.csv", "span-02/*.csv"]


def test_rows_are_remapped_by_value_new_values_start_from_the_out_of_vocabulary_row():
    before = ["a", "b", "c"]  # ids: 0 missing, 1-3, 4 out of vocabulary
    table = np.arange(5, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)
    now = ["c", "a", "d", "e"]  # ids: 0, 1-4, 5
    fresh = np.full((6, 2), -1.0, np.float32)
    out, counts = warm_start.remap_rows(table, fresh, before, now)
    assert out[:, 0].tolist() == [0, 3, 1, 4, 4, 4]
    assert counts == {"kept": 2, "new": 2}


def test_hashed_rows_carry_over_only_when_the_vocabulary_is_unchanged():
    table = np.arange(8, dtype=np.float32)[:, None]  # 0, a, b, oov, then 4 bigram buckets
    same, _ = warm_start.remap_rows(table, np.zeros_like(table), ["a", "b"], ["a", "b"])
    assert same[:, 0].tolist() == list(range(8))
    moved, _ = warm_start.remap_rows(table, np.zeros_like(table), ["a", "b"], ["b", "a"])
    assert moved[:, 0].tolist() == [0, 2, 1, 3, 0, 0, 0, 0]


def _spec(tmp_path: Path, **changes) -> TrainSpec:
    data = {"numeric_features": [["x", 1]], "categorical_features": ["colour"], "task":
            "classification", "classes": ["0", "1"]}  # fmt: skip
    base = {
        "train_files": (), "eval_files": (), "transform_output": "", "serving_model_dir": "",
        "model_run_dir": str(tmp_path), "data_spec": data, "model": "mlp",
    }  # fmt: skip
    data_changes = changes.pop("data", {})
    return TrainSpec(**{**base, **changes, "data_spec": {**data, **data_changes}})


def test_warm_start_says_why_it_trains_from_scratch(tmp_path):
    warm_start.production_weights.cache_clear()
    assert warm_start.prepare(_spec(tmp_path, warm_start="off"))["reason"] == (
        "from scratch: --warm-start off"
    )
    assert warm_start.prepare(_spec(tmp_path))["reason"] == (
        f"from scratch: {warm_start.AUTO_WITHOUT_SPANS}"  # auto, a file: a rerun stays cached
    )
    warm_start.production_weights.cache_clear()
    spanned = _spec(tmp_path, data={"spans": {"spans": [2]}})
    assert warm_start.prepare(spanned)["reason"] == "from scratch: no production model yet"
    assert warm_start.prepare(_spec(tmp_path, warm_start="on"))["reason"] == (
        "from scratch: no production model yet"
    )
    run = tmp_path / "root" / "TrainerAmp" / "model_run" / "7"
    serving = tmp_path / "root" / "TrainerAmp" / "model" / "7" / "Format-Serving"
    assert warm_start.production_run_dir(str(serving)) == run
    reason = warm_start.prepare(_spec(tmp_path, base_model=str(serving), warm_start="on"))["reason"]
    assert reason == f"from scratch: the production model's training record is not in {run}"
    production, now = _spec(tmp_path), _spec(tmp_path, data={"categorical_features": []})
    assert "categorical features changed" in warm_start.mismatch(production, now)
    assert "model is 'mlp', this run's 'dlrm'" in warm_start.mismatch(
        production, _spec(tmp_path, model="dlrm")
    )
    warm_start.production_weights.cache_clear()


def test_drift_between_the_newest_span_and_the_one_before(tmp_path):
    pattern = _span_folders(tmp_path, [1, 2], rows=400)  # x's mean moves by 1 from span to span
    data = ingest.prepare(pattern, "y", tmp_path / "w")
    result = span_drift.compare(data, tmp_path / "out")
    assert (result["span"], result["previous_span"]) == (2, 1)
    by_name = {f["feature"]: f for f in result["features"]}
    assert by_name["x"]["comparator"] == "Jensen-Shannon" and by_name["x"]["drifted"]
    assert by_name["colour"]["comparator"] == "L-infinity" and not by_name["colour"]["drifted"]
    assert result["drifted"] == ["x"]
    assert "DRIFT in 1 of 3 columns: x Jensen-Shannon" in span_drift.summary_line(result)
    with pytest.raises(InputError, match=r"^--drift fail: span 2 vs span 1: DRIFT"):
        span_drift.check(result, "fail")
    span_drift.check(result, "warn")
    first = span_drift.compare(ingest.prepare(pattern, "y", tmp_path / "w", span=1), tmp_path)
    assert first["skipped"] == "span 1 is the first span: nothing to compare with"

"""AnomalyCheck on TFDV's own findings: a rare value of a small string column and missing cells
that fall into the eval split only are chance, not drift; a closed column, a type change and a
missing column still stop the run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from amp_pipeline.components.data.anomaly_check import curate, tolerate
from amp_pipeline.components.data.ingest import prepare
from amp_pipeline.components.data.inspection import CsvOptions
from amp_pipeline.core.errors import InputError


def _findings(train: pd.DataFrame, evaluation: pd.DataFrame):
    """SchemaGen's schema (train only, shapes inferred) and ExampleValidator's anomalies."""
    import tensorflow_data_validation as tfdv

    schema = tfdv.infer_schema(
        tfdv.generate_statistics_from_dataframe(train), infer_feature_shape=True
    )
    anomalies = tfdv.validate_statistics(
        tfdv.generate_statistics_from_dataframe(evaluation), schema
    )
    return schema, anomalies


def _frames():
    rng = np.random.default_rng(0)
    train = pd.DataFrame(
        {
            "x": rng.normal(size=400),
            "color": [["red", "blue", "green"][i % 3] for i in range(400)],
            "size": rng.normal(size=400),
        }
    )
    evaluation = pd.DataFrame(
        {
            "x": rng.normal(size=100),
            "color": ["red", "blue", "purple"] + ["green"] * 97,  # purple: seen once, in eval
            "size": [np.nan] + list(rng.normal(size=99)),  # the file's one missing cell
        }
    )
    return train, evaluation


def test_a_rare_value_and_eval_only_missing_cells_are_tolerated_and_the_column_made_optional():
    import tensorflow_data_validation as tfdv

    train, evaluation = _frames()
    schema, anomalies = _findings(train, evaluation)
    assert {"color", "size"} <= set(anomalies.anomaly_info)  # what stopped runs before
    tolerated = tolerate(anomalies, vocabulary={"color"}, optional={"size"})
    assert {t["feature"] for t in tolerated} == {"color", "size"}
    assert "out-of-vocabulary" in next(t for t in tolerated if t["feature"] == "color")["finding"]
    assert not anomalies.anomaly_info
    # The schema Transform reads: 'size' optional, so the eval split validates clean.
    assert curate(schema, {"size"}) == ["size"]
    again = tfdv.validate_statistics(tfdv.generate_statistics_from_dataframe(evaluation), schema)
    assert "size" not in again.anomaly_info


def test_a_closed_column_a_column_with_no_missing_cells_and_a_type_change_still_stop():
    train, evaluation = _frames()
    evaluation["x"] = ["a"] * 100  # numbers became text
    _, anomalies = _findings(train, evaluation)
    # 'color' closed (not a vocabulary feature here), 'size' complete in the file by the input
    # check's count (not optional): both stay, and so does the type change.
    assert tolerate(anomalies, vocabulary=set(), optional=set()) == []
    assert {"x", "color", "size"} <= set(anomalies.anomaly_info)


def test_closed_columns_name_string_or_category_columns(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "x,color,label\n" + "".join(f"{i % 7},{'ab'[i % 2]},{i % 2}\n" for i in range(40))
    )
    spec = prepare(
        str(path), "label", tmp_path / "w", csv_options=CsvOptions(closed_columns=("color",))
    )
    assert spec.closed_features == ("color",)
    with pytest.raises(
        InputError, match=r"--closed-columns x: column 'x' is not a string or category"
    ):
        prepare(str(path), "label", tmp_path / "w2", csv_options=CsvOptions(closed_columns=("x",)))


def test_a_rare_value_and_a_missing_cell_in_one_column_are_tolerated_together():
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    result = anomalies_pb2.Anomalies()
    info = result.anomaly_info["color"]
    info.reason.add(type=anomalies_pb2.AnomalyInfo.ENUM_TYPE_UNEXPECTED_STRING_VALUES)
    info.reason.add(type=anomalies_pb2.AnomalyInfo.FEATURE_TYPE_LOW_FRACTION_PRESENT)
    (item,) = tolerate(result, vocabulary={"color"}, optional={"color"})
    assert "out-of-vocabulary" in item["finding"] and "missing cells" in item["finding"]
    # Not optional (complete in the file): the missing cell is a real break.
    again = anomalies_pb2.Anomalies()
    again.anomaly_info["color"].CopyFrom(info)
    assert tolerate(again, vocabulary={"color"}, optional=set()) == []

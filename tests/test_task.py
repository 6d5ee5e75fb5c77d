"""The task a label asks for: classes, or a number to predict (`--task auto|classification|
regression`), decided in the input check's one streaming pass."""

import numpy as np
import pytest

from amp_pipeline.components.data import inspection
from amp_pipeline.components.data.ingest import prepare
from amp_pipeline.components.data.inspection import CsvOptions
from amp_pipeline.components.data.report import format_data
from amp_pipeline.core.errors import InputError


def _csv(path, labels, header="x,y"):
    rng = np.random.default_rng(0)
    lines = [header] + [f"{rng.normal():.3f},{v}" for v in labels]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_price_with_many_integer_values_is_a_regression_target(tmp_path):
    prices = np.random.default_rng(1).integers(300, 19_000, 3000)
    spec = prepare(_csv(tmp_path / "gems.csv", prices), "y", tmp_path / "w")
    assert spec.task == "regression" and spec.regression
    assert spec.classes == () and spec.class_counts == {} and spec.label_kind == "float"
    assert spec.label_mean == pytest.approx(prices.mean())
    assert spec.label_std == pytest.approx(prices.std())
    assert spec.label_range == (prices.min(), prices.max())
    assert "distinct integers, more than 100" in spec.task_reason
    shown = format_data(spec)
    assert "3,000 rows, regression" in shown and "task         regression (--task auto" in shown
    # Asked for, the same column trains as classes.
    classes = prepare(
        _csv(tmp_path / "gems.csv", prices),
        "y",
        tmp_path / "w",
        csv_options=CsvOptions(task="classification"),
    )
    assert classes.task == "classification"
    assert classes.num_classes == len(set(prices.tolist()))


def test_half_star_ratings_are_regression_and_a_few_integers_stay_classes(tmp_path):
    ratings = np.random.default_rng(2).integers(1, 11, 500) / 2
    spec = prepare(_csv(tmp_path / "r.csv", ratings), "y", tmp_path / "w")
    assert spec.task == "regression" and "non-integer" in spec.task_reason
    stars = prepare(_csv(tmp_path / "s.csv", (ratings * 2).astype(int)), "y", tmp_path / "w")
    assert stars.task == "classification" and stars.num_classes == 10
    assert "at most 100" in stars.task_reason


def test_the_label_figures_are_exact_over_many_blocks():
    """Sums shifted by the first value: a large offset does not cancel the variance away."""
    import pyarrow as pa

    values = 1e9 + np.random.default_rng(3).normal(0, 2.5, 30_000)
    figures = inspection.LabelFigures()
    for block in np.array_split(values, 7):
        figures.add(pa.array([repr(v) for v in block]))
    assert figures.mean == pytest.approx(values.mean(), abs=1e-6)
    assert figures.std == pytest.approx(values.std(), rel=1e-6)
    assert figures.distinct is None  # 30,000 distinct values: no longer counted as classes
    assert figures.integers is False and figures.non_finite == 0


@pytest.mark.parametrize(
    ("labels", "options", "message"),
    [
        (["1.5", "2", "abc", "3"], CsvOptions(task="regression"), "line 4 holds 'abc'"),
        (["1.5", "2", "inf", "3"], CsvOptions(), "holds 'inf' on line 4; regression needs finite"),
        (["7", "7", "7", "7"], CsvOptions(task="regression"), r"is constant \(7\)"),
    ],
)
def test_a_label_regression_cannot_use_is_one_line_naming_it(tmp_path, labels, options, message):
    with pytest.raises(InputError, match=message) as error:
        prepare(_csv(tmp_path / "b.csv", labels), "y", tmp_path / "w", csv_options=options)
    assert "label 'y'" in str(error.value) and "\n" not in str(error.value)


def test_too_many_classes_to_count_is_one_line(tmp_path):
    labels = [f"user{i}" for i in range(inspection.MAX_LABEL_VALUES + 5)]
    with pytest.raises(InputError, match="more than 10,000 distinct values: too many classes$"):
        prepare(_csv(tmp_path / "c.csv", labels), "y", tmp_path / "w")


def test_an_ordered_integer_label_trained_as_classes_suggests_regression(tmp_path):
    from amp_pipeline.components.data.ingest import prepare

    path = tmp_path / "stars.csv"
    path.write_text("x,stars\n" + "".join(f"{i % 13},{1 + i % 5}\n" for i in range(400)))
    spec = prepare(str(path), "stars", tmp_path / "w")
    assert spec.task == "classification"
    assert (
        "label 'stars' holds the integers 1 to 5 and is trained as 5 classes; if they are an "
        "ordered scale (stars, grades), it can be trained as a number with --task regression"
    ) in spec.notices
    for name, classes in (("binary", 2), ("digits", 10)):  # two classes; ten digits
        path = tmp_path / f"{name}.csv"
        path.write_text("x,y\n" + "".join(f"{i % 13},{i % classes}\n" for i in range(400)))
        notices = prepare(str(path), "y", tmp_path / name).notices
        assert not any("--task regression" in n for n in notices), name

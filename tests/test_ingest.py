"""Input checking: every bad input gets one line naming the file, column or flag."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from amp_pipeline.components.data.ingest import prepare
from amp_pipeline.components.data.inspection import CsvOptions
from amp_pipeline.components.data.record_inputs import write_if_changed
from amp_pipeline.core.errors import InputError


def write(path, text):
    path.write_text(text)
    return str(path)


def test_embedded_digits_are_written_once_and_described(tmp_path):
    spec = prepare(None, "label", tmp_path)
    target = tmp_path / "digits" / "digits.csv"
    assert spec.rows == 1797
    assert spec.classes == tuple(str(i) for i in range(10))
    assert spec.image_shape == (8, 8, 1)
    assert spec.pixel_scale == 16.0
    mtime = target.stat().st_mtime_ns
    prepare(None, "label", tmp_path)
    assert target.stat().st_mtime_ns == mtime  # unchanged input keeps TFX's cache valid


def test_csv_with_strings_missing_values_and_string_label(tmp_path):
    rows = ["age,city,income,label"]
    rng = np.random.default_rng(0)
    for i in range(40):
        age = "" if i % 7 == 0 else str(int(rng.integers(18, 80)))
        rows.append(
            f"{age},{['paris', 'oslo', 'rome'][i % 3]},{rng.normal():.3f},"
            f"{'yes' if i % 2 else 'no'}"
        )
    spec = prepare(write(tmp_path / "t.csv", "\n".join(rows) + "\n"), "label", tmp_path / "w")
    assert spec.numeric_features == (("age", 1), ("income", 1))
    assert spec.string_features == ("city",)
    assert (spec.label_kind, spec.classes) == ("string", ("no", "yes"))
    assert spec.image_shape is None


def test_integer_labels_are_ordered_numerically(tmp_path):
    text = "x,label\n" + "".join(f"{i},{i % 11}\n" for i in range(33))
    spec = prepare(write(tmp_path / "t.csv", text), "label", tmp_path)
    assert spec.label_kind == "int"
    assert spec.classes == tuple(str(i) for i in range(11))


def test_missing_path(tmp_path):
    with pytest.raises(InputError, match=r"^--data .*nope\.csv: no such file or directory$"):
        prepare(str(tmp_path / "nope.csv"), "label", tmp_path)


def test_empty_csv(tmp_path):
    path = write(tmp_path / "empty.csv", "")
    with pytest.raises(InputError, match=r"empty\.csv: the CSV file is empty"):
        prepare(path, "label", tmp_path)


def test_header_only_csv(tmp_path):
    path = write(tmp_path / "h.csv", "a,label\n")
    with pytest.raises(InputError, match=r"h\.csv: the CSV file has a header but no rows"):
        prepare(path, "label", tmp_path)


def test_missing_label_column(tmp_path):
    path = write(tmp_path / "t.csv", "a,b\n1,2\n3,4\n")
    with pytest.raises(InputError, match=r"t\.csv: no label column 'target' \(columns: a, b\)"):
        prepare(path, "target", tmp_path)


def test_single_class_label(tmp_path):
    path = write(tmp_path / "t.csv", "a,label\n1,cat\n2,cat\n3,cat\n")
    with pytest.raises(InputError, match=r"t\.csv: label 'label' has a single class \('cat'\)"):
        prepare(path, "label", tmp_path)


def test_text_in_numeric_column(tmp_path):
    path = write(tmp_path / "t.csv", "a,b,label\n1,x,0\n2,y,1\n3,z,0\nabc,w,1\n5,v,0\n")
    with pytest.raises(
        InputError,
        match=r"t\.csv: column 'a' is numeric but line 5 holds "
        r"text 'abc'",
    ):
        prepare(path, "label", tmp_path)


def _unlabelled_csv(tmp_path, rows: int = 300_000):
    """Labels missing on rows 10, 1010, 2010, ... (past the first Arrow block too) and on the
    last row, written as an empty cell or as NA."""
    lines = ["a,label"]
    for i in range(rows):
        missing = i % 1000 == 10 or i == rows - 1
        lines.append(f"{i % 97 / 2},{('' if i % 2 else 'NA') if missing else i % 2}")
    return write(tmp_path / "t.csv", "\n".join(lines) + "\n"), rows // 1000 + 1


def test_rows_without_a_label_are_counted_over_the_whole_file_and_left_out(tmp_path):
    from amp_pipeline.components.data.csv_format import CsvFormat, batches, with_required

    path, missing = _unlabelled_csv(tmp_path)
    spec = prepare(path, "label", tmp_path / "w")
    assert spec.unlabelled_rows == missing == 301 and spec.rows == 300_000
    assert spec.notices[0] == (
        "301 of 300,000 rows have no label 'label' and are left out before the split "
        "(--missing-label error stops instead)"
    )
    assert "label" not in spec.missing and spec.classes == ("0", "1")
    # What ExampleGen reads: the labelled rows only.
    fmt = CsvFormat.from_dict(spec.csv_format)
    kept = sum(with_required(b, fmt).num_rows for b in batches(Path(path), fmt))
    assert kept == 300_000 - 301


def test_missing_label_error_stops_with_the_true_count_and_the_first_line(tmp_path):
    path, _ = _unlabelled_csv(tmp_path)
    with pytest.raises(
        InputError,
        match=r"t\.csv: line 12: label column 'label' is empty on 301 of 300,000 rows \(the "
        r"first\); --missing-label drop leaves them out",
    ):
        prepare(path, "label", tmp_path / "w", csv_options=CsvOptions(missing_label="error"))


def test_a_label_empty_on_every_row_stops(tmp_path):
    path = write(tmp_path / "t.csv", "a,label\n1,\n2,\n")
    with pytest.raises(InputError, match=r"line 2: label column 'label' is empty on every row"):
        prepare(path, "label", tmp_path)


def test_gzipped_csv(tmp_path):
    raw = "a,label\n" + "".join(f"{i},{i % 2}\n" for i in range(10))
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress(raw.encode()))
    spec = prepare(str(tmp_path / "t.csv.gz"), "label", tmp_path / "w")
    assert spec.rows == 10 and spec.format == "csv"


def _image_folder(root, size=(6, 6)):
    from PIL import Image

    rng = np.random.default_rng(1)
    for cls in ("cats", "dogs"):
        (root / cls).mkdir(parents=True)
        for i in range(4):
            pixels = rng.integers(0, 255, size=(*size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / cls / f"{i}.png")
    return root


def test_image_folder_becomes_tfrecords(tmp_path):
    folder = _image_folder(tmp_path / "imgs")
    spec = prepare(str(folder), "label", tmp_path / "w", image_size=8)
    assert spec.format == "tfrecord"
    assert spec.classes == ("cats", "dogs")
    assert spec.image_shape == (8, 8, 3)
    assert spec.rows == 8
    written = tmp_path / "w" / "images" / "images.tfrecord"
    assert written.stat().st_size > 8 * 8 * 8 * 3
    mtime = written.stat().st_mtime_ns
    prepare(str(folder), "label", tmp_path / "w", image_size=8)
    assert written.stat().st_mtime_ns == mtime


def test_unreadable_image(tmp_path):
    folder = _image_folder(tmp_path / "imgs")
    (folder / "dogs" / "broken.png").write_bytes(b"not a png at all")
    with pytest.raises(InputError, match=r"dogs/broken\.png: cannot read image"):
        prepare(str(folder), "label", tmp_path / "w")


def test_image_folder_with_one_class(tmp_path):
    folder = _image_folder(tmp_path / "imgs")
    import shutil

    shutil.rmtree(folder / "dogs")
    with pytest.raises(InputError, match=r"single class \('cats'\)"):
        prepare(str(folder), "label", tmp_path / "w")


def test_tfrecord_input(tmp_path):
    import tensorflow as tf

    path = tmp_path / "data.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(12):
            ex = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "f": tf.train.Feature(float_list=tf.train.FloatList(value=[i * 0.5])),
                        "tag": tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[b"a" if i % 2 else b"b"])
                        ),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3])),
                    }
                )
            )
            w.write(ex.SerializeToString())
    spec = prepare(str(path), "label", tmp_path)
    assert spec.format == "tfrecord" and spec.rows == 12
    assert spec.numeric_features == (("f", 1),)
    assert spec.string_features == ("tag",)
    assert spec.classes == ("0", "1", "2")


def test_not_a_tfrecord(tmp_path):
    path = tmp_path / "junk.tfrecord"
    path.write_bytes(b"\x00garbage that is not a record" * 3)
    with pytest.raises(InputError, match=r"junk\.tfrecord: not a readable TFRecord file"):
        prepare(str(path), "label", tmp_path)


def test_write_if_changed(tmp_path):
    p = tmp_path / "f"
    assert write_if_changed(p, b"a")
    assert not write_if_changed(p, b"a")
    assert write_if_changed(p, b"b") and p.read_bytes() == b"b"

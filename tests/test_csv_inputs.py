"""CSV as people write it: the input check on small files built here, and one 1M-row file."""

import gzip

import numpy as np
import pytest

from amp_pipeline.components.data.ingest import prepare
from amp_pipeline.components.data.inspection import CsvOptions
from amp_pipeline.core.errors import InputError


def write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding))
    return str(path)


def rows(n, make):
    return "".join(make(i) for i in range(n))


def test_r_style_missing_values_are_missing_not_text(tmp_path):
    text = "age,score,label\n" + rows(
        40,
        lambda i: f"{'NA' if i % 5 == 0 else 20 + i},{'N/A' if i % 7 == 0 else i * 0.5},{i % 2}\n",
    )
    spec = prepare(write(tmp_path / "r.csv", text), "label", tmp_path / "w")
    assert spec.numeric_features == (("age", 1), ("score", 1))
    assert spec.missing == {"age": 8, "score": 6}


def test_na_values_replaces_the_default_set(tmp_path):
    text = "x,label\n" + rows(30, lambda i: f"{'-999' if i % 3 == 0 else i},{i % 2}\n")
    spec = prepare(
        write(tmp_path / "t.csv", text),
        "label",
        tmp_path / "w",
        csv_options=CsvOptions(na_values=("-999",)),
    )
    assert spec.missing == {"x": 10}
    # With the default set, -999 is a number like any other.
    assert prepare(write(tmp_path / "t.csv", text), "label", tmp_path / "w").missing == {}


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_the_delimiter_is_sniffed(delimiter, tmp_path):
    text = delimiter.join(["a", "b", "label"]) + "\n"
    text += rows(20, lambda i: delimiter.join([str(i), f"{i}.5", "yes" if i % 2 else "no"]) + "\n")
    spec = prepare(write(tmp_path / "t.csv", text), "label", tmp_path / "w")
    assert spec.csv_format["delimiter"] == delimiter
    assert spec.numeric_features == (("a", 1), ("b", 1))


def test_a_delimiter_flag_overrides_the_sniffer(tmp_path):
    # Commas inside values would win the sniff; the user says the separator is ';'.
    text = "name;label\n" + rows(20, lambda i: f"a,b,{i % 3};{i % 2}\n")
    spec = prepare(
        write(tmp_path / "t.csv", text),
        "label",
        tmp_path / "w",
        csv_options=CsvOptions(delimiter=";"),
    )
    assert spec.string_features == ("name",)


def test_bom_crlf_and_quoted_fields_with_delimiters_and_newlines(tmp_path):
    lines = ["\ufeffnote,value,label"]
    for i in range(30):
        note = f'"a, b\r\nc{i % 3}"' if i % 2 else f"d{i % 3}"
        lines.append(f"{note},{i},{i % 2}")
    spec = prepare(write(tmp_path / "t.csv", "\r\n".join(lines) + "\r\n"), "label", tmp_path / "w")
    assert spec.rows == 30
    assert spec.csv_format["columns"][0] == "note"  # no BOM in the name
    assert spec.string_features == ("note",) and spec.numeric_features == (("value", 1),)


def test_latin1_with_encoding_flag_and_undecodable_bytes_without_it(tmp_path):
    text = "Température (°C),ville,label\n" + rows(
        20, lambda i: f"{i}.5,{['Zürich', 'Genève'][i % 2]},{i % 2}\n"
    )
    path = write(tmp_path / "l.csv", text, encoding="latin-1")
    spec = prepare(path, "label", tmp_path / "w", csv_options=CsvOptions(encoding="latin-1"))
    assert spec.numeric_features == (("Temp_rature_C", 1),)
    assert spec.original_name("Temp_rature_C") == "Température (°C)"
    with pytest.raises(
        InputError, match=r"l\.csv: line 1 holds bytes that are not utf-8 \(e9\); pass --encoding"
    ):
        prepare(path, "label", tmp_path / "w")


def test_column_names_are_sanitised_unique_and_the_originals_kept(tmp_path):
    text = "Monthly charges ($),monthly_charges,2nd try,Churn?\n" + rows(
        30, lambda i: f"{i}.5,{i * 2},{i % 4},{'yes' if i % 3 else 'no'}\n"
    )
    spec = prepare(write(tmp_path / "t.csv", text), "Churn?", tmp_path / "w")
    names = [n for n, _ in spec.numeric_features]
    assert names == ["Monthly_charges", "monthly_charges_2", "f_2nd_try"]
    assert spec.label == "Churn" and spec.original_name("Churn") == "Churn?"
    assert list(spec.csv_format["columns"]) == [
        "Monthly charges ($)",
        "monthly_charges",
        "2nd try",
        "Churn?",
    ]


def test_boolean_columns_are_numeric_zero_one(tmp_path):
    text = "active,verified,label\n" + rows(
        20, lambda i: f"{['true', 'false'][i % 2]},{['yes', 'no', 'Yes'][i % 3]},{i % 2}\n"
    )
    spec = prepare(write(tmp_path / "t.csv", text), "label", tmp_path / "w")
    assert spec.numeric_features == (("active", 1), ("verified", 1))
    assert spec.csv_format["types"]["active"] == "bool"


def test_id_constant_and_date_columns_are_excluded_with_a_notice(tmp_path):
    rng = np.random.default_rng(0)
    words = ["late", "delivery", "great", "service", "box", "damaged", "refund", "thanks"]
    text = "customer_id,country,comment,signup,spend,label\n" + rows(
        150,
        lambda i: f"{1000 + i},FR,{' '.join(rng.choice(words, 6))},2024-01-{i % 28 + 1:02d},"
        f"{rng.normal():.3f},{i % 2}\n",
    )
    path = write(tmp_path / "t.csv", text)
    spec = prepare(path, "label", tmp_path / "w")
    reasons = {e["column"]: e["reason"] for e in spec.excluded}
    assert reasons["customer_id"].startswith("ID-like (unique in each of the first 150 rows)")
    assert reasons["country"] == "constant (always 'FR')"
    assert "comment" not in reasons  # multi-word values: a text feature (tests/test_text.py)
    assert spec.text_features == ("comment",)
    assert reasons["signup"].startswith("a date or time")
    assert spec.numeric_features == (("spend", 1),) and spec.string_features == ()
    assert any("--keep-columns 'signup'" in n for n in spec.notices)
    kept = prepare(
        path,
        "label",
        tmp_path / "w",
        csv_options=CsvOptions(keep_columns=("signup",), drop_columns=("spend",)),
    )
    assert kept.string_features == ("signup",) and kept.numeric_features == ()
    assert {e["column"]: e["reason"] for e in kept.excluded}["spend"] == "dropped by --drop-columns"
    with pytest.raises(InputError, match=r"--keep-columns nope: no such column in .*t\.csv"):
        prepare(path, "label", tmp_path / "w", csv_options=CsvOptions(keep_columns=("nope",)))


def test_label_imbalance_small_classes_and_many_classes_are_reported(tmp_path):
    text = "x,label\n" + rows(400, lambda i: f"{i % 17},{'rare' if i < 12 else 'common'}\n")
    spec = prepare(write(tmp_path / "t.csv", text), "label", tmp_path / "w")
    assert spec.class_counts == {"common": 388, "rare": 12}
    imbalance, small = spec.notices
    assert "388 examples of 'common', 12 of 'rare' (32x)" in imbalance
    assert "fewer than 25 examples" in small and "'rare'" in small
    many = "x,label\n" + rows(1200, lambda i: f"{i % 7},c{i % 300}\n")
    spec = prepare(write(tmp_path / "m.csv", many), "label", tmp_path / "w")
    assert spec.num_classes == 300
    assert any("300 classes" in n and "per-class slices" in n for n in spec.notices)


def _shard(path, header, n, start, compress=False):
    text = header + "\n" + rows(n, lambda i: f"{start + i},{(start + i) % 2}\n")
    if compress:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)


def test_a_folder_of_csv_and_csv_gz_shards_and_a_glob(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    _shard(folder / "part-00000.csv", "x,label", 20, 0)
    _shard(folder / "part-00001.csv.gz", "x,label", 20, 20, compress=True)
    (folder / "_SUCCESS").write_text("")  # what Spark leaves next to its shards
    spec = prepare(str(folder), "label", tmp_path / "w")
    assert spec.rows == 40 and spec.input_pattern == "*"
    spec = prepare(str(folder / "part-*.csv"), "label", tmp_path / "w")
    assert spec.rows == 20 and spec.input_pattern == "part-*.csv"


def test_shards_with_mismatched_headers_name_the_file(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    _shard(folder / "a.csv", "x,label", 10, 0)
    _shard(folder / "b.csv", "x2,label", 10, 10)
    with pytest.raises(InputError, match=r"b\.csv: its header differs from a\.csv's \(x, x2\)"):
        prepare(str(folder), "label", tmp_path / "w")


@pytest.mark.parametrize("delimiter", [",", ";"])
def test_a_ragged_row_is_named_by_its_line_in_its_own_shard(delimiter, tmp_path):
    """Arrow says "Expected 3 columns, got 4" and the row's text; the user needs the file and
    the line. One ragged row still lets the sniffer find the delimiter."""
    folder = tmp_path / "export"
    folder.mkdir()
    write(folder / "a.csv", "x,y,label\n" + rows(20, lambda i: f"{i},{i},{i % 2}\n"))
    body = rows(20, lambda i: f"{i},{i},{i},{i % 2}\n" if i == 12 else f"{i},{i},{i % 2}\n")
    write(folder / "b.csv", "x,y,label\n" + body)
    for shard in folder.iterdir():
        shard.write_text(shard.read_text().replace(",", delimiter))
    with pytest.raises(InputError) as bad:
        prepare(str(folder), "label", tmp_path / "w")
    assert str(bad.value) == (
        f"{folder / 'b.csv'}: line 14 has 4 fields where the header has 3 (delimiter "
        f"{delimiter!r}); fix the row or quote the cells that hold the delimiter"
    )


def test_text_after_the_first_block_names_its_line(tmp_path):
    body = rows(200_000, lambda i: f"{i},{i % 2}\n")
    path = write(tmp_path / "t.csv", "x,label\n" + body + "oops,1\n")
    with pytest.raises(
        InputError, match=r"t\.csv: column 'x' is numeric but line 200002 holds text 'oops'"
    ):
        prepare(path, "label", tmp_path / "w")
    # A decimal after a block of integers widens the column instead.
    path = write(tmp_path / "d.csv", "x,label\n" + body + "2.5,1\n")
    spec = prepare(path, "label", tmp_path / "w")
    assert spec.csv_format["types"]["x"] == "float" and spec.rows == 200_001


PEAK = """
import json, sys, tracemalloc
from pathlib import Path
import pyarrow as pa
from amp_pipeline.components.data.ingest import prepare
tracemalloc.start()
spec = prepare(sys.argv[1], "label", Path(sys.argv[2]))
print(json.dumps({"rows": spec.rows, "classes": sorted(spec.class_counts),
                  "python": tracemalloc.get_traced_memory()[1],
                  "arrow": pa.default_memory_pool().max_memory()}))
"""


def test_a_million_rows_are_checked_in_bounded_memory(tmp_path):
    """The inspector streams: its peak allocation, Python's and Arrow's, measured in a fresh
    process per file, is the same for 100k rows and for 1M rows."""
    import json
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.csv as pacsv

    from tests.conftest import ROOT, clean_env

    def make(n, path):
        rng = np.random.default_rng(0)
        table = pa.table(
            {
                **{f"f{k}": rng.normal(size=n).round(3) for k in range(6)},
                "city": rng.choice(["lima", "oslo", "rome"], n),
                "label": rng.integers(0, 3, n),
            }
        )
        pacsv.write_csv(table, path)

    def peak(path):
        out = subprocess.run(
            [sys.executable, "-c", PEAK, str(path), str(tmp_path / "w")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            env=clean_env(),
        )
        # A child that dies (a signal: negative code) says why in its own stderr.
        assert out.returncode == 0, f"exit {out.returncode}; stderr:\n{out.stderr[-4000:]}"
        return json.loads(out.stdout.strip().splitlines()[-1])

    make(300_000, tmp_path / "small.csv")  # already several of the inspector's blocks
    make(1_000_000, tmp_path / "big.csv")
    size = (tmp_path / "big.csv").stat().st_size
    small, big = peak(tmp_path / "small.csv"), peak(tmp_path / "big.csv")
    assert big["rows"] == 1_000_000 and small["rows"] == 300_000
    assert big["classes"] == ["0", "1", "2"]
    mb = 2**20
    assert big["python"] < 1.2 * small["python"] + 4 * mb, (small, big)
    assert big["arrow"] < 1.2 * small["arrow"] + 4 * mb, (small, big)
    assert big["arrow"] + big["python"] < 64 * mb, (big, size)  # a few blocks, not the file

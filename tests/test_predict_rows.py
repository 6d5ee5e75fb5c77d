"""`predict --csv` reads rows the way the training data was read."""

import numpy as np
import pytest
from tensorflow.core.framework import types_pb2

from amp_pipeline.core.errors import InputError
from amp_pipeline.pipeline.cli.predict import read_rows

INPUTS = {
    "Monthly_charges": types_pb2.DT_FLOAT,
    "tenure": types_pb2.DT_INT64,
    "contract": types_pb2.DT_STRING,
    "paperless": types_pb2.DT_FLOAT,
}


def test_semicolons_bom_quotes_booleans_and_original_column_names(tmp_path):
    path = tmp_path / "rows.csv"
    # A byte-order mark, CRLF, a quoted delimiter and a quoted newline, yes/false booleans.
    path.write_bytes(
        b"\xef\xbb\xbfMonthly charges ($);tenure;contract;paperless\r\n"
        b'29.5;1;"Month; to month";yes\r\n'
        b'70.25;24;"Two\nyear";false\r\n'
    )
    arrays = read_rows(path, INPUTS)
    assert arrays["Monthly_charges"].dtype == np.float32
    assert arrays["Monthly_charges"].tolist() == pytest.approx([29.5, 70.25])
    assert arrays["tenure"].tolist() == [1, 24] and arrays["tenure"].dtype == np.int64
    assert arrays["contract"].tolist() == [b"Month; to month", b"Two\nyear"]
    assert arrays["paperless"].tolist() == [1.0, 0.0]


def test_missing_markers_and_text_in_numbers_name_the_line_and_column(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("Monthly charges ($),tenure,contract,paperless\n1.5,3,a,no\nNA,4,b,no\n")
    with pytest.raises(InputError, match=r"line 3, column 'Monthly charges \(\$\)' is empty"):
        read_rows(path, INPUTS)
    # The user's own markers replace the default set: "NA" is then a value, and not a number.
    with pytest.raises(InputError, match=r"line 3, column 'Monthly charges \(\$\)': 'NA' is not"):
        read_rows(path, INPUTS, na_values=("?",))
    path.write_text("Monthly charges ($),tenure,contract,paperless\n1.5,3,a,no\n")
    with pytest.raises(InputError, match="column 'score' is missing"):
        read_rows(path, {**INPUTS, "score": types_pb2.DT_FLOAT})


def test_an_encoding_other_than_utf8(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(
        "Monthly charges ($),tenure,contract,paperless\n1,2,Caf\xe9,no\n".encode("latin-1")
    )
    with pytest.raises(InputError, match="see --encoding"):
        read_rows(path, INPUTS)
    assert read_rows(path, INPUTS, encoding="latin-1")["contract"].tolist() == ["Café".encode()]


def test_a_missing_csv_is_bad_input_before_any_server_is_asked(capsys):
    """Exit 2 naming the file, as every other bad path, even with no server listening. The old
    spelling --model still names the served model, and says to use --model-name."""
    from amp_pipeline.cli import main
    from tests.helpers import free_port

    code = main(["predict", "--model", "digits", "--csv", "/no/such/rows.csv",
                 "--grpc-port", str(free_port()), "--retries", "0"])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "amp-pipeline: warning: --model is deprecated and will be removed; use --model-name",
        "amp-pipeline: error: --csv /no/such/rows.csv: no such file",
    ]

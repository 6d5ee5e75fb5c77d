"""`amp-pipeline predict`: CSV rows to a TF Serving (or the local) server, over gRPC or REST.

The rows are read by the reader the training data went through (components/data/csv_format.py):
the delimiter sniffed or given, the encoding, the missing-value markers, booleans, quoted
fields and column names sanitised into the features' names. A row the model cannot take stops
the command with one line naming the file, line and column.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from amp_pipeline.core import cli_help, names
from amp_pipeline.core.argtypes import positive_float
from amp_pipeline.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, InputError
from amp_pipeline.pipeline.cli import flags


def add_parser(sub) -> None:
    from amp_pipeline.serving.cli import add_endpoint_flags

    predict = cli_help.command(
        sub,
        "predict",
        "send CSV rows to a TF Serving (or local) server",
        "Sends the rows of a CSV, one column per raw feature as in the training data, to a "
        "served model's raw-feature signature over gRPC or REST, and prints the answers. "
        "--metadata prints the model's signatures instead.",
        [
            "amp-pipeline predict --model-name churn --csv rows.csv",
            "amp-pipeline predict --model-name churn --csv rows.csv --protocol rest",
            "amp-pipeline predict --model-name digits --metadata",
        ],
        (0, 1, 2),
    )
    # Required, checked by cmd_predict: argparse would not count the old spelling --model.
    predict.add_argument("--model-name", help="the served model's name (required)")
    cli_help.renamed(predict, "--model", "--model-name", dest="model_name")
    predict.add_argument("--csv", type=Path, help="rows to predict; a column per raw feature")
    predict.add_argument(
        "--metadata", action="store_true", help="print the model's signatures and exit"
    )
    add_endpoint_flags(predict)
    predict.add_argument(
        "--protocol", choices=("grpc", "rest"), default="grpc", help="(default: %(default)s)"
    )
    predict.add_argument("--version", type=int, help="a model version (default: the newest)")
    predict.add_argument(
        "--signature",
        default=names.RAW_SIGNATURE,
        help="signature taking raw features (default: %(default)s)",
    )
    predict.add_argument("--timeout", type=positive_float, default=10.0, help="seconds per call")
    predict.add_argument(
        "--retries", type=int, default=3, help="retries on UNAVAILABLE (default: %(default)s)"
    )
    flags.add_csv_reading_flags(predict)


def read_rows(
    path: Path,
    inputs: dict,
    encoding: str = "utf-8",
    delimiter: str | None = None,
    na_values: tuple[str, ...] | None = None,
) -> dict[str, np.ndarray]:
    """CSV columns -> one array per signature input ({input: DataType enum}), in its dtype.

    Raises:
        InputError: the file, a column, or a cell the model cannot take, named.
    """
    import pyarrow as pa
    import tensorflow as tf

    from amp_pipeline.components.data import csv_format
    from amp_pipeline.core.names import FALSE_VALUES, TRUE_VALUES, sanitize_names

    if not path.is_file():
        raise InputError(f"--csv {path}: no such file")
    try:
        with csv_format.open_text(path, encoding) as f:
            sample = f.read(65536)
    except (UnicodeDecodeError, LookupError) as e:
        raise InputError(
            f"--csv {path}: not readable as {encoding} ({e}); see --encoding"
        ) from None
    delimiter = delimiter or csv_format.sniff_delimiter(sample)
    header = csv_format.read_header(path, encoding, delimiter)
    feature_names = sanitize_names(header)
    missing = sorted(set(inputs) - set(feature_names))
    if missing:
        raise InputError(
            f"--csv {path}: column '{missing[0]}' is missing (the model needs {sorted(inputs)})"
        )
    # Every cell as text (missing markers already None), then each input's conversion as
    # training made it: booleans 1/0, numbers parsed, a cell that is neither named.
    as_text = dict.fromkeys(inputs, "string")
    fmt = csv_format.CsvFormat(
        delimiter=delimiter,
        encoding=encoding,
        na_values=tuple(na_values if na_values is not None else csv_format.PANDAS_NA_VALUES),
        columns=tuple(header),
        names=feature_names,
        types=as_text,
        keep=tuple(inputs),
    )
    columns: dict[str, list] = {name: [] for name in inputs}
    try:
        for batch in csv_format.batches(path, fmt, as_text, include=tuple(inputs)):
            for name in inputs:
                columns[name].extend(batch.column(batch.schema.get_field_index(name)).to_pylist())
    except pa.ArrowInvalid as e:
        raise InputError(f"--csv {path}: {str(e).splitlines()[0]}") from None
    rows = len(columns[next(iter(inputs))]) if inputs else 0
    if not rows:
        raise InputError(f"--csv {path}: no rows")
    booleans = {**dict.fromkeys(TRUE_VALUES, 1.0), **dict.fromkeys(FALSE_VALUES, 0.0)}
    arrays = {}
    for name, dtype_enum in inputs.items():
        dtype = tf.dtypes.as_dtype(dtype_enum)
        if dtype == tf.string:
            arrays[name] = np.array(
                [b"" if v is None else v.encode() for v in columns[name]], dtype=object
            )
            continue
        values = []
        for line, text in enumerate(columns[name], start=2):
            where = f"--csv {path}: line {line}, column {fmt.original(name)!r}"
            if text is None:
                raise InputError(f"{where} is empty or missing")
            value = booleans.get(text.strip(), csv_format.parse_number(text.strip()))
            if value is None:
                raise InputError(f"{where}: {text!r} is not a number")
            values.append(value)
        arrays[name] = np.array(values, dtype=dtype.as_numpy_dtype)
    return arrays


def cmd_predict(args: argparse.Namespace) -> int:
    from amp_pipeline.serving.client import ClientConfig, ClientError, ServingClient

    client = ServingClient(
        ClientConfig(args.host, args.grpc_port, args.rest_port, args.timeout, args.retries)
    )
    try:
        # The rows are checked before the server is asked: a bad path is bad input (exit 2)
        # whether or not a server is up.
        if not args.model_name:
            raise InputError("--model-name is required: the served model's name")
        if not args.metadata and args.csv is None:
            raise InputError("--csv is required (or --metadata)")
        if not args.metadata and not args.csv.is_file():
            raise InputError(f"--csv {args.csv}: no such file")
        if args.protocol == "grpc":
            signatures, version = client.metadata(args.model_name, args.version)
            sigs = {k: {i: t.dtype for i, t in v.inputs.items()} for k, v in signatures.items()}
        else:
            meta = client.rest_metadata(args.model_name, args.version)
            version = int(meta["model_spec"]["version"])
            sigs = _rest_signatures(meta)
        if args.metadata:
            print(f"model {args.model_name} version {version}")
            for name, inputs in sorted(sigs.items()):
                print(f"  {name}: inputs {sorted(inputs)}")
            return 0
        if args.signature not in sigs:
            raise InputError(f"--signature {args.signature}: the model has {sorted(sigs)}")
        arrays = read_rows(
            args.csv, sigs[args.signature], args.encoding, args.delimiter, args.na_values
        )
        if args.protocol == "grpc":
            out = client.predict(args.model_name, arrays, args.signature, args.version)
            out = {k: v.tolist() for k, v in out.items()}
        else:
            columns = {
                k: [v.decode() if isinstance(v, bytes) else v for v in a.tolist()]
                for k, a in arrays.items()
            }
            out = client.rest_predict(
                args.model_name, inputs=columns, signature=args.signature, version=args.version
            )["outputs"]
            # A regression model's one output comes back bare, not by name.
            out = out if isinstance(out, dict) else {names.PREDICTIONS: out}
    except InputError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ClientError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        client.close()
    print(f"model {args.model_name} version {version} ({args.protocol})")
    if names.PREDICTIONS in out:
        print("row  prediction")
        for i, value in enumerate(out[names.PREDICTIONS]):
            print(f"{i:>3}  {float(value):.6g}")
        return 0
    classes = [c.decode() if isinstance(c, bytes) else str(c) for c in out[names.CLASSES]]
    print("row  class  probability")
    for i, (c, p) in enumerate(zip(classes, out[names.PROBABILITIES], strict=True)):
        print(f"{i:>3}  {c:<5}  {max(p):.4f}")
    return 0


def _rest_signatures(meta: dict) -> dict:
    """{signature: {input: DataType enum}} from the REST metadata JSON."""
    from tensorflow.core.framework import types_pb2

    defs = meta["metadata"]["signature_def"]["signature_def"]
    return {
        name: {k: types_pb2.DataType.Value(v["dtype"]) for k, v in sig.get("inputs", {}).items()}
        for name, sig in defs.items()
    }

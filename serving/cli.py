"""`amp-pipeline serve`, `predict`, `deploy-files`, `bench-serving`: flags in, library calls out."""

from __future__ import annotations

import argparse
import csv
import logging
import signal
import sys
import threading
from pathlib import Path

from core import names
from core.argtypes import port, positive, positive_float
from core.errors import EXIT_BAD_INPUT, EXIT_FAILED

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _add_endpoint_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="server address (default: %(default)s)")
    p.add_argument("--grpc-port", type=port, default=8500, help="(default: %(default)s)")
    p.add_argument("--rest-port", type=port, default=8501, help="(default: %(default)s)")


def add_parsers(sub) -> None:
    serve = sub.add_parser(
        "serve", help="local TF Serving-compatible server (gRPC + REST) over pushed models"
    )
    serve.add_argument(
        "--model-dir",
        required=True,
        type=Path,
        help="a pushed model (<dir>/<version>/) or a serving folder of them (output/serving)",
    )
    _add_endpoint_flags(serve)
    serve.add_argument("--model-name", help="serve only this model / name the single model")
    serve.add_argument(
        "--poll-seconds",
        type=positive_float,
        default=1.0,
        help="how often new versions are looked for (default: %(default)s)",
    )
    serve.add_argument(
        "--max-request-mb",
        type=positive_float,
        default=16.0,
        help="largest request accepted, gRPC and REST (default: %(default)s)",
    )
    serve.add_argument("--no-batching", action="store_true", help="run every request alone")
    serve.add_argument("--max-batch-size", type=positive, default=64, help="(default: 64)")
    serve.add_argument(
        "--batch-timeout-ms",
        type=float,
        default=0.0,
        help="longest a request waits for others to batch with; 0: batch only what queued "
        "while the model was busy (default: %(default)s)",
    )
    serve.add_argument(
        "--num-batch-threads",
        type=positive,
        default=1,
        help="batches run at once (default: 1)",
    )

    predict = sub.add_parser("predict", help="send CSV rows to a TF Serving (or local) server")
    predict.add_argument("--model", required=True, help="served model name")
    predict.add_argument("--csv", type=Path, help="rows to predict; a column per raw feature")
    predict.add_argument(
        "--metadata", action="store_true", help="print the model's signatures and exit"
    )
    _add_endpoint_flags(predict)
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

    deploy = sub.add_parser(
        "deploy-files", help="TF Serving models.config, batching and Kubernetes manifests"
    )
    deploy.add_argument("--serving-dir", type=Path, default=Path("output/serving"))
    deploy.add_argument("--out", type=Path, default=Path("output/deploy"))
    deploy.add_argument(
        "--base-path",
        default="/models",
        help="the serving folder inside the container, or a gs:// URI (default: %(default)s)",
    )
    deploy.add_argument("--keep-versions", type=positive, default=2, help="(default: 2)")
    deploy.add_argument("--no-batching", action="store_true")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _batching(args):
    from serving.batching import BatchingConfig

    if args.no_batching:
        return None
    return BatchingConfig(args.max_batch_size, args.batch_timeout_ms / 1000, args.num_batch_threads)


def cmd_serve(args: argparse.Namespace) -> int:
    from serving.server import LocalServer, NoModelError, ServerConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    for noisy in ("absl", "tensorflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        config = ServerConfig(
            model_dir=args.model_dir,
            host=args.host,
            grpc_port=args.grpc_port,
            rest_port=args.rest_port,
            model_name=args.model_name,
            poll_s=args.poll_seconds,
            max_request_bytes=int(args.max_request_mb * 1024 * 1024),
            batching=_batching(args),
        )
        server = LocalServer(config).start()
    except (NoModelError, ValueError) as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    if args.host not in LOOPBACK:
        print(f"WARNING: listening on {args.host}: reachable from the network", file=sys.stderr)
    models = ", ".join(
        f"{m} (version {server.repository.get(m).version})" for m in server.repository.models()
    )
    print(
        f"serving {models}: gRPC {args.host}:{server.grpc_port}, "
        f"REST http://{args.host}:{server.rest_port}; Ctrl-C stops",
        flush=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop()
    print("stopped", flush=True)
    return 0


def _read_rows(path: Path, inputs: dict) -> dict:
    """CSV columns -> one array per signature input, in the input's dtype."""
    import numpy as np
    import tensorflow as tf

    from core.errors import InputError
    from core.names import FALSE_VALUES, TRUE_VALUES, sanitize_names

    if not path.is_file():
        raise InputError(f"--csv {path}: no such file")
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        # Columns as the training data wrote them: the signature's inputs are their sanitised
        # feature names (the pipeline's ingestion uses the same function).
        names = sanitize_names(header)
        rows = [dict(zip(names, r, strict=False)) for r in reader if r]
    if not rows:
        raise InputError(f"--csv {path}: no rows")
    booleans = {**dict.fromkeys(TRUE_VALUES, "1"), **dict.fromkeys(FALSE_VALUES, "0")}
    missing = sorted(set(inputs) - set(rows[0]))
    if missing:
        raise InputError(
            f"--csv {path}: column '{missing[0]}' is missing (the model needs {sorted(inputs)})"
        )
    arrays = {}
    for name, dtype_enum in inputs.items():
        dtype = tf.dtypes.as_dtype(dtype_enum)
        values = []
        for i, row in enumerate(rows, start=2):
            text = row.get(name, "").strip()
            if dtype != tf.string:
                text = booleans.get(text, text)
            if text == "" and dtype != tf.string:
                raise InputError(f"--csv {path}: line {i}, column '{name}' is empty")
            try:
                values.append(text.encode() if dtype == tf.string else float(text))
            except ValueError:
                raise InputError(
                    f"--csv {path}: line {i}, column '{name}': '{text}' is not a number"
                ) from None
        arrays[name] = np.array(
            values, dtype=object if dtype == tf.string else dtype.as_numpy_dtype
        )
    return arrays


def cmd_predict(args: argparse.Namespace) -> int:
    from core.errors import InputError
    from serving.client import ClientConfig, ClientError, ServingClient

    client = ServingClient(
        ClientConfig(args.host, args.grpc_port, args.rest_port, args.timeout, args.retries)
    )
    try:
        if args.protocol == "grpc":
            signatures, version = client.metadata(args.model, args.version)
            sigs = {k: {i: t.dtype for i, t in v.inputs.items()} for k, v in signatures.items()}
        else:
            meta = client.rest_metadata(args.model, args.version)
            version = int(meta["model_spec"]["version"])
            sigs = _rest_signatures(meta)
        if args.metadata:
            print(f"model {args.model} version {version}")
            for name, inputs in sorted(sigs.items()):
                print(f"  {name}: inputs {sorted(inputs)}")
            return 0
        if args.csv is None:
            raise InputError("--csv is required (or --metadata)")
        if args.signature not in sigs:
            raise InputError(f"--signature {args.signature}: the model has {sorted(sigs)}")
        arrays = _read_rows(args.csv, sigs[args.signature])
        if args.protocol == "grpc":
            out = client.predict(args.model, arrays, args.signature, args.version)
            classes = [c.decode() if isinstance(c, bytes) else str(c) for c in out["classes"]]
            probs = out[names.PROBABILITIES].tolist()
        else:
            columns = {
                k: [v.decode() if isinstance(v, bytes) else v for v in a.tolist()]
                for k, a in arrays.items()
            }
            out = client.rest_predict(
                args.model, inputs=columns, signature=args.signature, version=args.version
            )["outputs"]
            classes, probs = out[names.CLASSES], out[names.PROBABILITIES]
    except InputError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ClientError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        client.close()
    print(f"model {args.model} version {version} ({args.protocol})")
    print("row  class  probability")
    for i, (c, p) in enumerate(zip(classes, probs, strict=True)):
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


def cmd_deploy_files(args: argparse.Namespace) -> int:
    from serving import deploy
    from serving.batching import BatchingConfig

    try:
        paths = deploy.write_deployment(
            args.serving_dir,
            args.out,
            base_path=args.base_path,
            keep_versions=args.keep_versions,
            batching=None if args.no_batching else BatchingConfig(),
        )
    except ValueError as e:
        print(f"amp-pipeline: error: --serving-dir {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for what, path in paths.items():
        print(f"{what:<20} {path}")
    return 0


COMMANDS = {
    "serve": cmd_serve,
    "predict": cmd_predict,
    "deploy-files": cmd_deploy_files,
}

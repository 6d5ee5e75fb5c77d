"""`amp-pipeline serve`, `deploy-files`: flags in, library calls out (`predict` is
pipeline/cli/predict.py: it reads CSV with the training reader)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from amp_pipeline.core import cli_help
from amp_pipeline.core.argtypes import port, positive, positive_float
from amp_pipeline.core.errors import EXIT_BAD_INPUT, EXIT_FAILED

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_endpoint_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="server address (default: %(default)s)")
    p.add_argument("--grpc-port", type=port, default=8500, help="(default: %(default)s)")
    p.add_argument("--rest-port", type=port, default=8501, help="(default: %(default)s)")


def add_parsers(sub) -> None:
    serve = cli_help.command(
        sub,
        "serve",
        "local TF Serving-compatible server (gRPC + REST) over pushed models",
        "Serves the pushed SavedModels under --model-dir over TF Serving's gRPC and REST "
        "APIs on 127.0.0.1, loads new versions as they are pushed, batches requests, and can "
        "log requests and answers (and a shadow's answers) for `monitor`.",
        [
            "amp-pipeline serve --model-dir output/serving",
            "amp-pipeline serve --model-dir output/serving --log-requests output/requests",
        ],
        (0, 1, 2, 130),
    )
    serve.add_argument(
        "--model-dir",
        required=True,
        type=Path,
        help="a pushed model (<dir>/<version>/) or a serving folder of them (output/serving)",
    )
    add_endpoint_flags(serve)
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
    log = serve.add_argument_group(
        "request logs (docs: After the push); they hold users' inputs: files 0600, folder 0700"
    )
    log.add_argument(
        "--log-requests",
        type=Path,
        metavar="DIR",
        help="write each request and its answer as PredictionLog records (TFRecord) here",
    )
    log.add_argument(
        "--log-sample-rate",
        type=positive_float,
        default=1.0,
        help="share of requests logged, in (0, 1] (default: %(default)s)",
    )
    log.add_argument(
        "--log-max-mb",
        type=positive_float,
        default=512.0,
        help="the folder's total; the oldest files are removed beyond it (default: %(default)s)",
    )
    log.add_argument(
        "--log-exclude",
        default="",
        metavar="COLUMNS",
        help="comma-separated features never written to the logs",
    )
    log.add_argument(
        "--shadow",
        type=positive,
        metavar="VERSION",
        help="also run each logged request on this version, off the answer's path, and log "
        "its answer beside production's (needs --log-requests)",
    )

    deploy = cli_help.command(
        sub,
        "deploy-files",
        "TF Serving models.config, batching and Kubernetes manifests",
        "Writes the files a real TF Serving needs for the pushed models: models.config (the "
        "newest --keep-versions of each), the batching parameters, and Kubernetes manifests.",
        [
            "amp-pipeline deploy-files",
            "amp-pipeline deploy-files --serving-dir output/serving --output deploy "
            "--base-path gs://b/models",
        ],
        (0, 2),
    )
    deploy.add_argument(
        "--serving-dir",
        type=Path,
        default=Path("output/serving"),
        help="the pushed models (default: %(default)s)",
    )
    deploy.add_argument(
        "--output",
        type=Path,
        default=Path("output/deploy"),
        help="folder for models.config and the manifests (default: %(default)s)",
    )
    cli_help.renamed(deploy, "--out", "--output", dest="output", type=Path)
    deploy.add_argument(
        "--base-path",
        default="/models",
        help="the serving folder inside the container, or a gs:// URI (default: %(default)s)",
    )
    deploy.add_argument("--keep-versions", type=positive, default=2, help="(default: 2)")
    deploy.add_argument(
        "--no-batching", action="store_true", help="no batching parameters in the config"
    )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _batching(args):
    from amp_pipeline.serving.batching import BatchingConfig

    if args.no_batching:
        return None
    return BatchingConfig(args.max_batch_size, args.batch_timeout_ms / 1000, args.num_batch_threads)


def _request_log(args):
    """The request log's config, or None; one line naming the flag when the flags disagree."""
    from amp_pipeline.serving.requestlog.writer import RequestLogConfig

    if args.log_requests is None:
        if args.shadow is not None:
            raise ValueError("--shadow needs --log-requests DIR: the shadow's answers go there")
        return None
    if args.log_sample_rate > 1:
        raise ValueError(f"--log-sample-rate {args.log_sample_rate:g}: must be in (0, 1]")
    if args.log_requests.exists() and not args.log_requests.is_dir():
        raise ValueError(f"--log-requests {args.log_requests}: not a folder")
    exclude = tuple(c.strip() for c in args.log_exclude.split(",") if c.strip())
    return RequestLogConfig(args.log_requests, args.log_sample_rate, args.log_max_mb, exclude)


def cmd_serve(args: argparse.Namespace) -> int:
    from amp_pipeline.serving.server import LocalServer, NoModelError, ServerConfig

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
            request_log=_request_log(args),
            shadow_version=args.shadow,
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


def cmd_deploy_files(args: argparse.Namespace) -> int:
    from amp_pipeline.serving import deploy
    from amp_pipeline.serving.batching import BatchingConfig

    try:
        paths = deploy.write_deployment(
            args.serving_dir,
            args.output,
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
    "deploy-files": cmd_deploy_files,
}

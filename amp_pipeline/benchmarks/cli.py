"""The benchmark commands: `bench` (AMP vs float32 on the same models) and `bench-serving` (the
local server under load)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from amp_pipeline.benchmarks.speed.configs import (
    BACKENDS,
    BENCH_MODELS,
    REPLICA_MODES,
    TRANSFORMER_SIZES,
)
from amp_pipeline.core import argtypes, cli_help
from amp_pipeline.core.argtypes import port, positive, positive_float
from amp_pipeline.core.errors import EXIT_BAD_INPUT, EXIT_FAILED
from amp_pipeline.core.names import BERT_SIZE_NAMES
from amp_pipeline.pipeline.config import RunConfig

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


def _names(allowed: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(v.strip() for v in text.split(",") if v.strip())
        unknown = [v for v in names if v not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown value {', '.join(unknown) or text!r}; choose from {', '.join(allowed)}"
            )
        return names

    return parse


def add_parsers(sub) -> None:
    bench = cli_help.command(
        sub,
        "bench",
        "AMP vs float32 benchmark: fresh process per configuration, median",
        "Trains each model under each policy (and XLA setting, replica count or backend) in "
        "a fresh process on synthetic data of the model's shape, rounds interleaving float32 "
        "and AMP, and writes bench.json, bench.md and bench.png with the median speedups.",
        [
            "amp-pipeline bench --models cnn,mlp --policies float32,mixed_bfloat16",
            "amp-pipeline bench --models bert --bert-size base --seq-lens 128,512",
            "amp-pipeline bench --models mlp --replicas 1,2",
        ],
        (0, 1, 2),
    )
    bench.add_argument(
        "--models",
        type=_names(BENCH_MODELS),
        default=("cnn",),
        help=f"comma-separated, of {', '.join(BENCH_MODELS)} (default: cnn)",
    )
    bench.add_argument(
        "--policies",
        type=_names(POLICIES),
        default=("float32", "mixed_bfloat16"),
        help="comma-separated; float32 is the baseline (default: float32,mixed_bfloat16)",
    )
    bench.add_argument(
        "--xla",
        type=_names(("on", "off")),
        default=("off",),
        help="comma-separated of on,off (default: off)",
    )
    bench.add_argument(
        "--batch-size", type=argtypes.positive, default=64, help="(default: %(default)s)"
    )
    bench.add_argument(
        "--image-size",
        type=argtypes.positive,
        default=RunConfig.image_size,
        help="resnet50 input side; the figures in RESULTS.md used 96 (default: %(default)s)",
    )
    bench.add_argument(
        "--steps",
        type=argtypes.positive,
        default=20,
        help="measured steps per run, after the warm-up (default: %(default)s)",
    )
    bench.add_argument(
        "--warmup-steps",
        type=argtypes.positive,
        default=3,
        help="steps excluded from the figures (default: %(default)s)",
    )
    bench.add_argument(
        "--repeats",
        type=argtypes.positive,
        default=3,
        help="runs per configuration; the median is reported (default: 3)",
    )
    bench.add_argument(
        "--replicas",
        type=_counts,
        default=(1,),
        help="comma-separated replica counts to train each configuration with, e.g. 1,2: "
        "--batch-size is then per replica and the table adds scaling efficiency (default: 1)",
    )
    bench.add_argument(
        "--replica-mode",
        choices=REPLICA_MODES,
        default="multiworker",
        help="multiworker: local worker processes under MultiWorkerMirroredStrategy on "
        "127.0.0.1; mirrored: MirroredStrategy over the GPUs, or logical CPU devices "
        "(default: %(default)s)",
    )
    bench.add_argument(
        "--backend",
        choices=BACKENDS,
        default="tensorflow",
        help="Keras 3 backend of the measured process: tensorflow, or jax (the same model "
        "code, every step compiled by XLA; float32 measured at JAX's default matmul precision "
        "and at 'highest') (default: %(default)s)",
    )
    bench.add_argument(
        "--transformer-size",
        choices=tuple(TRANSFORMER_SIZES),
        default="small",
        help="small: 2 layers of width 256; bert-base: 12 layers of width 768, 12 heads "
        "(default: %(default)s)",
    )
    bench.add_argument(
        "--bert-size",
        choices=BERT_SIZE_NAMES,
        default=RunConfig.bert_size,
        help="--models bert: tiny, mini, small or base (BERT-base: 12 layers, 768 wide, 12 "
        "heads) (default: %(default)s)",
    )
    bench.add_argument(
        "--seq-lens",
        type=_counts,
        default=(128,),
        help="--models bert: comma-separated sequence lengths, e.g. 128,512 (default: 128)",
    )
    bench.add_argument(
        "--max-batch-search",
        action="store_true",
        help="also find the largest batch that trains under --memory-budget-gib, per model "
        "and precision (doubling, then bisection)",
    )
    bench.add_argument(
        "--memory-budget-gib",
        type=positive_float,
        default=16.0,
        help="--max-batch-search: the memory a batch may take; on a GPU under JAX also the "
        "allocator's cap, like a card of that size (default: %(default)s)",
    )
    bench.add_argument(
        "--search-start",
        type=positive,
        default=32,
        help="--max-batch-search: the first batch tried (default: %(default)s)",
    )
    bench.add_argument(
        "--batch-limit",
        type=positive,
        default=8192,
        help="--max-batch-search: the largest batch tried (default: %(default)s)",
    )
    bench.add_argument(
        "--search-budget-s",
        type=positive_float,
        default=180.0,
        help="--max-batch-search: seconds for all searches; a search cut short reports a "
        "lower bound (default: %(default)s)",
    )
    bench.add_argument("--output", default="bench", help="output folder (default: %(default)s)")
    add_serving_parser(sub)


def _counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        counts = ()
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers such as 1,2; got {text!r}")
    return counts


def add_serving_parser(sub) -> None:
    bench = cli_help.command(
        sub,
        "bench-serving",
        "load benchmark: concurrent gRPC and REST clients vs the SavedModel in process",
        "Starts the local server on free ports, drives it with concurrent gRPC and REST "
        "clients sending the run's eval examples, and writes throughput and latency "
        "percentiles beside the SavedModel called in process.",
        ["amp-pipeline bench-serving", "amp-pipeline bench-serving --clients 16 --duration 30"],
        (0, 1, 2),
    )
    bench.add_argument(
        "--model-dir",
        type=Path,
        default=Path("output/serving/digits"),
        help="a pushed model base, <dir>/<version>/ (default: %(default)s)",
    )
    bench.add_argument(
        "--examples",
        default="output/tfx/CsvExampleGen/examples/*/Split-eval/*",
        help="TFRecord (gzip) glob of raw serialized examples (default: the run's eval split)",
    )
    bench.add_argument(
        "--examples-per-request",
        type=positive,
        default=1,
        help="rows in each request (default: %(default)s)",
    )
    bench.add_argument("--clients", type=positive, default=8, help="(default: 8)")
    bench.add_argument(
        "--duration", type=positive_float, default=20.0, help="seconds per setting (default: 20)"
    )
    bench.add_argument(
        "--protocols",
        type=_names(("grpc", "rest")),
        default=("grpc", "rest"),
        help="comma-separated of grpc,rest (default: both)",
    )
    bench.add_argument("--grpc-port", type=port, default=0, help="(default: a free port)")
    bench.add_argument("--rest-port", type=port, default=0, help="(default: a free port)")
    bench.add_argument(
        "--output", type=Path, default=Path("bench"), help="output folder (default: %(default)s)"
    )
    bench.add_argument(
        "--request-log",
        action="store_true",
        help="also serve with the request log and the oldest other version as a shadow, and "
        "report the latency they add to the production answers",
    )


def cmd_bench_serving(args: argparse.Namespace) -> int:
    import glob
    import tempfile

    import tensorflow as tf

    from amp_pipeline.benchmarks.load import serving as serving_load
    from amp_pipeline.serving.cli import free_port

    files = sorted(glob.glob(args.examples))
    if not files:
        print(f"amp-pipeline: error: --examples {args.examples}: no file matches", file=sys.stderr)
        return EXIT_BAD_INPUT
    compression = "GZIP" if files[0].endswith(".gz") else ""
    dataset = tf.data.TFRecordDataset(files[-1:], compression_type=compression)
    examples = [r.numpy() for r in dataset.take(args.examples_per_request)]
    ports = (args.grpc_port or free_port(), args.rest_port or free_port())
    print(
        f"amp-pipeline bench-serving: {args.clients} clients x {args.duration:.0f} s, "
        f"{' and '.join(args.protocols)}, batching on, batching off, in process"
    )
    try:
        with tempfile.TemporaryDirectory() as scratch:
            result = serving_load.run_serving_bench(
                args.model_dir,
                examples,
                args.clients,
                args.duration,
                ports,
                tuple(args.protocols),
                logged=Path(scratch) / "logs" if args.request_log else None,
            )
    except ValueError as e:
        print(f"amp-pipeline: error: --model-dir {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RuntimeError as e:
        print(f"amp-pipeline: error: failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    paths = serving_load.write_outputs(result, args.output)
    print(paths["md"].read_text())
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from amp_pipeline.benchmarks.speed import bench

    if "float32" not in args.policies:
        print(
            "amp-pipeline: error: --policies must include float32 (the baseline)", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    configs = bench.bench_configs(
        list(args.models),
        list(args.policies),
        [x == "on" for x in args.xla],
        args.batch_size,
        args.image_size,
        args.steps,
        args.warmup_steps,
        args.replicas,
        args.replica_mode,
        args.backend,
        args.transformer_size,
        args.bert_size,
        args.seq_lens,
    )
    if args.backend == "jax" and not _jax_installed():
        print(
            "amp-pipeline: error: --backend jax: jax is not installed in this environment; "
            "install the optional extra: pip install -r requirements-jax.lock",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    print(
        f"amp-pipeline bench: {len(configs)} configurations x {args.repeats} rounds, "
        "each run in a fresh process"
    )
    try:
        result = bench.run_bench(configs, args.repeats)
    except RuntimeError as e:
        print(f"amp-pipeline: error: failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    if args.max_batch_search:
        # float32 at `highest` holds the same buffers as at JAX's default: searched once.
        singles = [
            dataclasses.replace(c, batch_size=args.search_start)
            for c in configs
            if c.replicas == 1 and not c.matmul_precision
        ]
        print(f"largest batch under {args.memory_budget_gib:g} GiB, {len(singles)} searches:")
        try:
            found = bench.largest_batches(
                singles, args.memory_budget_gib, args.batch_limit, args.search_budget_s
            )
        except (RuntimeError, ValueError) as e:
            print(f"amp-pipeline: error: failed: {e}", file=sys.stderr)
            return EXIT_FAILED
        result["max_batch"] = {"searches": found, "ratios": bench.batch_ratios(found)}
    result["machine"] = bench.machine()
    paths = bench.write_outputs(result, Path(args.output))
    print()
    print(paths["md"].read_text())
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0


def _jax_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("jax") is not None


COMMANDS = {"bench": cmd_bench, "bench-serving": cmd_bench_serving}

"""`python -m amp_pipeline.benchmarks.scale.beam_batches RUN_OUTPUT [--component C] [--rounds N]`:
TFX's Transform or StatisticsGen executor alone, on a finished run's ExampleGen output (and schema),
with TFX's own batching and with larger batches (Transform: components/data/transform.py's;
StatisticsGen: tfx_bsl's byte-size batching), alternating, each in a fresh process.

RUN_OUTPUT is the `--output` of a finished `amp-pipeline run` (its ML Metadata gives the
Transform's parameters). Prints one JSON line per run: the component, the batching, seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _latest_uri(root: Path, component: str, output: str) -> str:
    runs = sorted((root / "tfx" / component / output).iterdir(), key=lambda p: int(p.name))
    return str(runs[-1])


def _transform_properties(metadata: Path) -> dict:
    with sqlite3.connect(metadata) as db:
        rows = db.execute(
            "select p.name, p.string_value, p.int_value from Execution e "
            "join ExecutionProperty p on p.execution_id = e.id "
            "join Type t on t.id = e.type_id where t.name like '%Transform%'"
        ).fetchall()
    return {name: text if text is not None else number for name, text, number in rows}


SPLITS = ("train", "eval")


def _artifact(kind, uri: str, splits=()):
    from tfx.types import artifact_utils

    a = kind()
    a.uri = uri
    if splits:
        a.split_names = artifact_utils.encode_split_names(list(splits))
    return [a]


def _examples(root: Path):
    from tfx.types import standard_artifacts

    uri = _latest_uri(root, "CsvExampleGen", "examples")
    return _artifact(standard_artifacts.Examples, uri, SPLITS)


def statistics(root: Path, batched: bool, out: Path) -> float:
    """One StatisticsGen in this process: its seconds. Batched, its sources use tfx_bsl's
    experimental byte-size batching (about 20 MiB of examples, at most 8,192 rows, instead of
    Beam's tuning up to 1,000 rows), which tfx_bsl reads from `_UseByteSizeBatching`."""
    from tfx.components.statistics_gen import executor as sx
    from tfx.types import standard_artifacts
    from tfx_bsl.coders import batch_util

    outputs = {
        "statistics": _artifact(standard_artifacts.ExampleStatistics, str(out / "stats"), SPLITS)
    }
    context = sx.Executor.Context(beam_pipeline_args=[], tmp_dir=str(out / "tmp"))
    if batched:
        batch_util._UseByteSizeBatching = lambda: True  # noqa: SLF001 - its only switch
    start = time.perf_counter()
    sx.Executor(context).Do({"examples": _examples(root)}, outputs, {})
    return time.perf_counter() - start


def transform(root: Path, batched: bool, out: Path) -> float:
    """One Transform in this process: its seconds."""
    from tfx.components.transform import executor as tx
    from tfx.types import standard_artifacts

    from amp_pipeline.components.data.transform import BatchedProcessor

    inputs = {
        "examples": _examples(root),
        "schema": _artifact(standard_artifacts.Schema, _latest_uri(root, "SchemaGen", "schema")),
    }
    outputs = {
        "transform_graph": _artifact(standard_artifacts.TransformGraph, str(out / "graph")),
        "transformed_examples": _artifact(
            standard_artifacts.Examples, str(out / "examples"), SPLITS
        ),
    }
    context = tx.Executor.Context(beam_pipeline_args=[], tmp_dir=str(out / "tmp"))
    properties = _transform_properties(root / "metadata.sqlite")
    original = tx.TransformProcessor
    tx.TransformProcessor = BatchedProcessor if batched else original  # type: ignore[misc]  # TFX's processor class swapped for this run, restored below
    try:
        start = time.perf_counter()
        tx.Executor(context).Do(inputs, outputs, properties)
        return time.perf_counter() - start
    finally:
        tx.TransformProcessor = original  # type: ignore[misc]  # restored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m amp_pipeline.benchmarks.scale.beam_batches")
    parser.add_argument("run_output", type=Path)
    parser.add_argument("--component", choices=("transform", "statistics"), default="transform")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", choices=("tfx", "batched"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        out = Path(tempfile.mkdtemp(prefix="beam-batches-"))
        run = transform if args.component == "transform" else statistics
        try:
            seconds = run(args.run_output.resolve(), args.one == "batched", out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        record = {"component": args.component, "batching": args.one, "s": round(seconds, 1)}
        print(json.dumps(record))
        return 0
    for _ in range(args.rounds):
        for mode in ("tfx", "batched"):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "amp_pipeline.benchmarks.scale.beam_batches",
                    str(args.run_output),
                    "--component",
                    args.component,
                    "--one",
                    mode,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            print(done.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

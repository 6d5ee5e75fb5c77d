"""`python -m benchmarks.transform_batch RUN_OUTPUT [--rounds N]`: TFX's Transform executor
alone, on a finished run's ExampleGen output and schema, with TFX's own batching and with
components/data/transform.py's batches, alternating, each in a fresh process.

RUN_OUTPUT is the `--output` of a finished `amp-pipeline run` (its ML Metadata gives the
Transform's parameters). Prints one `RESULT batch=B transform_s=S` line per run.
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


def one(root: Path, batched: bool, out: Path) -> float:
    """One Transform in this process: its seconds."""
    from tfx.components.transform import executor as tx
    from tfx.types import artifact_utils, standard_artifacts

    from components.data.transform import BatchedProcessor

    def artifact(kind, uri, splits=()):
        a = kind()
        a.uri = uri
        if splits:
            a.split_names = artifact_utils.encode_split_names(list(splits))
        return [a]

    splits = ("train", "eval")
    inputs = {
        "examples": artifact(
            standard_artifacts.Examples, _latest_uri(root, "CsvExampleGen", "examples"), splits
        ),
        "schema": artifact(standard_artifacts.Schema, _latest_uri(root, "SchemaGen", "schema")),
    }
    outputs = {
        "transform_graph": artifact(standard_artifacts.TransformGraph, str(out / "graph")),
        "transformed_examples": artifact(
            standard_artifacts.Examples, str(out / "examples"), splits
        ),
    }
    context = tx.Executor.Context(beam_pipeline_args=[], tmp_dir=str(out / "tmp"))
    properties = _transform_properties(root / "metadata.sqlite")
    original = tx.TransformProcessor
    tx.TransformProcessor = BatchedProcessor if batched else original
    try:
        start = time.perf_counter()
        tx.Executor(context).Do(inputs, outputs, properties)
        return time.perf_counter() - start
    finally:
        tx.TransformProcessor = original


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.transform_batch")
    parser.add_argument("run_output", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", choices=("tfx", "batched"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        out = Path(tempfile.mkdtemp(prefix="transform-batch-"))
        try:
            seconds = one(args.run_output.resolve(), args.one == "batched", out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        print(json.dumps({"batching": args.one, "transform_s": round(seconds, 1)}))
        return 0
    for _ in range(args.rounds):
        for mode in ("tfx", "batched"):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.transform_batch",
                    str(args.run_output),
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

"""`python -m amp_pipeline.benchmarks.quality.text_models --data CSV --label L --text T`: which text
model at what size?

For each size in `--sizes`, a seeded random sample of that many rows of the CSV (the label and
the text column only) goes through `amp-pipeline run` once per model in `--models` (`ngrams`: the
mean of the embeddings of the words and word pairs; `mlp`: of the words only, fastText's model;
`bert`: the BERT-style encoder, `--bert-size tiny`), everything else at its default but
`--tflite none --speed-rounds 0`. On the same split (the run's own ExampleGen train and eval
examples), the run's own TF-IDF + logistic regression (components/gate/text_baseline.py) is the
reference. Per run: the float32 twin's eval accuracy, the wall time and the
exit code. Writes bench/text_models/text_models.{json,md}; `--model auto`'s size rule
(pipeline/config.py::TEXT_ENCODER_MIN_ROWS) and the figures quoted in RESULTS.md come from it.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from amp_pipeline.benchmarks.records import ROOT, cpu_name, write_report


def sample_csv(data: str, label: str, text: str, n: int, out: Path, seed: int = 0) -> Path:
    with open(data, newline="", encoding="utf-8") as f:
        rows = [{label: r[label], text: r[text]} for r in csv.DictReader(f)]
    picked = np.random.default_rng(seed).permutation(len(rows))[:n]
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=[label, text])
        writer.writeheader()
        writer.writerows(rows[i] for i in picked)
    return out


def tfidf_accuracy(out: Path, label: str, text: str) -> float:
    """The run's own TF-IDF + logistic regression figure (components/gate/text_baseline.py), on its
    split: the same one the run reports."""
    from amp_pipeline.components.gate.text_baseline import text_baseline

    (examples,) = [p for p in (out / "tfx" / "CsvExampleGen" / "examples").iterdir()]
    return float(text_baseline(examples, [text], label)["accuracy"])


def run_model(data: Path, label: str, model: str, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "amp_pipeline",
        "run",
        "--data",
        str(data),
        "--label",
        label,
    ]
    cmd += ["--model", model, "--output", str(out), "--tflite", "none", "--speed-rounds", "0"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}")
    summary = json.loads((out / "run_summary.json").read_text())
    return {
        "model": model,
        "accuracy": summary["fp32"]["accuracy"],
        "wall_s": wall,
        "eval_examples": summary["fp32"].get("eval_examples"),
        "exit_code": proc.returncode,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--sizes", default="1000,4000,16000")
    p.add_argument("--models", default="ngrams,bert")
    p.add_argument("--out", default="bench/text_models")
    args = p.parse_args(argv)
    out = ROOT / args.out
    results: list[dict[str, Any]] = []
    for n in [int(s) for s in args.sizes.split(",")]:
        data = sample_csv(args.data, args.label, args.text, n, out / f"data_{n}.csv")
        row: dict[str, Any] = {"rows": n, "models": {}}
        for model in args.models.split(","):
            result = run_model(data, args.label, model, out / "runs" / f"{model}_{n}")
            row["models"][model] = result
            print(n, json.dumps(result), flush=True)
        row["tfidf_logreg"] = tfidf_accuracy(out / "runs" / f"{model}_{n}", args.label, args.text)
        print(n, "tfidf", row["tfidf_logreg"], flush=True)
        results.append(row)
    machine = cpu_name()
    models = args.models.split(",")
    lines = [
        f"# Text models by size: {Path(args.data).name}, label {args.label} ({machine}, "
        "float32 twin's eval accuracy, pipeline defaults but --tflite none --speed-rounds 0)",
        "",
        "| rows | " + " | ".join(f"{m} acc (wall s)" for m in models) + " | TF-IDF + LR |",
        "|---|" + "---|" * len(models) + "---|",
    ]
    for row in results:
        cells = [
            f"{row['models'][m]['accuracy']:.4f} ({row['models'][m]['wall_s']:.0f})" for m in models
        ]
        lines.append(
            f"| {row['rows']:,} | " + " | ".join(cells) + f" | {row['tfidf_logreg']:.4f} |"
        )
    record = {"machine": machine, "data": args.data, "results": results}
    write_report(out, "text_models", record, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

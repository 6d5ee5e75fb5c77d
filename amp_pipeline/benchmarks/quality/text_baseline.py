"""TF-IDF + logistic regression (scikit-learn) on a finished text run's own split, beside the
twins' eval accuracy: `python -m amp_pipeline.benchmarks.quality.text_baseline OUTPUT_FOLDER`.

Every text classification run computes the same figure itself (components/gate/text_baseline.py, in
its report and summary); this recomputes it for a run folder, and prints it with the run's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from amp_pipeline.components.gate.text_baseline import text_baseline


def _latest(folder: Path) -> Path:
    return max(folder.iterdir(), key=lambda p: int(p.name))


def compare(output: Path) -> dict:
    summary = json.loads((output / "run_summary.json").read_text())
    data = summary["data"]
    features = data.get("text_features") or []
    if not features:
        raise SystemExit(f"{output}: the run has no text feature")
    examples = _latest(output / "tfx" / "CsvExampleGen" / "examples")
    base = text_baseline(examples, features, data["label"])
    return {
        "train_examples": base["train_examples"],
        "eval_examples": base["eval_examples"],
        "tfidf_logreg_accuracy": base["accuracy"],
        "amp_accuracy": summary["amp"]["accuracy"],
        "fp32_accuracy": summary["fp32"]["accuracy"],
        "model": summary["amp"]["model"],
        "policy": summary["policy"],
    }


def main() -> None:
    result = compare(Path(sys.argv[1]))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""A device app's whole job, with LiteRT and numpy only (no TensorFlow): read raw CSV rows, feed
each to a pushed TFLite model, print its answer.

    python predict.py --model <pushed version>/tflite --csv rows.csv [--variant float32]

Each output line is the row's number and the predicted label with its probability
(classification), or the prediction in the label's units (regression). The model folder's
edge_rows.py turns a row into the model's inputs, as the gate checked them; its sidecar
model_<variant>.json says what each input is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--model", required=True, type=Path, help="a pushed tflite/ folder")
    parser.add_argument("--csv", required=True, type=Path, help="raw rows, with a header line")
    parser.add_argument("--variant", default="float32", help="float32, float16, dynamic_int8, int8")
    parser.add_argument("--threads", type=int, default=1, help="XNNPACK threads")
    parser.add_argument(
        "--probabilities", action="store_true", help="also print every class's probability"
    )
    args = parser.parse_args(argv)
    path = args.model / f"model_{args.variant}.tflite"
    if not path.exists():
        here = shipped(args.model) or "none"
        print(f"error: {path}: no such model (variants here: {here})", file=sys.stderr)
        return 2
    sys.path.insert(0, str(args.model))  # the shipped edge_rows.py
    import edge_rows

    card = edge_rows.card(args.model, args.variant)
    runner = Interpreter(model_path=str(path), num_threads=args.threads).get_signature_runner(
        card["signature"]
    )
    output = card["output"]
    try:
        rows = edge_rows.read_csv(args.csv)
        for n, row in enumerate(rows, 1):
            answer = np.asarray(runner(**edge_rows.feed(card, row, args.model))[output["name"]])
            if output["task"] == "regression":
                print(f"{n}\t{float(answer.reshape(-1)[0]):.6g}")
            else:
                probs = answer.reshape(-1)
                k = int(np.argmax(probs))
                every = "".join(f"\t{p:.6f}" for p in probs) if args.probabilities else ""
                print(f"{n}\t{output['classes'][k]}\t{float(probs[k]):.4f}{every}")
    except (KeyError, ValueError, OSError) as e:
        print(f"error: {args.csv}: {e}", file=sys.stderr)
        return 2
    return 0


def shipped(folder: Path) -> str:
    return ", ".join(sorted(p.stem.removeprefix("model_") for p in folder.glob("model_*.tflite")))


if __name__ == "__main__":
    sys.exit(main())

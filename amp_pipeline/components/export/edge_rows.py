"""Raw rows to the TFLite models' inputs, with numpy and the Python standard library only.

This file ships beside the models, as `tflite/edge_rows.py` (with `tflite/tokenizer.py` for
text), so that an app in Python, or a port of it to Kotlin or Swift, builds the inputs the way
the gate checked them. It reads the sidecar `model_<variant>.json`; each input there says its
name, dtype, shape, columns and what a missing cell is:

    import edge_rows
    card = edge_rows.card("tflite")                 # the sidecar
    for row in edge_rows.read_csv("rows.csv"):      # {column: cell}, "" for an empty cell
        feed = edge_rows.feed(card, row, "tflite")  # {input name: numpy array, batch 1}
        out = runner(**feed)                        # LiteRT's signature runner

Cells may be strings (a CSV's), numbers, lists (a vector), bytes or None (missing).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from functools import cache
from pathlib import Path

import numpy as np

INT64_MISSING = -(2**63)  # a missing integer cell
ASCII_WHITESPACE = " \t\n\r\f\v"


def card(folder: str | Path, variant: str = "float32") -> dict:
    """The sidecar of `variant` in a pushed `tflite/` folder (the first one if it is absent)."""
    folder = Path(folder)
    path = folder / f"model_{variant}.json"
    if not path.exists():
        found = sorted(folder.glob("model_*.json"))
        if not found:
            raise FileNotFoundError(f"{folder}: no model_<variant>.json sidecar")
        path = found[0]
    return json.loads(path.read_text(encoding="utf-8"))


def read_csv(path: str | Path) -> list[dict]:
    """A CSV's rows as {column: cell} (cells are strings; "" is an empty cell)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _missing(cell) -> bool:
    if cell is None:
        return True
    if isinstance(cell, float) and math.isnan(cell):
        return True
    return isinstance(cell, (str, bytes)) and len(cell) == 0


def _text(cell) -> str:
    if _missing(cell):
        return ""
    return cell.decode("utf-8") if isinstance(cell, bytes) else str(cell)


def _number(cell) -> float:
    return float("nan") if _missing(cell) else float(cell)


def _integer(cell) -> int:
    if _missing(cell):
        return INT64_MISSING
    if isinstance(cell, (bytes, str)):
        text = _text(cell).strip()
        try:
            return int(text)
        except ValueError:
            return int(float(text))
    return int(cell)


def bag_values(cell, separator: str) -> list[str]:
    """A bag cell's values: split at the separator, stripped of ASCII whitespace, empty ones
    dropped (Transform's rule)."""
    parts = (p.strip(ASCII_WHITESPACE) for p in _text(cell).split(separator))
    return [p for p in parts if p]


def _vector(cell, width: int) -> list[float]:
    if isinstance(cell, (str, bytes)):
        cell = _text(cell).replace(",", " ").split()
    values = [_number(v) for v in (cell or [])][:width]
    return values + [float("nan")] * (width - len(values))


@cache
def _tokenizer(folder: str):
    """tokenizer.py beside this file's models (the pushed folder's), loaded by path."""
    path = Path(folder) / "tokenizer.py"
    if not path.exists():
        path = Path(__file__).with_name("tokenizer.py")
    if not path.exists():  # in the amp-pipeline repository: the same rule's source
        from amp_pipeline.components.data import text

        return text
    spec = importlib.util.spec_from_file_location("amp_edge_tokenizer", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def _vocabulary(path: str) -> tuple[str, ...]:
    with open(path, encoding="utf-8") as f:
        return tuple(line.rstrip("\n") for line in f)


def feed(model_card: dict, row: dict, folder: str | Path) -> dict[str, np.ndarray]:
    """The inputs of one row (batch 1), by the sidecar's `inputs`.

    Raises:
        KeyError: the row lacks a column the model takes (named).
    """
    out = {}
    for spec in model_card["inputs"]:
        missing = [c for c in spec["columns"] or ["x"] if c not in row]
        if missing:
            raise KeyError(f"the row has no column {missing[0]!r} (input {spec['name']!r})")
        cells = [row[c] for c in spec["columns"] or ["x"]]
        kind, width = spec["kind"], (spec["shape"][1] if len(spec["shape"]) > 1 else 1)
        if kind == "x":  # a user preprocessing_fn's output: the app computes it
            out[spec["name"]] = np.array([_vector(row["x"], width)], np.float32)
        elif kind == "pixels":
            values = [_number(c) for c in cells] if len(cells) > 1 else _vector(cells[0], width)
            out[spec["name"]] = np.array([values], np.float32)
        elif kind == "number":
            out[spec["name"]] = np.array([_number(cells[0])], np.float32)
        elif kind == "vector":
            out[spec["name"]] = np.array([_vector(cells[0], width)], np.float32)
        elif kind == "category" and spec["dtype"] == "int64":
            out[spec["name"]] = np.array([_integer(cells[0])], np.int64)
        elif kind in ("string", "category"):
            out[spec["name"]] = np.array([_text(cells[0]).encode("utf-8")])
        elif kind == "bag":
            kept = bag_values(cells[0], spec["separator"])[:width]
            kept += [""] * (width - len(kept))
            out[spec["name"]] = np.array([[v.encode("utf-8") for v in kept]])
        elif kind == "text":
            vocabulary = _vocabulary(str(Path(folder) / spec["vocabulary_file"]))
            ids = _tokenizer(str(Path(folder))).encode(_text(cells[0]), vocabulary, width)
            out[spec["name"]] = np.array([ids], np.int64)
        else:
            raise ValueError(f"input {spec['name']!r}: unknown kind {kind!r}")
    return out

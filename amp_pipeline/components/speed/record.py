"""One speed record, attributed: what AMP bought, as two ratios that never get mixed up.

- *precision ratio*: float32 and the AMP policy at the same batch, XLA setting and threads
  (the AMP trainer's), timed side by side in alternating rounds (components/speed/measurement.py).
  Only the precision differs. The gate's `min_speedup` rule uses it.
- *recipe ratio*: the AMP recipe as its trainer ran it (policy, XLA, batch, threads: autotune
  may change all four) against the float32 baseline as the user configured it, from the two
  trainers' own runs. It is what a user switching recipes gets, but the twins ran one after
  the other, so load on a shared machine lands on one of them only.

Memory is only measured per trainer (each trainer's process), so the memory ratio is a recipe
ratio and is labelled with both sides' batches.
"""

from __future__ import annotations

import math


def _side(figures: dict) -> dict:
    """What a trainer's figure was measured at, and the figure."""
    return {
        "policy": figures.get("policy"),
        "batch_size": figures.get("batch_size"),
        "xla": bool(figures.get("xla")),
        "threads": figures.get("threads") or 0,
        "device": figures.get("device"),
        "examples_per_sec": figures.get("examples_per_sec"),
        "peak_memory_mb": figures.get("peak_memory_mb"),
    }


def label(side: dict) -> str:
    """'mixed_bfloat16, batch 64, xla off, threads default'."""
    threads = side.get("threads") or "default"
    xla = "on" if side.get("xla") else "off"
    return f"{side.get('policy')}, batch {side.get('batch_size')}, xla {xla}, threads {threads}"


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or not math.isfinite(a) or not math.isfinite(b):
        return None
    return a / b


def build(fp32: dict, amp: dict, speed: dict | None) -> dict:
    """The record from both trainers' figures.json and speed.json (SideBySide's result)."""
    fp32_side, amp_side = _side(fp32), _side(amp)
    recipe = {
        "ratio": _ratio(amp_side["examples_per_sec"], fp32_side["examples_per_sec"]),
        "amp": amp_side,
        "fp32": fp32_side,
        "method": "the two trainers' own runs, one after the other (median step time)",
        "same_recipe": all(amp_side[k] == fp32_side[k] for k in ("batch_size", "xla", "threads")),
    }
    speed = speed or {}
    ratio = (speed.get("ratio") or {}).get("median")
    if ratio is not None:
        at = {
            "policy": speed.get("policy"),
            "batch_size": speed.get("batch_size", amp_side["batch_size"]),
            "xla": bool(speed.get("xla")),
            "threads": speed.get("threads") or 0,
        }
        precision = {
            "ratio": ratio,
            "rounds": speed["ratio"],
            "at": at,
            "method": speed.get("method"),
        }
    else:
        precision = {"ratio": None, "skipped": speed.get("skipped") or "not measured"}
    memory = {
        "ratio": _ratio(amp_side["peak_memory_mb"], fp32_side["peak_memory_mb"]),
        "kind": "recipe",
        "amp": {k: amp_side[k] for k in ("policy", "batch_size", "xla", "peak_memory_mb")},
        "fp32": {k: fp32_side[k] for k in ("policy", "batch_size", "xla", "peak_memory_mb")},
        "method": amp.get("memory_method"),
    }
    return {
        "precision": precision,
        "recipe": recipe,
        "memory": memory,
        "gate_uses": "precision" if precision["ratio"] is not None else "recipe",
    }


def lines(record: dict) -> list[str]:
    """The record in words, a line per ratio (the run table, report.md)."""
    out = []
    p = record["precision"]
    if p["ratio"] is not None:
        r = p["rounds"]
        at = dict(p["at"])
        at_text = label({**at, "policy": "both"}).removeprefix("both, ")
        out.append(
            f"precision ratio {p['ratio']:.2f}x ({at['policy']} vs float32, both at {at_text}; "
            f"side by side, {r['n']} rounds {r['min']:.2f}x-{r['max']:.2f}x)"
        )
    else:
        out.append(f"precision ratio not measured: {p['skipped']}")
    rc = record["recipe"]
    ratio = "n/a" if rc["ratio"] is None else f"{rc['ratio']:.2f}x"
    out.append(
        f"recipe ratio {ratio} (AMP as trained: {label(rc['amp'])}; float32 as trained: "
        f"{label(rc['fp32'])}; the trainers' own runs)"
    )
    m = record["memory"]
    mem = "n/a" if m["ratio"] is None else f"{m['ratio']:.2f}x"
    out.append(
        f"memory ratio {mem} amp/fp32, recipe (AMP at batch {m['amp']['batch_size']}, float32 "
        f"at batch {m['fp32']['batch_size']}; {m['method']})"
    )
    return out

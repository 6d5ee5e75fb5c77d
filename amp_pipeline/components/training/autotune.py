"""AMP autotune: measure the candidate recipes briefly on the real model and a real batch, and
train with the fastest one that keeps parity with float32.

The rule table (components/amp/precision.py) was written from one machine's measurements; what is
fastest depends on the model, the input shape, the batch size and the chip. Candidates:

- the policy: float32 and the reduced precisions the hardware supports;
- XLA on and off;
- the batch size x1, x2 and x4 of `--batch-size`, the learning rate scaled linearly with it,
  where the activations fit in memory (components/training/batch_limits.py's estimate);
- on CPU, the intra-op thread count (one probe process per setting: TensorFlow fixes it when
  it starts).

In each probe process the candidates take turns: a few warm-up steps each, then rounds of a few
timed steps each, in alternating order, so that noise lands on all of them; after the second
round a candidate slower than a third of the best is dropped. The parity probe then trains each
survivor's (policy, XLA) from float32's initial weights on the same batches and compares its
loss curve with float32's at the same batch size: only those within the tolerance, with finite
losses and no loss-scale collapse, may win. The whole probe is bounded by a time budget.

The pure parts (candidates, dropping, parity, cache key, choice) are unit-tested; `probe` and
`run` measure.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

from amp_pipeline.components.amp.perf import median

logger = logging.getLogger(__name__)

AUTOTUNE_JSON = "autotune.json"
BATCH_FACTORS = (1, 2, 4)
DROP_SLOWER_THAN = 3.0  # after two rounds: this many times slower than the best -> dropped
PARITY_STEPS = 15
PARITY_TOLERANCE = 0.15  # relative difference of the mean loss over the last steps
DEFAULT_BUDGET_S = 60.0
PARITY_GRACE_S = 10.0  # the parity probe may overrun the budget by this much to finish


class NoMeasurement(RuntimeError):
    """The probe measured no candidate (the budget was too small for the model)."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One recipe to try."""

    policy: str
    xla: bool
    batch_size: int
    learning_rate: float
    threads: int = 0  # 0: TensorFlow's default

    @property
    def key(self) -> str:
        return (
            f"{self.policy}/xla={'on' if self.xla else 'off'}/batch={self.batch_size}"
            f"/threads={self.threads or 'default'}"
        )

    @property
    def recipe(self) -> tuple[str, bool]:
        return (self.policy, self.xla)

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "key": self.key}


def reduced_precisions(device: str, compute_capability: tuple[int, int] | None, features) -> list:
    """The reduced precisions this hardware computes natively."""
    if device == "gpu":
        cc = compute_capability or (0, 0)
        out = ["mixed_float16"] if cc >= (7, 0) else []
        return out + (["mixed_bfloat16"] if cc >= (8, 0) else [])
    if device == "tpu":
        return ["mixed_bfloat16"]
    return ["mixed_bfloat16"] if {"amx_bf16", "avx512_bf16"} & set(features) else []


def candidates(
    precisions: list[str],
    batch_size: int,
    learning_rate: float,
    max_batch: int,
    threads: list[int],
) -> list[Candidate]:
    """Policy (float32 first) x batch (x1, x2, x4, up to `max_batch`, the learning rate scaled
    with it) without XLA, and each policy with XLA at the user's batch (XLA's compile costs
    seconds per shape on a CPU, and its effect does not hinge on the batch), per thread count."""
    out = []
    for t in threads:
        for policy in ["float32", *precisions]:
            for factor in BATCH_FACTORS:
                batch = batch_size * factor
                if factor > 1 and batch > max_batch:
                    continue
                out.append(Candidate(policy, False, batch, learning_rate * factor, t))
            out.append(Candidate(policy, True, batch_size, learning_rate, t))
    return out


def survivors(rates: dict[str, list[float]], drop_factor: float = DROP_SLOWER_THAN) -> dict:
    """{key: reason} of the candidates to drop: median throughput below best / drop_factor."""
    medians = {k: median(v) for k, v in rates.items() if v}
    if not medians:
        return {}
    best = max(medians.values())
    return {
        k: f"{m:,.0f} examples/sec after {len(rates[k])} rounds, under a third of the best "
        f"({best:,.0f}): dropped early"
        for k, m in medians.items()
        if m * drop_factor < best
    }


def parity_ok(losses: list[float], reference: list[float], tolerance: float = PARITY_TOLERANCE):
    """(ok, reason): the candidate's loss curve against float32's (same batches, same weights).

    The mean of the last third of the steps must be within `tolerance` (relative) of float32's,
    and every loss finite.
    """
    if not losses or not all(math.isfinite(x) for x in losses):
        return False, "non-finite loss during the parity probe"
    tail = max(1, len(losses) // 3)
    mine, theirs = sum(losses[-tail:]) / tail, sum(reference[-tail:]) / tail
    gap = abs(mine - theirs) / max(abs(theirs), 1e-6)
    if gap > tolerance:
        return False, (
            f"loss {mine:.4f} vs float32's {theirs:.4f} over the last {tail} probe steps "
            f"({gap:.0%} apart, tolerance {tolerance:.0%})"
        )
    return True, f"loss within {gap:.1%} of float32's over the last {tail} probe steps"


def cache_key(hardware: dict, architecture: str, input_width: int, batch_size: int) -> str:
    """Hardware x model architecture x input shape x batch size, hashed."""
    text = json.dumps(
        {"hardware": hardware, "architecture": architecture, "input": input_width,
         "batch": batch_size},
        sort_keys=True,
    )  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def choose(results: dict[str, dict], parity: dict[tuple, tuple[bool, str]]) -> dict:
    """The winner: the fastest candidate whose (policy, XLA) kept parity; float32 always does.

    `results`: {key: {"candidate": Candidate dict, "median": examples/sec, "dropped": reason}}.
    """
    allowed: list[tuple[str, dict[str, Any], str]] = []
    blocked: list[tuple[str, dict[str, Any], str]] = []
    for key, r in results.items():
        if r.get("dropped") or not r.get("median"):
            continue
        c = r["candidate"]
        ok, reason = (
            (True, "float32")
            if c["policy"] == "float32"
            else parity.get((c["policy"], c["xla"]), (False, "no parity probe"))
        )
        (allowed if ok else blocked).append((key, r, reason))
    if not allowed:
        raise NoMeasurement("no candidate was measured within the budget")
    key, best, _ = max(allowed, key=lambda item: item[1]["median"])
    reduced_tried = [k for k, r in results.items() if r["candidate"]["policy"] != "float32"]
    if (
        best["candidate"]["policy"] == "float32"
        and reduced_tried
        and not any(r["candidate"]["policy"] != "float32" for _, r, _ in allowed)
    ):
        reason = (
            "float32: every reduced-precision candidate failed parity or was dropped "
            f"({'; '.join(f'{k}: {why}' for k, _, why in blocked[:3]) or 'dropped early'})"
        )
    else:
        reason = f"fastest of {len(allowed)} candidates that kept parity"
    return {"key": key, "candidate": best["candidate"], "examples_per_sec": best["median"],
            "reason": reason}  # fmt: skip


def _model(spec, policy: str, xla: bool, batch_size: int, learning_rate: float):
    from amp_pipeline.components.training.model_building import build_fresh, compile_model

    sub = dataclasses.replace(
        spec,
        policy=policy,
        xla=xla,
        loss_scaling=policy == "mixed_float16",
        batch_size=batch_size,
        learning_rate=learning_rate,
    )
    model, _ = build_fresh(sub, policy)  # same seed: same initial weights
    compile_model(sub, model, xla)
    return model


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:200]


def probe(
    spec,
    cands: list[Candidate],
    budget_s: float,
    max_rounds: int = 6,
    steps: int = 5,
    parity: bool = True,
):
    """Throughput of each candidate and the parity probe of the surviving reduced-precision
    recipes, within `budget_s`.

    One model per (policy, XLA): its batch-size candidates share it (a batch shape is one more
    trace). Warm-up (trace, compile) is 2 steps per candidate and may take half of the time
    before the parity reserve: a large model on a small CPU warms up only the first candidates,
    and those are then measured rather than none. Then rounds of `steps` timed steps each, in
    alternating order; after each round a candidate under a third of the best is dropped (from
    the second round on). A quarter of the budget is kept for the parity probe.
    """
    from amp_pipeline.components.amp.perf import timed_steps
    from amp_pipeline.components.training.datasets import host_batches

    start = time.monotonic()
    deadline = start + budget_s
    reserve = budget_s * 0.25 if parity else 0.0
    warm_until = start + (budget_s - reserve) / 2
    results: dict[str, dict[str, Any]] = {
        c.key: {"candidate": c.to_dict(), "rates": [], "dropped": None} for c in cands
    }
    batches = {b: host_batches(spec, b, 3) for b in sorted({c.batch_size for c in cands})}
    models: dict[Any, Any] = {}
    live: list[Candidate] = []
    # Cheap first: without XLA (a trace) before with XLA (a compile, seconds on a CPU); each
    # batch size for every policy before the next size, so that the head-to-head at the user's
    # batch is warm first; what the budget cannot warm up is reported as such.
    for c in sorted(cands, key=lambda c: (c.xla, c.batch_size, c.policy != "float32")):
        if live and time.monotonic() > warm_until:
            results[c.key]["dropped"] = "not warmed up within the budget"
            continue
        try:
            if c.recipe not in models:
                models[c.recipe] = _model(spec, c.policy, c.xla, spec.batch_size, c.learning_rate)
            timed_steps(models[c.recipe], batches[c.batch_size], 2)  # trace (and compile)
            live.append(c)
        except Exception as e:  # noqa: BLE001 - a recipe that cannot run is a dropped candidate
            results[c.key]["dropped"] = f"failed: {_first_line(e)}"
    # One untimed round first: a model that has seen several batch shapes traces once more
    # (TensorFlow generalises the shape), which must not count against the first one timed.
    for c in live:
        timed_steps(models[c.recipe], batches[c.batch_size], 1)
    for r in range(max_rounds):
        if time.monotonic() > deadline - reserve or not live:
            break
        for c in live if r % 2 == 0 else list(reversed(live)):
            seconds = timed_steps(models[c.recipe], batches[c.batch_size], steps)
            results[c.key]["rates"].append(c.batch_size * steps / seconds)
        if r >= 1:  # two rounds of evidence before dropping anything
            for key, reason in survivors({c.key: results[c.key]["rates"] for c in live}).items():
                results[key]["dropped"] = reason
            live = [c for c in live if not results[c.key]["dropped"]]
    for rec in results.values():
        rec["median"] = median(rec["rates"]) if rec["rates"] else None
        rec["spread"] = [min(rec["rates"]), max(rec["rates"])] if rec["rates"] else None
        if not rec["rates"] and not rec["dropped"]:
            rec["dropped"] = "not measured within the budget"
    models.clear()
    checked = parity_probe(spec, cands, results, deadline) if parity else {}
    return {"results": results, "parity": checked}


def parity_probe(spec, cands: list[Candidate], results: dict, deadline: float) -> dict:
    """{(policy, xla): (ok, reason)} for the reduced-precision recipes still in the race: their
    loss curve against float32's, from the same weights on the same batches, at the user's
    batch size."""
    from amp_pipeline.components.amp.loss_scale import LossScaleMonitor
    from amp_pipeline.components.training.datasets import host_batches

    recipes = {c.recipe for c in cands if c.policy != "float32" and not results[c.key]["dropped"]}
    if not recipes:
        return {}
    batches = host_batches(spec, spec.batch_size, PARITY_STEPS)

    def curve(policy: str, xla: bool) -> tuple[list[float], str | None]:
        model = _model(spec, policy, xla, spec.batch_size, spec.learning_rate)
        monitor = LossScaleMonitor(patience=5, learning_rate=spec.learning_rate)
        monitor.set_model(model)
        losses = []
        for x, y in batches:
            logs = model.train_on_batch(x, y, return_dict=True)
            losses.append(float(logs["loss"]))
            monitor.on_train_batch_end(0, logs)
        return losses, monitor.collapse

    reference, _ = curve("float32", False)
    out = {}
    for policy, xla in sorted(recipes):
        if time.monotonic() > deadline + PARITY_GRACE_S:
            out[(policy, xla)] = (False, "no time left for the parity probe")
            continue
        losses, collapse = curve(policy, xla)
        ok, reason = parity_ok(losses, reference)
        if collapse:
            ok, reason = False, f"loss scale collapsed: {collapse}"
        out[(policy, xla)] = (ok, reason)
    return out


# -- orchestration (in the trainer's parent process) ------------------------------------------


def thread_options(device: str, cores: int) -> list[int]:
    """Intra-op thread counts worth trying: on CPU, one and all cores (and half, from 4)."""
    if device != "cpu" or cores <= 1:
        return [0]
    return sorted({1, max(1, cores // 2), cores}) if cores >= 4 else [1, cores]


def run(spec, hardware, run_dir: Path, budget_s: float, cache: Path | None, refresh: bool) -> dict:
    """Probes (one process per thread count), chooses, writes autotune.json; returns it.

    A cached winner for the same hardware, architecture, input and batch size is reused unless
    `refresh`.
    """
    import os

    from amp_pipeline.core import names
    from amp_pipeline.core.child_process import run_module

    architecture = json.dumps(
        {"model": spec.model, "options": spec.model_options, "module": spec.model_module},
        sort_keys=True,
    )
    width = _input_width(spec)
    key = cache_key(hardware.to_dict(), architecture, width, spec.batch_size)
    cached = _read_cache(cache).get(key) if cache and not refresh else None
    if cached:
        report = {**cached, "cached": True, "cache_key": key}
        (run_dir / AUTOTUNE_JSON).write_text(json.dumps(report, indent=2))
        return report
    threads = thread_options(hardware.device, os.cpu_count() or 1)
    others = [t for t in threads if t != 0]
    results: dict[str, dict[str, Any]] = {}
    parity: dict[tuple[str, bool], tuple[bool, str]] = {}
    spec_path = run_dir / f"autotune_{names.TRAIN_SPEC_JSON}"
    spec_path.write_text(spec.to_json())

    crashes: list[str] = []

    def probe_process(t: int, budget: float, only: list[dict] | None) -> dict | None:
        out = run_dir / f"autotune_threads{t}.json"
        args: list[str | os.PathLike[str] | int] = [spec_path, out, t, str(budget)]
        if only is not None:
            given = run_dir / f"autotune_threads{t}_candidates.json"
            given.write_text(json.dumps(only))
            args.append(given)
        log = run_dir / f"autotune_threads{t}.log"
        proc = run_module("amp_pipeline.components.training.autotune_process", args, log)
        if proc.returncode != 0:
            logger.warning("autotune probe with %s threads failed (exit %s)", t, proc.returncode)
            crashes.append(
                f"the probe with {t or 'default'} threads crashed (exit {proc.returncode}; "
                f"log: {run_dir / f'autotune_threads{t}.log'})"
            )
            return None
        return json.loads(out.read_text())

    # Every candidate with TensorFlow's default threads; then the two fastest again at each
    # other thread count (a process each: TensorFlow fixes its threads when it starts).
    first = probe_process(0, budget_s * (0.7 if others else 1.0), None)
    if first:
        results.update(first["results"])
        parity.update({tuple(json.loads(k)): tuple(v) for k, v in first["parity"].items()})
        leaders = sorted(
            (r for r in first["results"].values() if r.get("median") and not r.get("dropped")),
            key=lambda r: -r["median"],
        )[:2]
        for t in others if leaders else []:
            found = probe_process(
                t, budget_s * 0.3 / len(others), [r["candidate"] for r in leaders]
            )
            if found:
                results.update(found["results"])
    try:
        winner = choose(results, parity)
    except NoMeasurement:
        winner = fallback(spec, hardware, budget_s, crashes)
    report = {
        "hardware": hardware.to_dict(),
        "cache_key": key,
        "cached": False,
        "budget_s": budget_s,
        "threads_tried": threads,
        "candidates": results,
        "parity": [
            {"policy": p, "xla": x, "ok": ok, "reason": why} for (p, x), (ok, why) in parity.items()
        ],
        "winner": winner,
        "rule_table": {"policy": None},  # filled by the caller that knows the rule's choice
    }
    (run_dir / AUTOTUNE_JSON).write_text(json.dumps(report, indent=2))
    if cache:
        write_cache(cache, key, report)
    return report


def fallback(spec, hardware, budget_s: float, crashes: list[str] | None = None) -> dict:
    """The rule table's recipe, when the probe measured nothing: because it crashed (named,
    with its log), or because the budget ran out."""
    from amp_pipeline.components.amp.precision import choose_recipe

    rule = choose_recipe(hardware)
    candidate = Candidate(rule.policy, rule.xla, spec.batch_size, spec.learning_rate)
    if crashes:
        why = f"{'; '.join(crashes)}: the rule table's recipe ({rule.reason})"
    else:
        why = (
            f"the probe measured no candidate within {budget_s:.0f} s: the rule table's "
            f"recipe ({rule.reason}); raise --autotune-budget-s"
        )
    return {
        "key": candidate.key,
        "candidate": candidate.to_dict(),
        "examples_per_sec": None,
        "reason": why,
    }


def _input_width(spec) -> int:
    from amp_pipeline.components.training.model_building import input_width

    return input_width(spec)


def write_cache(cache: Path, key: str, report: dict) -> None:
    """Adds `report` under `key` to the cache file, whole or not at all: a temporary file
    beside it, then one rename (runs in other folders share the cache, and a reader must never
    see half a file)."""
    import os

    entries = _read_cache(cache)
    entries[key] = {k: v for k, v in report.items() if k not in ("cached", "cache_key")}
    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
    try:
        staging.write_text(json.dumps(entries, indent=2))
        staging.replace(cache)
    finally:
        staging.unlink(missing_ok=True)


def _read_cache(path: Path | None) -> dict:
    if path is None or not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except ValueError:
        return {}


def apply(spec, winner: dict):
    """The spec the AMP twin trains with: the winning recipe (learning rate scaled with the
    batch, as the candidate says)."""
    c = winner["candidate"]
    factor = max(1, c["batch_size"] // spec.batch_size)
    return dataclasses.replace(
        spec,
        policy=c["policy"],
        xla=c["xla"],
        loss_scaling=c["policy"] == "mixed_float16",
        batch_size=c["batch_size"],
        learning_rate=c["learning_rate"],
        # The same examples seen as the float32 twin: the learning rate scales with the batch
        # (linear scaling), and the steps shrink with it.
        train_steps=max(1, math.ceil(spec.train_steps / factor)),
        intra_op_threads=c["threads"],
    )


def scaling_note(spec, winner: dict) -> str:
    """How the winner changes the user's batch, learning rate and steps, in words."""
    c = winner["candidate"]
    factor = max(1, c["batch_size"] // spec.batch_size)
    if factor == 1:
        return "the batch size, learning rate and steps as given"
    return (
        f"batch {c['batch_size']} ({factor}x --batch-size), learning rate "
        f"{c['learning_rate']:g} ({factor}x, linear scaling) and {factor}x fewer steps: the "
        "same examples as the float32 twin"
    )

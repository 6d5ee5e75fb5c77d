"""`python -m amp_pipeline.benchmarks.gate.noise`: does the gate's decision hold when the run is
repeated?

- `--repeats N`: N back-to-back `amp-pipeline run --no-cache` on the embedded digits; the gate's
  side-by-side speedup and the trainers' own ratio of each.
- `--hog`: one more run with a CPU hog (a busy process per core) running only while the AMP
  twin trains: the trainers' ratio takes the hit, the side-by-side one (measured after both
  trained, on both alike) should not.
- `--seeds 1,2,3,4,5`: one run per seed; the accuracy-parity outcome and interval of each.

Every run is a fresh process with its own output folder; the figures come from its
run_summary.json. Results: `gate_noise.json` and `gate_noise.md` under `--out`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

from amp_pipeline.benchmarks.records import ROOT
from amp_pipeline.core import names


def _busy(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


class Hog:
    """A busy process per core, started and stopped on demand."""

    def __init__(self, processes: int | None = None):
        self.processes = processes or psutil.cpu_count() or 2
        self._stop = multiprocessing.Event()
        self._procs: list[multiprocessing.Process] = []

    def start(self) -> None:
        self._stop.clear()
        self._procs = [
            multiprocessing.Process(target=_busy, args=(self._stop,), daemon=True)
            for _ in range(self.processes)
        ]
        for p in self._procs:
            p.start()

    def stop(self) -> None:
        self._stop.set()
        for p in self._procs:
            p.join(timeout=5)
        self._procs = []


def _trainer_of(pid: int, node: str) -> psutil.Process | None:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return None
    for child in children:
        try:
            cmd = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "amp_pipeline.components.training.process" in cmd and f"/{node}/" in cmd:
            return child
    return None


def run_once(out: Path, *args: str, hog_during: str | None = None) -> dict:
    """One `run --no-cache`; with `hog_during` (a trainer node), the hog runs while it trains."""
    if out.exists():
        shutil.rmtree(out)
    cmd = [
        sys.executable,
        "-m",
        "amp_pipeline",
        "run",
        "--output",
        str(out),
        "--no-cache",
        *args,
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    hogged = 0.0
    if hog_during:
        hog = Hog()
        trainer = None
        while proc.poll() is None and trainer is None:
            trainer = _trainer_of(proc.pid, hog_during)
            time.sleep(0.1)
        if trainer is not None:
            start = time.perf_counter()
            hog.start()
            try:
                trainer.wait()
            except psutil.Error:
                pass
            hog.stop()
            hogged = time.perf_counter() - start
    _, err = proc.communicate()
    summary = json.loads((out / names.RUN_SUMMARY_JSON).read_text())
    if summary.get("status") not in ("promoted", "rejected"):
        raise RuntimeError(f"run failed: {err.decode()[-400:]}")
    gate = summary["gate"]
    rules = {r["name"]: r for r in (gate.get("twins") or {}).get("amp", gate)["rules"]}
    speed = summary.get("speed") or {}
    return {
        "status": summary["status"],
        "gate_speedup": summary["speedup"],
        "gate_speedup_rounds": (speed.get("ratio") or {}),
        "trainers_speedup": summary.get("speedup_trainers"),
        "fp32_accuracy": summary["fp32"]["accuracy"],
        "amp_accuracy": summary["amp"]["accuracy"],
        "parity": {
            k: rules["accuracy_parity"].get(k)
            for k in ("outcome", "value", "interval", "n", "seeds", "discordant")
        },
        "hog_seconds": hogged,
        "args": list(args),
    }


def to_markdown(result: dict) -> str:
    m = result["machine"]
    lines = [
        f"# Gate noise ({m.get('microarchitecture', m.get('cpu'))}, {m.get('cores')} cores)",
        "",
    ]
    if result.get("repeats"):
        lines += [
            "| run | gate speedup (side by side) | rounds min-max | trainers' ratio |",
            "|---|---|---|---|",
        ]
        for i, r in enumerate(result["repeats"], 1):
            rr = r["gate_speedup_rounds"]
            lines.append(
                f"| {i} | {r['gate_speedup']:.2f}x | {rr.get('min', 0):.2f}-"
                f"{rr.get('max', 0):.2f} | {r['trainers_speedup']:.2f}x |"
            )
        s = result["repeat_spread"]
        lines += [
            "",
            f"Gate speedups within {s['max_deviation']:.1%} of their median "
            f"{s['median']:.2f}x (target: 10%).",
        ]
    if result.get("hog"):
        h, q = result["hog"], result["repeats"][0] if result.get("repeats") else None
        lines += ["", "| run | gate speedup | trainers' ratio |", "|---|---|---|"]
        if q:
            lines.append(f"| quiet | {q['gate_speedup']:.2f}x | {q['trainers_speedup']:.2f}x |")
        lines.append(
            f"| CPU hog during {h['hog_during']} ({h['hog_seconds']:.0f} s) | "
            f"{h['gate_speedup']:.2f}x | {h['trainers_speedup']:.2f}x |"
        )
    if result.get("seeds"):
        lines += [
            "",
            "| seed | fp32 | amp | parity outcome | change | 95% interval | n |",
            "|---|---|---|---|---|---|---|",
        ]
        for s in result["seeds"]:
            p = s["parity"]
            lines.append(
                f"| {s['seed']} | {s['fp32_accuracy']:.4f} | {s['amp_accuracy']:.4f} | "
                f"{p['outcome']} | {p['value']:+.4f} | [{p['interval'][0]:+.4f}, "
                f"{p['interval'][1]:+.4f}] | {p['n']} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from amp_pipeline.benchmarks.records import machine

    parser = argparse.ArgumentParser(
        prog="python -m amp_pipeline.benchmarks.gate.noise", description=__doc__
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--hog", choices=("none", "TrainerAmp", "TrainerFp32"), default="TrainerAmp"
    )
    parser.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated; '' for none")
    parser.add_argument("--out", type=Path, default=Path("bench/gate"))
    parser.add_argument("run_args", nargs="*", help="extra `amp-pipeline run` flags")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"machine": machine()}

    def save() -> None:
        (args.out / "gate_noise.json").write_text(json.dumps(result, indent=2))

    result["repeats"] = []
    for i in range(args.repeats):
        result["repeats"].append(run_once(args.out / f"repeat{i}", *args.run_args))
        print(f"repeat {i + 1}: {result['repeats'][-1]}", flush=True)
        save()
    if result["repeats"]:
        values = [r["gate_speedup"] for r in result["repeats"]]
        median = sorted(values)[len(values) // 2]
        result["repeat_spread"] = {
            "median": median,
            "max_deviation": max(abs(v - median) / median for v in values),
        }
    if args.hog != "none":
        hog = run_once(args.out / "hog", *args.run_args, hog_during=args.hog)
        result["hog"] = {**hog, "hog_during": args.hog}
        print(f"hog: {result['hog']}", flush=True)
        save()
    result["seeds"] = []
    for seed in [s for s in args.seeds.split(",") if s]:
        r = run_once(args.out / f"seed{seed}", "--seed", seed, *args.run_args)
        result["seeds"].append({"seed": int(seed), **r})
        print(f"seed {seed}: {r['parity']}", flush=True)
        save()
    save()
    (args.out / "gate_noise.md").write_text(to_markdown(result))
    print(to_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

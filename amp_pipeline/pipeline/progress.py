"""Console progress: the run's header (what runs on what, spans, warm start, the data's notices),
then one line per TFX component with its elapsed time; the full log to a file."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from amp_pipeline.pipeline.config import RunConfig, model_for, model_reason, steps_text

HEARTBEAT_SECONDS = 10.0
RSS_SAMPLE_SECONDS = 0.2
ROWS = re.compile(r"progress: ([\d,]+) rows")


class ProgressHandler(logging.Handler):
    """Turns LocalDagRunner's 'Component X is running/finished.' records into progress lines,
    and shows that a long component is moving: every `heartbeat` seconds a line with its
    elapsed time (and rows read, where the component logs them)."""

    def __init__(self, stream: TextIO, total: int = 0, heartbeat: float = HEARTBEAT_SECONDS):
        super().__init__(level=logging.INFO)
        self.total = total
        self.stream = stream
        self.done = 0
        self.started = time.monotonic()
        self.heartbeat = heartbeat
        self._current: str | None = None
        self._t0 = 0.0
        self._cached = False
        self._rows: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.timings: dict[str, float] = {}
        self.peak_rss_mb: dict[str, float] = {}
        self._sampler: threading.Thread | None = None

    def start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="progress", daemon=True)
        self._thread.start()
        self._sampler = threading.Thread(target=self._sample, name="rss", daemon=True)
        self._sampler.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        for thread in (self._thread, self._sampler):
            if thread is not None:
                thread.join(timeout=2)

    def _sample(self) -> None:
        """The driver's resident set every RSS_SAMPLE_SECONDS, its peak kept per component
        (the component running when it was read): where the driver's memory goes."""
        while not self._stop.wait(RSS_SAMPLE_SECONDS):
            rss = resident_mb()
            name = self._current
            if name is not None and rss is not None:
                self.peak_rss_mb[name] = max(self.peak_rss_mb.get(name, 0.0), rss)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            with self._lock:
                if self._current is None or time.monotonic() - self._t0 < self.heartbeat:
                    continue
                rows = f"   {self._rows} rows" if self._rows else ""
                end = "\r" if self.stream.isatty() else "\n"
                self.stream.write(
                    f"  [{self.done + 1:2d}/{self.total}] {self._current:<20} running "
                    f"{time.monotonic() - self._t0:5.0f}s{rows}{end}"
                )
                self.stream.flush()

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock:
            self._emit(record)

    def _emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        rows = ROWS.search(msg) if self._current else None
        if rows:
            self._rows = rows.group(1)
        if msg.startswith("Component ") and msg.endswith(" is running."):
            self._current = msg[len("Component ") : -len(" is running.")]
            self._t0 = time.monotonic()
            self._cached = False
            self._rows = None
            if self.stream.isatty():
                self.stream.write(f"  [{self.done + 1:2d}/{self.total}] {self._current} ...\r")
                self.stream.flush()
        elif msg.startswith("A cached execution"):
            self._cached = True
        elif msg.startswith("Component ") and msg.endswith(" is finished."):
            name = msg[len("Component ") : -len(" is finished.")]
            elapsed = time.monotonic() - self._t0
            self.timings[name] = elapsed
            self.done += 1
            note = "cached" if self._cached else "done"
            total = time.monotonic() - self.started
            self.stream.write(
                f"  [{self.done:2d}/{self.total}] {name:<20} {note:<6} {elapsed:6.1f}s"
                f"   (total {total:5.1f}s)\n"
            )
            self.stream.flush()
            self._current = None

    @property
    def current(self) -> str | None:
        """The component that was running when the last record came, if unfinished."""
        return self._current


def resident_mb() -> float | None:
    """This process's resident set now, from /proc/self/statm (None where it cannot be read)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


@contextlib.contextmanager
def captured_output(log_path: Path) -> Iterator[tuple[ProgressHandler, TextIO]]:
    """Sends logging and the process's stderr (TF, Beam) to `log_path`; yields the progress
    handler and a stream to the real terminal for user-facing lines."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    console = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    saved_err = os.dup(2)
    log_file = open(log_path, "a", buffering=1)  # noqa: SIM115
    os.dup2(log_file.fileno(), 2)
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    for h in saved_handlers:
        root.removeHandler(h)
    file_handler = logging.StreamHandler(log_file)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    progress = ProgressHandler(console)
    root.addHandler(file_handler)
    root.addHandler(progress)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    progress.start_heartbeat()
    try:
        yield progress, console
    finally:
        progress.stop_heartbeat()
        root.removeHandler(file_handler)
        root.removeHandler(progress)
        for h in saved_handlers:
            root.addHandler(h)
        root.setLevel(saved_level)
        sys.stderr.flush()
        os.dup2(saved_err, 2)
        os.close(saved_err)
        try:
            log_file.close()
        except OSError:  # a full disk: the run's own error says so, in one line
            pass
        console.flush()


def warm_start_text(config: RunConfig) -> str:
    """What --warm-start means for this run, before it trains: the trainers decide whether the
    production model matches (components/training/warm_start.py), the table says what they did."""
    from amp_pipeline.components.data.spans.selection import has_spans
    from amp_pipeline.components.training import warm_start

    if config.train.warm_start == "off":
        return "off (--warm-start off): both twins train from scratch"
    if not warm_start.wanted(config.train.warm_start, bool(config.data and has_spans(config.data))):
        return f"from scratch: {warm_start.AUTO_WITHOUT_SPANS}"
    folder = config.serving_dir / config.model_name
    versions = (
        sorted(p.name for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []
    )
    if not versions:
        return f"{config.train.warm_start}: no production model yet, both twins train from scratch"
    return (
        f"{config.train.warm_start}: both twins start from production model {versions[-1]} "
        "if its model, features and classes match this run's (vocabularies remapped by value); "
        "else from scratch, and the table says why"
    )


def write_header(terminal, config: RunConfig, data, recipe, probe: dict | None = None) -> None:
    """The run's first lines: warnings, what runs on what, the recipe's probe (does this
    model's largest matmul gain in the AMP precision here?), every notice about the data."""
    for warning in recipe.warnings:
        terminal.write(f"WARNING: {warning}\n")
    from amp_pipeline.components.data.report import task_text

    terminal.write(
        f"amp-pipeline: {data.source} ({data.rows} rows, {task_text(data)}), "
        f"model {model_for(config, data)}, AMP policy {recipe.policy} [{recipe.reason}]\n"
    )
    if probe is not None:
        from amp_pipeline.components.amp.diagnosis import probe_text

        terminal.write(f"  probe: {probe_text(probe)}\n")
    reason = model_reason(config, data)
    if reason:
        terminal.write(f"  model: {reason}\n")
    terminal.write(f"  steps: {steps_text(config, data)}\n")
    if data.spans:
        from amp_pipeline.components.data.spans.selection import describe

        terminal.write(f"  spans: {describe(data.spans)}, {data.rows:,} rows\n")
    terminal.write(f"  warm start: {warm_start_text(config)}\n")
    for notice in data.notices:
        terminal.write(f"  note: {notice}\n")
    if (data.text_features or data.categorical_features or data.bag_features) and (
        "int8" in config.train.tflite_variants
    ):
        what = "a text model" if data.text_features else "a model with category ids"
        terminal.write(
            f"  note: no int8 TFLite variant for {what}: full-integer quantization "
            "would put its ids on 256 levels (float32, float16 and dynamic_int8 "
            "are built)\n"
        )
    elif data.regression and "int8" in config.train.tflite_variants:
        terminal.write(
            "  note: no int8 TFLite variant for a regression label: full-integer quantization "
            "puts the answer on 256 levels and clips unseen inputs (float32, float16 and "
            "dynamic_int8 are built)\n"
        )

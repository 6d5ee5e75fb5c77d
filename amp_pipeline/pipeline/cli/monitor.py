"""`amp-pipeline monitor --run RUN --requests DIR [--output MON]`: the logged traffic of the run's
model against its training data (pipeline/monitor/). Exit 0: nothing beyond a threshold; 4: skew,
drift, a schema anomaly or prediction drift, the first finding in one line; 2: bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from amp_pipeline.core import cli_help
from amp_pipeline.core.argtypes import positive_float
from amp_pipeline.core.errors import EXIT_BAD_INPUT, InputError


def add_parser(sub) -> None:
    p = cli_help.command(
        sub,
        "monitor",
        "skew, drift and anomalies of logged requests against the run's training data",
        "Reads the requests `serve --log-requests` logged, compares their features and the "
        "served answers with the run's training data and eval answers (and with the previous "
        "window's), and writes monitor.json, monitor.md and plots. With --labels, it also "
        "scores the logged answers against true labels. A shadow's answers are judged too.",
        [
            "amp-pipeline monitor --run output --requests output/requests",
            "amp-pipeline monitor --run output --requests output/requests --labels truth.csv "
            "--key order_id",
        ],
        (0, 1, 2, 4),
    )
    p.add_argument("--run", type=Path, required=True, help="the run's output folder")
    p.add_argument(
        "--requests", type=Path, required=True, help="the folder `serve --log-requests` wrote"
    )
    p.add_argument(
        "--output",
        type=Path,
        help="where monitor.json, monitor.md and the plots go, and the window kept for the "
        "next run's drift (default: RUN/monitor)",
    )
    p.add_argument(
        "--categorical-threshold",
        type=positive_float,
        default=0.1,
        help="L-infinity distance of a string feature beyond which it has moved "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--numeric-threshold",
        type=positive_float,
        default=0.1,
        help="Jensen-Shannon divergence of a numeric feature beyond which it has moved "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--prediction-threshold",
        type=positive_float,
        default=0.1,
        help="the same for the served answers against the eval split's (default: %(default)s)",
    )
    p.add_argument("--labels", type=Path, help="CSV of true labels for logged requests")
    p.add_argument("--key", help="the --labels column, a request feature, that joins them")
    p.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")


def cmd_monitor(args: argparse.Namespace) -> int:
    from amp_pipeline.pipeline.monitor.check import MonitorOptions, monitor
    from amp_pipeline.pipeline.monitor.drift import Thresholds

    try:
        if (args.labels is None) != (args.key is None):
            raise InputError("--labels and --key go together: the CSV and its request-key column")
        options = MonitorOptions(
            run=args.run,
            requests=args.requests,
            output=args.output or args.run / "monitor",
            thresholds=Thresholds(
                args.categorical_threshold, args.numeric_threshold, args.prediction_threshold
            ),
            labels=args.labels,
            key=args.key,
            track=not args.no_tracking,
        )
        result, code = monitor(options)
    except InputError as e:
        print(f"amp-pipeline: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = Path(options.output)
    print(
        f"monitor: {result['examples']} served examples of {result['model']} version "
        f"{result['production_version']}: {result['verdict']}; {out / 'monitor.md'}"
    )
    window = result.get("window") or {}
    if window.get("since"):
        print(
            f"  window: {window['records']} records logged since the last check ({window['since']})"
        )
    if result.get("few_examples"):
        print("  note: fewer than 100 examples: the distances are noisy")
    shadow = result.get("shadow")
    if shadow:
        from amp_pipeline.pipeline.monitor.report import shadow_lines

        print("  " + " ".join(line for line in shadow_lines(shadow) if line))
    for line in result["flagged"][1:]:
        print(f"  {line}")
    if result["flagged"]:  # the first finding, one line, last on stderr for a scheduler's log
        more = len(result["flagged"]) - 1
        also = f" (and {more} more in monitor.md)" if more else ""
        print(f"amp-pipeline: monitor: {result['flagged'][0]}{also}", file=sys.stderr)
    return code

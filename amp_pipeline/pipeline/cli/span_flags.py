"""The flags that pick spans of a `{SPAN}` pattern and judge the drift between them
(components/data/spans/): `run`, `compile`, `check-model` and `inspect` read them alike."""

from __future__ import annotations

from amp_pipeline.core import argtypes
from amp_pipeline.core.cli_help import AddsFlags
from amp_pipeline.pipeline.config import RunConfig

DEFAULTS = RunConfig()


def add_span_flags(p: AddsFlags) -> None:
    p.add_argument(
        "--span",
        type=argtypes.count,
        default=None,
        help="with {SPAN} in --data (e.g. 'exports/span-{SPAN}/*.csv'): the span to train on "
        "(default: the newest)",
    )
    p.add_argument(
        "--rolling-spans",
        type=argtypes.positive,
        default=DEFAULTS.rolling_spans,
        metavar="K",
        help="with {SPAN} in --data: train on the K consecutive spans ending at --span "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--drift",
        choices=("warn", "fail"),
        default=DEFAULTS.drift,
        help="with {SPAN} in --data: a drift between the newest span and the one before, past "
        "the thresholds in span_drift_schema.pbtxt, warns or stops the run before training "
        "(exit 2) (default: %(default)s)",
    )

"""Which Beam runner a component's pipeline args name."""

from __future__ import annotations

from collections.abc import Sequence


def runs_locally(beam_args: Sequence[object]) -> bool:
    """Whether these Beam args run the DirectRunner (no --runner, or --runner=DirectRunner).
    An arg that is not a string (a TFX placeholder, resolved on the cluster) names no runner."""
    runners = [
        a.split("=", 1)[1] for a in beam_args if isinstance(a, str) and a.startswith("--runner=")
    ]
    return all(r in ("DirectRunner", "direct") for r in runners)

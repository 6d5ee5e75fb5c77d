"""Which Beam runner a component's pipeline args name."""

from __future__ import annotations


def runs_locally(beam_args: list[str]) -> bool:
    """Whether these Beam args run the DirectRunner (no --runner, or --runner=DirectRunner)."""
    runners = [a.split("=", 1)[1] for a in beam_args if a.startswith("--runner=")]
    return all(r in ("DirectRunner", "direct") for r in runners)

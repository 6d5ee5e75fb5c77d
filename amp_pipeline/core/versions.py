"""What amp-pipeline runs on: its version and its stack's, for `--version` and `doctor`."""

from __future__ import annotations

from amp_pipeline import __version__

STACK = ("tensorflow", "tfx", "keras", "mlflow")


def versions() -> str:
    """amp-pipeline's version and those of the stack it runs on (read from the installed
    packages' metadata: nothing is imported)."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    stack = ", ".join(f"{n} {of(n)}" for n in STACK)
    return f"amp-pipeline {__version__} ({stack})"

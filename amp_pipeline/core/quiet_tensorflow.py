"""TensorFlow's import without its CUDA plugin registration noise.

Importing TensorFlow 2.16 prints three lines at level E from C++ on every machine, GPU or not:
"Unable to register cuFFT factory / cuDNN factory / cuBLAS factory: Attempting to register
factory for plugin ... when one has already been registered" (tensorflow/tensorflow#62075).
They are not errors, and TF_CPP_MIN_LOG_LEVEL cannot drop them without dropping real errors.
`install()` makes the first `import tensorflow` run with file descriptor 2 captured, then
writes back every captured line except those three, in order. Nothing else is hidden."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import tempfile
from types import ModuleType
from typing import Any

NOISE = re.compile(rb"Unable to register cu(FFT|DNN|BLAS) factory: Attempting to register")


def filtered(captured: bytes) -> bytes:
    """`captured` without the registration lines."""
    return b"".join(ln for ln in captured.splitlines(keepends=True) if not NOISE.search(ln))


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any):
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self.inner.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as capture:
            os.dup2(capture.fileno(), 2)
            try:
                self.inner.exec_module(module)
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                capture.seek(0)
                os.write(2, filtered(capture.read()))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once: the real finders locate it
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Filters the first `import tensorflow` of this process (a no-op once it is imported)."""
    if "tensorflow" in sys.modules or any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder())

"""The models a local server serves: `<base>/<version>/saved_model.pb`, loaded and hot-loaded.

A model directory is laid out as TF Serving (and the Pusher) lay it out: numbered version
folders under one base path per model. `ModelRepository` accepts either one model base
(`output/serving/digits`, served as `digits`) or a folder of them (`output/serving`).

Version policy: the newest version is loaded at start and whenever a newer one appears (the
poller loads it before switching to it, so requests never wait for a load); an older version is
loaded when a request names it, and kept while at most `max_loaded` versions are. A version
whose load fails (a push still being copied, a corrupt folder) is retried on the next poll.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from amp_pipeline.core import names
from amp_pipeline.serving.errors import ServingError, invalid, not_found, unavailable

logger = logging.getLogger(__name__)

DEFAULT_SIGNATURE = names.SERVING_SIGNATURE


@dataclasses.dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: Any  # tf.DType (TensorFlow ships no type information)
    shape: tuple[int | None, ...] | None  # None: unknown rank


class Servable:
    """One loaded version of one model: its signatures, callable from many threads."""

    def __init__(self, name: str, version: int, path: Path):
        import tensorflow as tf
        from tensorflow.python.saved_model import loader_impl
        from tensorflow_serving.apis import get_model_metadata_pb2

        self.name, self.version, self.path = name, version, path
        self._loaded = tf.saved_model.load(str(path))
        meta_graph = loader_impl.parse_saved_model(str(path)).meta_graphs[0]
        # What GetModelMetadata (gRPC and REST) answers, built once per loaded version.
        self.signature_def_map = get_model_metadata_pb2.SignatureDefMap()
        for key, sig in meta_graph.signature_def.items():
            if not key.startswith("__"):
                self.signature_def_map.signature_def[key].CopyFrom(sig)
        self.functions = dict(self._loaded.signatures)
        self.inputs: dict[str, dict[str, InputSpec]] = {}
        for sig, fn in self.functions.items():
            specs = fn.structured_input_signature[1]
            self.inputs[sig] = {
                name: InputSpec(
                    name,
                    spec.dtype,
                    None if spec.shape.rank is None else tuple(spec.shape.as_list()),
                )
                for name, spec in specs.items()
            }

    def signature(self, name: str) -> str:
        """The signature's name ('' means serving_default); NOT_FOUND-style error if unknown."""
        name = name or DEFAULT_SIGNATURE
        if name not in self.functions:
            raise invalid(
                f"Serving signature name: '{name}' not found in signature def; model "
                f"{self.name} version {self.version} has {sorted(self.functions)}"
            )
        return name

    def run(self, signature: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Calls the signature on already validated inputs; numpy in, numpy out."""
        import tensorflow as tf

        specs = self.inputs[signature]
        tensors = {k: tf.constant(v, dtype=specs[k].dtype) for k, v in inputs.items()}
        outputs = self.functions[signature](**tensors)
        return {k: v.numpy() for k, v in outputs.items()}


def version_dirs(base: Path) -> dict[int, Path]:
    """{version: folder} of the numbered folders holding a saved_model.pb."""
    found = {}
    if base.is_dir():
        for child in base.iterdir():
            if child.name.isdigit() and (child / "saved_model.pb").is_file():
                found[int(child.name)] = child
    return found


def discover(model_dir: Path, model_name: str | None = None) -> dict[str, Path]:
    """{model name: base path} under `model_dir` (one model base, or a folder of them)."""
    model_dir = Path(model_dir)
    if version_dirs(model_dir):
        return {model_name or model_dir.name: model_dir}
    models = {}
    if model_dir.is_dir():
        for child in sorted(model_dir.iterdir()):
            if child.is_dir() and version_dirs(child):
                models[child.name] = child
    if model_name is not None:
        models = {k: v for k, v in models.items() if k == model_name}
    return models


class ModelRepository:
    """Every model under a directory, its newest version loaded, new versions hot-loaded."""

    def __init__(
        self,
        model_dir: Path,
        model_name: str | None = None,
        max_loaded: int = 3,
        loader: Callable[[str, int, Path], Servable] = Servable,
    ):
        self.model_dir = Path(model_dir)
        self.model_name = model_name
        self.max_loaded = max_loaded
        self._loader = loader
        self._lock = threading.Lock()
        self._bases: dict[str, Path] = {}
        self._loaded: dict[str, dict[int, Servable]] = {}
        self._newest: dict[str, int] = {}
        self._last_used: dict[tuple[str, int], float] = {}
        self._load_errors: dict[tuple[str, int], str] = {}
        self._seen: set[str] = set()  # every model ever found, to tell "gone" from "unknown"
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    # -- discovery and loading ------------------------------------------------------------

    def refresh(self) -> list[tuple[str, int]]:
        """Rescans the directory; loads every model's newest version. Returns what it loaded."""
        loaded = []
        bases = discover(self.model_dir, self.model_name)
        with self._lock:
            self._bases = bases
        for name, base in bases.items():
            versions = version_dirs(base)
            with self._lock:
                # Versions deleted from disk are no longer served.
                for v in list(self._loaded.get(name, {})):
                    if v not in versions:
                        del self._loaded[name][v]
                        logger.info("model %s version %d: removed from disk, unloaded", name, v)
                served = self._newest.get(name)
            # The newest version that loads is served; one that fails (half copied, corrupt)
            # leaves the next older one serving.
            for version in sorted(versions, reverse=True):
                if served == version and version in self._loaded.get(name, {}):
                    break
                if served is not None and version < served and served in versions:
                    break  # the version already served is newer than what is left to try
                if self._load(name, version, versions[version]) is None:
                    continue
                with self._lock:
                    self._newest[name] = version
                loaded.append((name, version))
                logger.info(
                    "model %s: serving version %d from %s", name, version, versions[version]
                )
                break
        with self._lock:
            self._seen.update(bases)
            for name in list(self._newest):
                versions = version_dirs(self._bases[name]) if name in self._bases else {}
                if self._newest[name] not in versions:  # deleted from disk, nothing newer loads
                    self._newest.pop(name)
                    self._loaded.pop(name, None)
        return loaded

    def _load(self, name: str, version: int, path: Path) -> Servable | None:
        try:
            servable = self._loader(name, version, path)
        except Exception as e:  # noqa: BLE001 - a bad or half-copied version must not stop serving
            message = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            with self._lock:  # status() and get() read the errors under the lock
                new = self._load_errors.get((name, version)) != message
                self._load_errors[(name, version)] = message
            if new:
                logger.warning("model %s version %d: load failed (%s)", name, version, message)
            return None
        with self._lock:
            self._load_errors.pop((name, version), None)
            self._loaded.setdefault(name, {})[version] = servable
            self._last_used[(name, version)] = time.monotonic()
            self._evict(name)
        return servable

    def _evict(self, name: str) -> None:
        loaded = self._loaded[name]
        while len(loaded) > self.max_loaded:
            newest = self._newest.get(name, max(loaded))
            victim = min(
                (v for v in loaded if v != newest and v != max(loaded)),
                key=lambda v: self._last_used.get((name, v), 0.0),
            )
            del loaded[victim]

    def start_polling(self, interval_s: float) -> None:
        """Rescans every `interval_s` seconds in a daemon thread until `stop()`."""

        def poll() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.refresh()
                except Exception:  # noqa: BLE001 - keep polling; the log has the reason
                    logger.exception("rescanning %s failed", self.model_dir)

        self._poller = threading.Thread(target=poll, name="model-poller", daemon=True)
        self._poller.start()

    def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=5)

    # -- lookups -----------------------------------------------------------------------------

    def models(self) -> list[str]:
        with self._lock:
            return sorted(self._newest)

    def _unavailable(self, name: str) -> ServingError:
        """A model on disk with no version that can serve: UNAVAILABLE, naming why (called with
        the lock held)."""
        failed = {v: e for (n, v), e in self._load_errors.items() if n == name}
        detail = "; ".join(f"version {v} failed to load: {e}" for v, e in sorted(failed.items()))
        return unavailable(
            f"model {name} has no servable version" + (f" ({detail})" if detail else "")
        )

    def get(self, name: str, version: int | None = None) -> Servable:
        """The servable for a request; NOT_FOUND when the model or version is not there,
        UNAVAILABLE when the model is there but none of its versions loads."""
        with self._lock:
            if name not in self._newest:
                if name in self._seen:
                    raise self._unavailable(name)
                raise not_found(
                    f"Servable not found for request: Latest({name}); "
                    f"this server has {sorted(self._newest) or 'no models'}"
                )
            asked = "Latest" if version is None else "Specific"
            if version is None:
                version = self._newest[name]
            servable = self._loaded[name].get(version)
            base = self._bases.get(name)
        if servable is None:
            on_disk = version_dirs(base) if base is not None else {}
            path = on_disk.get(version)
            if path is None:
                request = f"Latest({name})" if asked == "Latest" else f"Specific({name}, {version})"
                raise not_found(
                    f"Servable not found for request: {request}; versions on disk: "
                    f"{sorted(on_disk)}"
                )
            servable = self._load(name, version, path)
            if servable is None:
                with self._lock:
                    error = self._load_errors.get((name, version), "load failed")
                raise not_found(
                    f"Servable not found for request: Specific({name}, {version}): {error}"
                )
        with self._lock:
            self._last_used[(name, version)] = time.monotonic()
        return servable

    def status(self, name: str, version: int | None = None) -> list[dict]:
        """TF Serving's model_version_status entries for the model (or one version): loaded
        versions AVAILABLE, versions that failed to load END with their error.

        Raises:
            ServingError: NOT_FOUND for an unknown model or version; UNAVAILABLE when the model
                has no servable version (every load failed, or every version was deleted).
        """
        with self._lock:
            known = name in self._seen or name in self._newest
            loaded = sorted(self._loaded.get(name, {}), reverse=True)
            failed = {v: e for (n, v), e in self._load_errors.items() if n == name}
        if not known:
            raise not_found(f"Could not find any versions of model {name}")
        if version is not None:
            if version in failed and version not in loaded:
                return [_entry(version, failed[version])]
            if version not in loaded:
                self.get(name, version)  # loads it on request, or raises
            return [_entry(version, None)]
        if not loaded:
            raise self._unavailable(name)
        entries = {v: _entry(v, None) for v in loaded}
        entries.update({v: _entry(v, e) for v, e in failed.items() if v not in entries})
        return [entries[v] for v in sorted(entries, reverse=True)]


def _entry(version: int, error: str | None) -> dict:
    """One model_version_status entry in TF Serving's JSON."""
    if error is None:
        return {
            "version": str(version),
            "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""},
        }
    return {
        "version": str(version),
        "state": "END",
        "status": {"error_code": "UNKNOWN", "error_message": error},
    }

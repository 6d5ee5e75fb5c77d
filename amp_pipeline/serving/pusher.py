"""Pusher: publishes the promoted twin into TF Serving's layout, all at once or not at all.

TFX's Pusher copies file by file into the final `<base>/<version>/` folder, so TF Serving can
load a half-written version and a crash leaves one behind. Here the copy goes to a hidden
sibling (`<base>/.push-<version>-<random>/`, which TF Serving ignores: not a number), and a
single rename makes it `<base>/<version>/`. A version number already taken (two pushes in the
same second) moves to the next one. Folders a killed push left behind are removed by the next
run (`clean_partial_pushes`, under the output folder's lock).

On a local or POSIX file system the rename is atomic. On object stores (gs://) there is no
atomic rename: the copy goes straight to the version folder, as TFX's own Pusher does.
"""

import errno
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

from tfx.types.artifact import Artifact
from tfx.types.standard_artifacts import Model, ModelBlessing, PushedModel

from amp_pipeline.core import names
from amp_pipeline.core.component_types import InputArtifact, OutputArtifact, Parameter, component

logger = logging.getLogger(__name__)

PARTIAL_PREFIX = ".push-"


def versions(base: Path) -> list[int]:
    return sorted(int(p.name) for p in base.iterdir() if p.is_dir() and p.name.isdigit())


def publish(
    source: Path, base: Path, now: float | None = None, left_out: tuple[str, ...] = ()
) -> Path:
    """Copies `source` to a hidden sibling, then renames it to `base/<version>`.

    The version is the current Unix time, or one more than the newest version present,
    whichever is larger. Returns the version folder. Files named in `left_out` (the TFLite
    variants the gate did not pass) are not copied.
    """
    base.mkdir(parents=True, exist_ok=True)
    present = versions(base)
    version = max(int(now if now is not None else time.time()), (present[-1] + 1) if present else 0)
    staging = base / f"{PARTIAL_PREFIX}{version}-{uuid.uuid4().hex[:8]}"
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns(*left_out) if left_out else None)
    try:
        for _ in range(1000):
            target = base / str(version)
            if target.exists():
                version += 1  # taken by a push in the same second
                continue
            try:
                os.rename(staging, target)  # atomic; refuses a non-empty target
                return target
            except OSError as e:
                if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise OSError(
                        e.errno, f"cannot publish {staging.name} as {target}: {e.strerror}"
                    ) from e
                version += 1  # another push took it between the check and the rename
        raise RuntimeError(f"no free version number under {base} after 1000 tries")
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone after a rename; removed otherwise


def publish_remote(source: str, base: str, left_out: tuple[str, ...] = ()) -> str:
    """Object-store push (no atomic rename): a straight copy, as TFX's Pusher does, then the
    `left_out` files removed from it before the push is reported."""
    import tensorflow as tf
    from tfx.utils import io_utils

    present = (
        [int(p.rstrip("/")) for p in tf.io.gfile.listdir(base) if p.rstrip("/").isdigit()]
        if tf.io.gfile.exists(base)
        else []
    )
    version = max(int(time.time()), (max(present) + 1) if present else 0)
    target = f"{base.rstrip('/')}/{version}"
    io_utils.copy_dir(source, target)
    for name in left_out:
        for path in tf.io.gfile.glob(f"{target}/tflite/{name}"):
            tf.io.gfile.remove(path)
    return target


def clean_partial_pushes(serving_dir: Path) -> list[Path]:
    """Removes the hidden staging folders killed pushes left under `serving_dir/<model>/`."""
    removed: list[Path] = []
    if not serving_dir.is_dir():
        return removed
    for model in serving_dir.iterdir():
        if not model.is_dir():
            continue
        for partial in model.glob(f"{PARTIAL_PREFIX}*"):
            shutil.rmtree(partial, ignore_errors=True)
            removed.append(partial)
    return removed


def blessed_model(models: list[Artifact], model_blessing: Artifact) -> Artifact:
    """The model the blessing names (`current_model_id`: the twin the gate shipped).

    Raises:
        ValueError: the blessing names none of `models`.
    """
    wanted = model_blessing.get_int_custom_property("current_model_id")
    for model in models:
        if model.id == wanted:
            return model
    raise ValueError(
        f"the blessing names model {wanted}, which is none of the models given to the Pusher "
        f"({', '.join(str(m.id) for m in models)})"
    )


def left_out_files(model_blessing) -> tuple[str, ...]:
    """The files of the TFLite variants the gate did not pass (`tflite_not_shipped`, a comma
    list of variants): they are not pushed."""
    if not model_blessing.has_custom_property("tflite_not_shipped"):
        return ()
    variants = [
        v for v in model_blessing.get_string_custom_property("tflite_not_shipped").split(",") if v
    ]
    return tuple(f"model_{v}.{ext}" for v in variants for ext in ("tflite", "json"))


@component
def Pusher(  # noqa: N802 - TFX component names are classes
    model: InputArtifact[Model],
    fp32_model: InputArtifact[Model],
    model_blessing: InputArtifact[ModelBlessing],
    pushed_model: OutputArtifact[PushedModel],
    push_base: Parameter[str],
) -> None:
    """Publishes the twin the blessing names (`model`: the AMP twin, `fp32_model`: the float32
    twin) when the blessing says so; records what it did on `pushed_model` (`pushed`,
    `pushed_destination`, `pushed_version`, as TFX's Pusher does, and `shipped_precision`)."""
    blessed = model_blessing.get_int_custom_property("blessed") == 1
    pushed_model.set_int_custom_property("pushed", 0)
    if not blessed:
        logger.info("Model not blessed: nothing pushed")
        return
    shipped = blessed_model([model, fp32_model], model_blessing)
    source = os.path.join(shipped.uri, names.SERVING_MODEL_DIR)
    left_out = left_out_files(model_blessing)
    if "://" in push_base:
        target = publish_remote(source, push_base, left_out)
    else:
        target = str(publish(Path(source), Path(push_base), left_out=left_out))
    logger.info("Pushed %s to %s", source, target)
    pushed_model.set_int_custom_property("pushed", 1)
    pushed_model.set_string_custom_property("pushed_destination", target)
    pushed_model.set_string_custom_property("pushed_version", os.path.basename(target))
    pushed_model.set_string_custom_property(
        "shipped_precision", model_blessing.get_string_custom_property("shipped_precision")
    )

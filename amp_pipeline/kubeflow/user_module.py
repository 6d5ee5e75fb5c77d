"""A user's model module on Kubeflow/Vertex: it travels in the component image.

A `.py` file is copied into `<image context>/user_models/`, which `kubeflow/Dockerfile` copies
into the image, and the compiled spec names it by import path (`amp_pipeline.user_models.<name>`).
An import path is used as it is: the module must be installed in the image.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from amp_pipeline.components.models.user_module import ModuleRef

PACKAGE = "amp_pipeline/user_models"  # the folder of amp_pipeline.user_models
IMPORT_PACKAGE = "amp_pipeline.user_models"
REPO_ROOT = Path(__file__).resolve().parents[2]


def package(ref: ModuleRef, context: Path = REPO_ROOT) -> tuple[ModuleRef, Path | None]:
    """(the ref the compiled spec uses, the file copied into the image context or None)."""
    if not ref.is_file:
        return ref, None
    name = re.sub(r"\W", "_", Path(ref.ref).stem)
    if name[:1].isdigit():
        name = f"m_{name}"
    folder = context / PACKAGE
    folder.mkdir(parents=True, exist_ok=True)
    init = folder / "__init__.py"
    if not init.exists():
        init.write_text('"""Users\' model modules for the component image."""\n')
    target = folder / f"{name}.py"
    if Path(ref.ref).resolve() != target.resolve():
        shutil.copyfile(ref.ref, target)
    return dataclasses.replace(ref, ref=f"{IMPORT_PACKAGE}.{name}"), target

"""A user's model module (`--model-module`): loading it, its contract, and building from it.

The module is a `.py` file or an importable module that defines:

- `build_model(spec: ModelSpec) -> keras.Model` (required): takes `x`, a `[batch,
  spec.input_width]` float32 tensor, and returns class probabilities `[batch, spec.num_classes]`
  (for a regression label, `spec.task == "regression"`: one linear value `[batch, 1]`, the label
  standardised; keep that last layer in float32).
  It must not set a dtype policy: the pipeline applies the precision policy around the call.
- `preprocessing_fn(inputs) -> dict` (optional): a TensorFlow Transform function that replaces
  the built-in one. It returns at least `x`, the model input; the pipeline adds the label.
- `optimizer() -> keras.optimizers.Optimizer` (optional; default Adam at `--learning-rate`).
- `loss() -> keras.losses.Loss` (optional; default sparse categorical cross-entropy).

Every problem with the module is a `ModelModuleError`: one line naming the module and the problem.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from amp_pipeline.core.errors import InputError

HOOKS = ("build_model", "preprocessing_fn", "optimizer", "loss")


class ModelModuleError(InputError):
    """The user's model module cannot be used; the message names the module and the problem."""


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """What `build_model(spec)` receives: the Transform output the model reads.

    Attributes:
        input_width: width of `x`, the model input (a float32 vector per example).
        feature_names: the raw features `x` is made of, in order.
        feature_slices: (name, start, stop) of each raw feature's columns in `x`; empty when a
            user preprocessing_fn makes `x`.
        num_classes: number of classes; the model returns this many probabilities. 0 for a
            regression label: the model returns one value per example.
        class_names: the classes' names, in class-id order (labels are class ids).
        image_shape: (height, width, channels) when `x` is a flattened image, else None.
        text_features: the text features among `feature_names`; each one's slice of `x` holds
            `max_tokens` token ids as float32 (0 is padding, 1..vocab_size + 1 are tokens).
            Cast them to integers before any mixed-precision layer: bfloat16 holds integers
            exactly only up to 256.
        vocab_size: the largest vocabulary of a text feature; ids are below vocab_size + 2.
        max_tokens: token ids per text feature.
        task: "classification" or "regression" (the label standardised: mean 0, std 1).
        categorical_features: the features whose one column of `x` holds a category id (a
            float32 value; cast it to an integer in float32, as for text, and embed it).
        categorical_sizes: each one's number of ids (0 for a missing cell, its vocabulary, one
            for any other value), in the same order; ids are below it. Before Transform has
            run (`check-model`'s first look) an upper bound, 100,002.
        bag_features: the multi-valued features; each one's slice of `x` (feature_slices)
            holds its values' ids as float32, 0 for padding.
        bag_sizes: each one's number of ids (padding, the vocabulary, one for any other).
    """

    input_width: int
    feature_names: tuple[str, ...]
    num_classes: int
    class_names: tuple[str, ...]
    feature_slices: tuple[tuple[str, int, int], ...] = ()
    image_shape: tuple[int, int, int] | None = None
    text_features: tuple[str, ...] = ()
    vocab_size: int = 0
    max_tokens: int = 0
    task: str = "classification"
    categorical_features: tuple[str, ...] = ()
    categorical_sizes: tuple[int, ...] = ()
    bag_features: tuple[str, ...] = ()
    bag_sizes: tuple[int, ...] = ()

    @property
    def output_width(self) -> int:
        """Values the model returns per example: one per class, or 1 for regression."""
        return self.num_classes or 1

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ModuleRef:
    """A model module as the pipeline passes it around: where it is and what it holds.

    Attributes:
        ref: an absolute `.py` path, or a dotted import path.
        sha256: hash of the module's source, so that TFX's cache sees a changed module.
        preprocessing: whether the module defines its own preprocessing_fn (set by `inspect`).
    """

    ref: str
    sha256: str = ""
    preprocessing: bool = False

    @property
    def is_file(self) -> bool:
        return self.ref.endswith(".py")

    @property
    def label(self) -> str:
        return Path(self.ref).name if self.is_file else self.ref

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _last_frame(error: BaseException) -> str:
    """`file:line` of the innermost frame of `error`, to point at the user's code."""
    frames = traceback.extract_tb(error.__traceback__)
    return f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""


def _error_text(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def resolve(text: str) -> ModuleRef:
    """The ModuleRef of `--model-module TEXT`: a `.py` file (made absolute) or an import path.

    Raises:
        ModelModuleError: the file or module does not exist.
    """
    if not text or not text.strip():
        raise ModelModuleError("--model-module: empty value; give a .py file or an import path")
    if text.endswith(".py") or "/" in text or "\\" in text:
        path = Path(text).expanduser().resolve()
        if not path.is_file():
            raise ModelModuleError(f"--model-module {text}: no such file")
        if path.suffix != ".py":
            raise ModelModuleError(f"--model-module {text}: not a Python (.py) file")
        return ModuleRef(str(path), hashlib.sha256(path.read_bytes()).hexdigest())
    try:
        spec = importlib.util.find_spec(text)
    except ModuleNotFoundError as e:
        raise ModelModuleError(f"--model-module {text}: no such module ({e})") from None
    except (ImportError, ValueError) as e:
        raise ModelModuleError(f"--model-module {text}: cannot be imported ({e})") from None
    if spec is None:
        raise ModelModuleError(f"--model-module {text}: no such module (not a .py file either)")
    source = Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    digest = hashlib.sha256(source.read_bytes()).hexdigest() if source else ""
    return ModuleRef(text, digest)


_LOADED: dict[str, ModuleType] = {}


def load(ref: ModuleRef | dict | str) -> ModuleType:
    """Imports the module (once per process) and checks that it defines `build_model`.

    Raises:
        ModelModuleError: the module is missing, raises on import, or lacks `build_model`.
    """
    if isinstance(ref, dict):
        ref = ModuleRef(**ref)
    elif isinstance(ref, str):
        ref = resolve(ref)
    key = f"{ref.ref}@{ref.sha256}"
    if key in _LOADED:
        return _LOADED[key]
    try:
        if ref.is_file:
            if not Path(ref.ref).is_file():
                raise ModelModuleError(f"model module {ref.ref}: no such file")
            name = f"amp_user_model_{ref.sha256[:12] or Path(ref.ref).stem}"
            spec = importlib.util.spec_from_file_location(name, ref.ref)
            if spec is None or spec.loader is None:
                raise ModelModuleError(f"model module {ref.ref}: not a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # dataclasses and pickling look modules up by name
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(ref.ref)
    except ModelModuleError:
        raise
    except ModuleNotFoundError as e:
        if ref.is_file or e.name != ref.ref:
            raise ModelModuleError(
                f"model module {ref.label}: raised on import: {_error_text(e)}{_last_frame(e)}"
            ) from None
        raise ModelModuleError(f"model module {ref.label}: no such module") from None
    except BaseException as e:  # noqa: BLE001 - any failure in user code is the user's input
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        raise ModelModuleError(
            f"model module {ref.label}: raised on import: {_error_text(e)}{_last_frame(e)}"
        ) from None
    if not callable(getattr(module, "build_model", None)):
        raise ModelModuleError(
            f"model module {ref.label}: defines no build_model(spec) function "
            f"(hooks: {', '.join(HOOKS)}; only build_model is required)"
        )
    for hook in HOOKS[1:]:
        if hasattr(module, hook) and not callable(getattr(module, hook)):
            raise ModelModuleError(f"model module {ref.label}: {hook} is not a function")
    _LOADED[key] = module
    return module


def inspect(ref: ModuleRef) -> ModuleRef:
    """Loads the module (ModelModuleError if it cannot be used) and records its hooks."""
    module = load(ref)
    return dataclasses.replace(ref, preprocessing=hook(module, "preprocessing_fn") is not None)


def hook(module: ModuleType, name: str):
    """The module's optional hook `name`, or None."""
    value = getattr(module, name, None)
    return value if callable(value) else None


def call_hook(ref: ModuleRef, module: ModuleType, name: str, *args):
    """Calls hook `name`; a failure in the user's code becomes a ModelModuleError."""
    try:
        return getattr(module, name)(*args)
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        raise ModelModuleError(
            f"model module {ref.label}: {name}() raised {_error_text(e)}{_last_frame(e)}"
        ) from None


def build(ref: ModuleRef, module: ModuleType, spec: ModelSpec):
    """`build_model(spec)`, checked: a keras.Model with one output of `spec.output_width` values.

    The model is built (its weights exist) when this returns.

    Raises:
        ModelModuleError: build_model raised, returned something else than a keras.Model, or
            a model whose output does not fit `spec`.
    """
    import keras
    import numpy as np

    model = call_hook(ref, module, "build_model", spec)
    if not isinstance(model, keras.Model):
        raise ModelModuleError(
            f"model module {ref.label}: build_model returned {type(model).__name__}, "
            "not a keras.Model"
        )
    try:
        outputs = model(np.zeros((2, spec.input_width), "float32"), training=False)
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        raise ModelModuleError(
            f"model module {ref.label}: the model fails on an input of shape "
            f"(batch, {spec.input_width}): {_error_text(e)}{_last_frame(e)}"
        ) from None
    if isinstance(outputs, list | tuple | dict):
        raise ModelModuleError(
            f"model module {ref.label}: the model has {len(outputs)} outputs; it must return "
            "one tensor of class probabilities"
        )
    shape = tuple(outputs.shape)
    if len(shape) != 2 or shape[1] != spec.output_width:
        what = (
            "one value per example: the standardised regression label"
            if not spec.num_classes
            else f"one probability per class ({', '.join(spec.class_names[:5])}"
            f"{', ...' if spec.num_classes > 5 else ''})"
        )
        raise ModelModuleError(
            f"model module {ref.label}: the model's output has shape (batch, "
            f"{', '.join(str(d) for d in shape[1:])}), expected (batch, {spec.output_width}): "
            f"{what}"
        )
    return model

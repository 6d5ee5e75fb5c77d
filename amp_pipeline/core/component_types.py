"""TFX's function-component annotations, read the same by the interpreter and a type checker.

TFX reads `InputArtifact[Model]`, `OutputArtifact[T]` and `Parameter[float]` at run time to build
a component's spec. Its classes declare no type parameter, though, so a type checker reads every
such signature as wrong and every artifact as lacking `.uri`. Under `TYPE_CHECKING` each
annotation is what the function body receives: `InputArtifact[Model]` is a `Model`,
`Parameter[float]` a `float`. `component` is TFX's decorator, typed on `types.FunctionType`, which
a checker never infers for a `def`; here it takes any function and returns TFX's factory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Annotated, Any, TypeVar

    from tfx.dsl.component.experimental.decorators import BaseFunctionalComponentFactory

    _T = TypeVar("_T")
    InputArtifact = Annotated[_T, "InputArtifact"]
    OutputArtifact = Annotated[_T, "OutputArtifact"]
    Parameter = Annotated[_T, "Parameter"]

    def component(func: Callable[..., Any], /) -> BaseFunctionalComponentFactory: ...

else:
    from tfx.dsl.component.experimental.annotations import (
        InputArtifact,
        OutputArtifact,
        Parameter,
    )
    from tfx.dsl.component.experimental.decorators import component

__all__ = ["InputArtifact", "OutputArtifact", "Parameter", "component"]

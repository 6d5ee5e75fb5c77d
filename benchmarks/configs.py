"""Benchmark configurations: which model, policy, XLA setting and input size to measure."""

from __future__ import annotations

import dataclasses

BENCH_MODELS = ("cnn", "resnet50", "transformer", "mlp")


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """One measured configuration.

    `cnn` is measured as the pipeline runs it on the digits (8x8x1, upsampled to 16x16 inside
    the model); `resnet50` at `image_size`x`image_size`x3; `transformer` is 2 layers, sequence
    128, width 256 over 16 features a token; `mlp` takes 64 features.
    """

    model: str
    policy: str
    xla: bool = False
    batch_size: int = 64
    image_size: int = 96
    steps: int = 20
    warmup_steps: int = 3
    num_classes: int = 10
    device: str = "cpu"

    def image_shape(self) -> tuple[int, int, int] | None:
        if self.model == "cnn":
            return (8, 8, 1)
        if self.model == "resnet50":
            return (self.image_size, self.image_size, 3)
        return None

    def input_width(self) -> int:
        shape = self.image_shape()
        if shape:
            return shape[0] * shape[1] * shape[2]
        return 128 * 16 if self.model == "transformer" else 64

    def model_options(self) -> dict:
        if self.model == "resnet50":
            return {"resolution": self.image_size}
        if self.model == "transformer":
            return {"seq_len": 128, "depth": 2, "width": 256, "heads": 4}
        return {}

    def data_spec(self) -> dict:
        """A DataSpec for synthetic inputs of this configuration's shape."""
        from core.data_spec import DataSpec

        return DataSpec(
            source="synthetic",
            format="none",
            input_base="",
            input_pattern="",
            label="label",
            label_kind="int",
            classes=tuple(str(i) for i in range(self.num_classes)),
            numeric_features=(("x", self.input_width()),),
            image_shape=self.image_shape(),
        ).to_dict()

    @property
    def key(self) -> str:
        return f"{self.model}/{self.policy}/xla={'on' if self.xla else 'off'}"

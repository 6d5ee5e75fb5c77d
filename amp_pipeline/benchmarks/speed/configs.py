"""Benchmark configurations: which model, policy, XLA setting and input size to measure."""

from __future__ import annotations

import dataclasses

BENCH_MODELS = ("cnn", "resnet50", "transformer", "mlp", "bert", "dlrm")
# dlrm: Criteo's shape, scaled to a CPU: 13 dense features, 8 tables of 100,000 rows x 64.
DLRM_DENSE, DLRM_TABLES, DLRM_ROWS, DLRM_DIM = 13, 8, 100_000, 64
BERT_VOCAB = 30_522  # BERT's WordPiece vocabulary size: the embedding table the bench trains
REPLICA_MODES = ("multiworker", "mirrored")
BACKENDS = ("tensorflow", "jax")
# `bert-base`: BERT-base's width, heads and depth (768, 12, 12) at sequence length 128.
TRANSFORMER_SIZES = {
    "small": {"seq_len": 128, "depth": 2, "width": 256, "heads": 4},
    "bert-base": {"seq_len": 128, "depth": 12, "width": 768, "heads": 12},
}


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """One measured configuration.

    `cnn` is measured as the pipeline runs it on the digits (8x8x1, upsampled to 16x16 inside
    the model); `resnet50` at `image_size`x`image_size`x3; `transformer` is 2 layers, sequence
    128, width 256 over 16 features a token; `mlp` takes 64 features; `bert` is the pipeline's
    BERT-style encoder (components/models/builtin.py) at `bert_size` over `seq_len` token ids
    drawn from a 30,522-token vocabulary (BERT's); `dlrm` is the pipeline's DLRM-style model
    over 13 dense features and 8 categorical ids, each drawn uniformly from its table of
    100,000 rows x 64 (float32 tables under every policy).

    `batch_size` is per replica. With `replicas` > 1 the configuration trains data-parallel:
    `multiworker` runs that many local worker processes under MultiWorkerMirroredStrategy on
    loopback, `mirrored` mirrors over that many logical devices of one process (GPUs where there
    are, logical CPU devices otherwise).
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
    replicas: int = 1
    replica_mode: str = "multiworker"
    learning_rate: float = 1e-3  # Adam's, per replica: scaled linearly by `replicas`
    backend: str = "tensorflow"
    matmul_precision: str = ""  # JAX: "" (its default: TF32 on tensor cores) or "highest"
    transformer_size: str = "small"
    bert_size: str = "base"
    seq_len: int = 128

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
        if self.model == "bert":
            return self.seq_len
        if self.model == "dlrm":
            return DLRM_DENSE + DLRM_TABLES
        return 128 * 16 if self.model == "transformer" else 64

    def synthetic_x(self, rng, n: int):
        """Inputs of this configuration: token ids (as float32, the way `x` holds them) for
        bert, uniform floats otherwise."""
        import numpy as np

        if self.model == "bert":
            return rng.integers(1, BERT_VOCAB + 1, (n, self.seq_len)).astype(np.float32)
        if self.model == "dlrm":
            dense = rng.random((n, DLRM_DENSE), dtype=np.float32)
            ids = rng.integers(0, DLRM_ROWS, (n, DLRM_TABLES)).astype(np.float32)
            return np.concatenate([dense, ids], axis=1)
        return rng.random((n, self.input_width()), dtype=np.float32)

    def model_options(self) -> dict:
        if self.model == "resnet50":
            return {"resolution": self.image_size}
        if self.model == "transformer":
            return dict(TRANSFORMER_SIZES[self.transformer_size])
        if self.model == "dlrm":
            return {
                "categorical": tuple(
                    (f"table{i}", DLRM_DENSE + i, DLRM_DENSE + i + 1, DLRM_ROWS)
                    for i in range(DLRM_TABLES)
                ),
                "dim": DLRM_DIM,
            }
        if self.model == "bert":
            return {
                "size": self.bert_size,
                "text_slices": (("text", 0, self.seq_len),),
                "vocab_size": BERT_VOCAB,
            }
        return {}

    def data_spec(self) -> dict:
        """A DataSpec for synthetic inputs of this configuration's shape."""
        from amp_pipeline.core.data_spec import DataSpec

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
        policy = self.policy + (f"@{self.matmul_precision}" if self.matmul_precision else "")
        model = self.model
        if model == "bert":
            model = f"bert-{self.bert_size}@{self.seq_len}"
        key = f"{model}/{policy}/xla={'on' if self.xla else 'off'}"
        if self.backend != "tensorflow":
            key = f"{self.backend}:{key}"
        return key if self.replicas == 1 else f"{key}/{self.replica_mode}x{self.replicas}"

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.replicas

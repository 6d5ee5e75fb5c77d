"""Data-parallel training with tf.distribute: which strategy a trainer uses, and how.

- `mirrored`: MirroredStrategy over the GPUs of one machine (or, where there is no GPU, over
  `cpu_replicas` logical CPU devices: that proves the code path, it does not add compute).
- `multiworker`: MultiWorkerMirroredStrategy over the workers TF_CONFIG names (Vertex AI and the
  Kubeflow training operators set it).
- `auto`: multiworker when TF_CONFIG names several workers, mirrored when the trainer sees more
  than one GPU, none otherwise.

The batch a user gives is per replica: the global batch is that times the replicas, and the
learning rate of the built-in optimizer is scaled linearly with it (Goyal et al., 2017). Only the
chief writes the model; the other workers write to temporary folders, as
MultiWorkerMirroredStrategy requires (every worker takes part in saving).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os

DISTRIBUTIONS = ("auto", "none", "mirrored", "multiworker")


class DistributionError(ValueError):
    """A distribution that cannot run here (one line, naming the flag or variable)."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """The strategy a trainer uses: `none`, `mirrored` or `multiworker`, and why."""

    kind: str
    reason: str
    workers: int = 1
    cpu_replicas: int = 0  # logical CPU devices mirrored over (no GPU); 0 otherwise


def tf_config(environ: dict | None = None) -> dict:
    """TF_CONFIG as a dict ({} when unset)."""
    text = (os.environ if environ is None else environ).get("TF_CONFIG", "")
    if not text.strip():
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise DistributionError(f"TF_CONFIG is not JSON: {e}") from None
    if not isinstance(config, dict):
        raise DistributionError("TF_CONFIG must be a JSON object with 'cluster' and 'task'")
    return config


def cluster_workers(config: dict) -> int:
    """The training tasks TF_CONFIG's cluster names: its chief and workers."""
    cluster = config.get("cluster") or {}
    return sum(len(cluster.get(role) or []) for role in ("chief", "worker"))


def is_chief(config: dict) -> bool:
    """Whether this task writes the model: the chief, or worker 0 of a cluster without one, or
    any task outside a cluster."""
    task = config.get("task") or {}
    if not config.get("cluster") or not task:
        return True
    if task.get("type") == "chief":
        return True
    return (
        task.get("type") == "worker"
        and int(task.get("index", 0)) == 0
        and not (config["cluster"].get("chief"))
    )


def resolve(requested: str, gpus: int, config: dict, cpu_replicas: int = 2) -> Plan:
    """The strategy for `--distribution requested` on a machine with `gpus` GPUs under
    TF_CONFIG `config`."""
    if requested not in DISTRIBUTIONS:
        raise DistributionError(
            f"--distribution {requested!r}: choose from {', '.join(DISTRIBUTIONS)}"
        )
    workers = cluster_workers(config)
    if requested == "none":
        return Plan("none", "--distribution none")
    if requested == "multiworker" or (requested == "auto" and workers > 1):
        if workers < 1 or not config.get("task"):
            raise DistributionError(
                "--distribution multiworker: TF_CONFIG names no cluster and task (Vertex AI and "
                "the Kubeflow training operators set it; see docs/scaling.md)"
            )
        return Plan("multiworker", f"TF_CONFIG names {workers} workers", workers=workers)
    if requested == "mirrored" or (requested == "auto" and gpus > 1):
        if gpus > 1:
            return Plan("mirrored", f"{gpus} GPUs on this machine")
        if gpus == 1:
            return Plan("mirrored", "1 GPU: one replica")
        if cpu_replicas < 2:
            raise DistributionError(
                "--distribution mirrored on a machine without GPUs needs --cpu-replicas >= 2"
            )
        return Plan(
            "mirrored",
            f"no GPU: {cpu_replicas} logical CPU devices (proves the path; adds no compute)",
            cpu_replicas=cpu_replicas,
        )
    return Plan("none", f"{gpus} GPU(s), no multi-worker TF_CONFIG")


def make_strategy(plan: Plan):
    """The tf.distribute strategy of `plan`, or None for `none`.

    Call it before TensorFlow runs anything: logical devices and the collective ops of
    MultiWorkerMirroredStrategy are fixed when TensorFlow's runtime starts."""
    if plan.kind == "none":
        return None
    import tensorflow as tf

    if plan.kind == "multiworker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if plan.cpu_replicas:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * plan.cpu_replicas
        )
        return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(plan.cpu_replicas)])
    return tf.distribute.MirroredStrategy()


@dataclasses.dataclass(frozen=True)
class Scaling:
    """Batch and learning rate under `replicas` data-parallel replicas."""

    replicas: int
    per_replica_batch: int
    learning_rate: float

    @property
    def global_batch(self) -> int:
        return self.per_replica_batch * self.replicas

    @property
    def scaled_learning_rate(self) -> float:
        return self.learning_rate * self.replicas

    def note(self, own_optimizer: bool) -> str:
        if self.replicas == 1:
            return "1 replica: batch and learning rate as given"
        lr = (
            "the module's optimizer keeps its own learning rate"
            if own_optimizer
            else f"learning rate scaled linearly, {self.learning_rate:g} -> "
            f"{self.scaled_learning_rate:g}"
        )
        return (
            f"{self.replicas} replicas x {self.per_replica_batch} = global batch "
            f"{self.global_batch}; {lr}"
        )


def replicas(strategy) -> int:
    return strategy.num_replicas_in_sync if strategy is not None else 1


def scope(strategy):
    """The strategy's scope, or a no-op without one."""
    return strategy.scope() if strategy is not None else contextlib.nullcontext()


@contextlib.contextmanager
def keras_multiworker(model, strategy, dataset):
    """Lets Keras 3's `fit`/`evaluate` on `dataset` run under MultiWorkerMirroredStrategy.

    Keras 3.12 breaks there in two places (keras-team/keras#20585, tensorflow/tensorflow#72388):
    its symbolic build reduces the first distributed batch across workers (`strategy.reduce` of
    a PerReplica input fails), and it reduces scalar step logs with `axis=0`. Here the model,
    its optimizer and metrics are built on one local batch inside the strategy's scope, Keras'
    own per-fit build is skipped (the strategy is then taken from the enclosing scope, which
    is where Keras looks when the model holds none), and the step logs are averaged across
    workers without an axis. Other strategies pass through untouched.
    """
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        yield
        return
    from keras.src.backend.tensorflow import trainer as keras_trainer

    original = keras_trainer.reduce_per_replica

    def reduce_per_replica(values, strategy_, reduction):
        if reduction in ("auto", "mean"):
            return tf.nest.map_structure(
                lambda v: strategy_.reduce("MEAN", v, axis=None)
                if isinstance(v, tf.distribute.DistributedValues)
                else v,
                values,
            )
        return original(values, strategy_, reduction)

    with strategy.scope():
        model._symbolic_build(data_batch=next(iter(dataset)))
    held = model._distribute_strategy
    model._distribute_strategy = None
    keras_trainer.reduce_per_replica = reduce_per_replica
    try:
        with strategy.scope():
            yield
    finally:
        keras_trainer.reduce_per_replica = original
        model._distribute_strategy = held

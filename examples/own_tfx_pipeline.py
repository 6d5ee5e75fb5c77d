"""A TFX pipeline of your own, with amp-pipeline's trainer twins, gate and Pusher in it.

    python examples/own_tfx_pipeline.py --output DIR                 # runs it, LocalDagRunner
    python examples/own_tfx_pipeline.py --output DIR --compile-kfp pipeline.json   # KFP v2 spec

TFX's own CsvExampleGen, StatisticsGen, SchemaGen, ExampleValidator and Transform, with this
file's `preprocessing_fn` as the Transform module, read the embedded digits (1,797 8x8 images).
Then `amp_pipeline.tfx` adds the float32 and AMP trainer twins, the judges (TFMA, infra
validation, the side-by-side speed measurement, the promotion gate) and the Pusher. Last, a step
of the user's own, `PromotionNotice`, runs only when the gate promoted a twin: a TFX conditional
on the gate's `promoted` output, which compiles to a trigger condition on Kubeflow and Vertex.

Writes DIR/decision.json (the gate's decision) and prints its headline. Exit code: 0 promoted,
3 rejected (as `amp-pipeline run`).
"""

import argparse
import gzip
import json
import sys
from pathlib import Path

from tfx import v1 as tfx

LABEL = "label"
CLASSES = tuple(str(digit) for digit in range(10))
PIXELS = 64
EXIT_REJECTED = 3


def preprocessing_fn(inputs):
    """The Transform module (this file): 64 pixels scaled to [0, 1] as `x`, the digit as its
    class id. The contract is amp_pipeline.tfx's: FEATURES_KEY and LABEL_KEY."""
    import tensorflow as tf

    from amp_pipeline import tfx as amp

    columns = []
    for i in range(PIXELS):
        value = inputs[f"pixel_{i}"]
        if isinstance(value, tf.SparseTensor):
            value = tf.sparse.to_dense(value)
        columns.append(tf.reshape(tf.cast(value, tf.float32), [-1, 1]))
    task = amp.Task(label=LABEL, classes=CLASSES)
    return {
        amp.FEATURES_KEY: tf.concat(columns, axis=1) / 16.0,
        amp.LABEL_KEY: amp.class_ids(inputs[LABEL], task),
    }


class Notice(tfx.dsl.Artifact):
    """What PromotionNotice wrote: notice.json."""

    TYPE_NAME = "own_tfx_pipeline.Notice"  # KFP v2 needs <namespace>.<Name>


@tfx.dsl.components.component
def PromotionNotice(  # noqa: N802 - TFX component names are classes
    blessing: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.ModelBlessing],
    notice: tfx.dsl.components.OutputArtifact[Notice],
) -> None:
    """A user's step after a promotion (a deployment, a message): here, a note of what
    shipped, from the gate's outputs."""
    Path(notice.uri).mkdir(parents=True, exist_ok=True)
    outputs = {
        key: blessing.get_custom_property(key)
        for key in ("promoted", "precision_ratio", "accuracy_change", "shipped_precision")
        if blessing.has_custom_property(key)
    }
    (Path(notice.uri) / "notice.json").write_text(json.dumps(outputs, indent=2))


def create_pipeline(
    output: Path,
    train_steps: int,
    speed_rounds: int,
    tflite: tuple[str, ...],
    policy: str = "auto",
) -> tfx.dsl.Pipeline:
    from amp_pipeline import tfx as amp

    example_gen = tfx.components.CsvExampleGen(input_base=str(output / "data"))
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = tfx.components.SchemaGen(
        statistics=statistics_gen.outputs["statistics"], infer_feature_shape=True
    )
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        module_file=str(Path(__file__).resolve()),
    )
    task = amp.Task(label=LABEL, classes=CLASSES)
    twins = amp.trainer_twins(
        transform.outputs["transformed_examples"],
        transform.outputs["transform_graph"],
        task,
        amp.TrainOptions(
            model="mlp", policy=policy, train_steps=train_steps, tflite_variants=tflite
        ),
    )
    judged = amp.judges(
        example_gen.outputs["examples"],
        twins,
        task,
        amp.PromotionOptions(speed_rounds=speed_rounds, model_name="digits"),
    )
    push = amp.pusher(twins, judged.gate, str(output / "serving" / "digits"))
    promoted = judged.gate.outputs["blessing"].future()[0].custom_property("promoted") == 1
    with tfx.dsl.Cond(promoted):
        notice = PromotionNotice(blessing=judged.gate.outputs["blessing"])
    return tfx.dsl.Pipeline(
        pipeline_name="own-tfx-pipeline",
        pipeline_root=str(output / "tfx"),
        components=[
            example_gen,
            statistics_gen,
            schema_gen,
            example_validator,
            transform,
            *twins,
            *judged,
            push,
            notice,
        ],
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            str(output / "metadata.db")
        ),
        beam_pipeline_args=amp.beam_args(),
    )


def write_digits(folder: Path) -> None:
    from amp_pipeline.components.data.ingest import DIGITS_CSV

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "digits.csv").write_bytes(gzip.decompress(DIGITS_CSV.read_bytes()))


def latest_decision(output: Path) -> dict:
    """The newest PromotionGate decision in this pipeline's ML Metadata."""
    from ml_metadata.metadata_store import metadata_store

    config = tfx.orchestration.metadata.sqlite_metadata_connection_config(
        str(output / "metadata.db")
    )
    store = metadata_store.MetadataStore(config)
    decisions = store.get_artifacts_by_type("amp_pipeline.GateDecision")
    if not decisions:
        raise SystemExit(f"error: {output}: the pipeline ran, but no gate decision was recorded")
    newest = max(decisions, key=lambda a: a.id)
    return json.loads((Path(newest.uri) / "decision.json").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True, help="the pipeline's folder")
    parser.add_argument("--train-steps", type=int, default=300)
    parser.add_argument("--speed-rounds", type=int, default=7)
    parser.add_argument(
        "--policy",
        default="auto",
        choices=("auto", "mixed_bfloat16", "mixed_float16", "float32"),
        help="the AMP twin's policy; auto follows the hardware",
    )
    parser.add_argument(
        "--tflite", default="float32,float16,dynamic_int8", help="variants, or none"
    )
    parser.add_argument("--compile-kfp", type=Path, help="write a KFP v2 spec here, run nothing")
    parser.add_argument("--image", default="gcr.io/my-project/amp-pipeline:latest")
    args = parser.parse_args(argv)
    output = args.output.resolve()
    variants = () if args.tflite == "none" else tuple(args.tflite.split(","))
    pipeline = create_pipeline(output, args.train_steps, args.speed_rounds, variants, args.policy)
    if args.compile_kfp:
        runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
            config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
                default_image=args.image
            ),
            output_filename=str(args.compile_kfp),
        )
        runner.run(pipeline, write_out=True)
        print(f"wrote {args.compile_kfp}")
        return 0
    write_digits(output / "data")
    tfx.orchestration.LocalDagRunner().run(pipeline)
    decision = latest_decision(output)
    (output / "decision.json").write_text(json.dumps(decision, indent=2))
    shipped = decision.get("shipped_precision") or "no"
    print(f"{decision['decision']}: {shipped} twin shipped; {decision.get('why', '')}".rstrip("; "))
    return 0 if decision["passed"] else EXIT_REJECTED


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import own_tfx_pipeline  # the components by their module's name, not __main__'s

    sys.exit(own_tfx_pipeline.main())

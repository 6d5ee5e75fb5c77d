"""AnomalyCheck: stops the run when ExampleValidator found anomalies, before any training, and
hands Transform the schema the findings were judged by.

ExampleValidator compares the eval split with a schema SchemaGen inferred from the train split
alone. Some of its findings are chance, not drift, given what the input check saw in the whole
file; those are tolerated, logged and recorded on the schema artifact (its custom property
`tolerated`, JSON: Transform wants the schema alone in its folder), and the run goes on:
- a boolean domain SchemaGen guessed for an integer column (GUESSED_BOOLEAN);
- an eval value missing from a domain of the train split's values, in a feature read through a
  vocabulary with an out-of-vocabulary id (texts, categories, bags, and a string column of at
  most 16 values, whose one-hot vocabulary has one out-of-vocabulary slot), unless the user
  declared the column closed (`--closed-columns`);
- a column present on every train row but missing somewhere in eval, where the input check
  counted missing cells in the file: its schema entry becomes optional (no fixed shape, no
  presence floor), so Transform reads it as it reads a column with missing cells in train.
Everything else stops the run: a type change, a missing column, a value outside a closed
domain.
"""

import json
import logging
import os

from tensorflow_data_validation.utils import anomalies_util
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.types import artifact_utils
from tfx.types.standard_artifacts import ExampleAnomalies, Schema

from amp_pipeline.core.component_types import InputArtifact, OutputArtifact, Parameter, component
from amp_pipeline.core.errors import InputError


class AnomaliesFound(InputError):
    """ExampleValidator reported anomalies; the message names the split and the features."""


def describe_anomalies(anomalies_by_split: dict) -> str:
    """One line: each split's anomalous features with TFDV's short description."""
    parts = []
    for split, anomalies in sorted(anomalies_by_split.items()):
        for feature, info in sorted(anomalies.anomaly_info.items()):
            parts.append(
                f"split {split!r}, feature {feature!r}: {info.short_description} "
                f"({info.description[:160]})"
            )
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            parts.append(f"split {split!r}, dataset: {info.short_description}")
    return "; ".join(parts)


# SchemaGen gives an integer feature a boolean domain when the train split holds only 0 and 1;
# a 2 in the eval split is then "drift". The input check types features itself: not drift.
GUESSED_BOOLEAN = {
    anomalies_pb2.AnomalyInfo.BOOL_TYPE_BIG_INT,
    anomalies_pb2.AnomalyInfo.BOOL_TYPE_SMALL_INT,
}


# SchemaGen gives a string feature with few distinct values in the train split a domain of those
# values; every eval text is then "unexpected". Texts, categories, bags of values and the one-hot
# strings (at most 16 values) are read through a vocabulary with an out-of-vocabulary id
# (components/data/preprocessing.py): a value the train split did not have is expected there,
# not drift, unless the user declared the column closed (`--closed-columns`).
UNEXPECTED_STRINGS = {anomalies_pb2.AnomalyInfo.ENUM_TYPE_UNEXPECTED_STRING_VALUES}


# A column present on every train row, missing on some eval row: SchemaGen made it required
# with a fixed shape, and the eval split breaks both.
PRESENCE = {
    anomalies_pb2.AnomalyInfo.FEATURE_TYPE_LOW_FRACTION_PRESENT,
    anomalies_pb2.AnomalyInfo.FEATURE_TYPE_LOW_NUMBER_PRESENT,
    anomalies_pb2.AnomalyInfo.INVALID_FEATURE_SHAPE,
}


def curate(schema, optional: set[str]) -> list[str]:
    """Makes each feature of `optional` in `schema` optional: no fixed shape, no presence
    floor. Returns the names it changed."""
    changed = []
    for feature in schema.feature:
        if feature.name in optional and (
            feature.HasField("shape") or feature.presence.min_fraction > 0
        ):
            feature.ClearField("shape")
            feature.presence.min_fraction = 0.0
            changed.append(feature.name)
    return changed


CHANCE_FINDINGS = (  # (anomaly types, which features they are chance for, what to say)
    (GUESSED_BOOLEAN, "all", "an integer SchemaGen guessed to be boolean"),
    (
        UNEXPECTED_STRINGS,
        "vocabulary",
        "values the train split does not have, read as out-of-vocabulary",
    ),
    (
        PRESENCE,
        "optional",
        "missing cells where the train split had none (the input check counted missing cells "
        "in the file: the column is optional)",
    ),
)


def tolerate(result, vocabulary: set[str], optional: set[str]) -> list[dict]:
    """Removes from `result` each feature whose every finding is chance, not drift (the module
    docstring says which; a rare value and a missing cell in one column together too), and
    returns them as {feature, finding}."""
    groups: dict[str, set[str] | None] = {
        "all": None,
        "vocabulary": vocabulary,
        "optional": optional,
    }
    tolerated = []
    for feature, info in list(result.anomaly_info.items()):
        allowed = {
            kind: text
            for types, group, text in CHANCE_FINDINGS
            if (members := groups[group]) is None or feature in members
            for kind in types
        }
        if info.reason and all(r.type in allowed for r in info.reason):
            said = dict.fromkeys(allowed[r.type] for r in info.reason)
            tolerated.append({"feature": feature, "finding": "; ".join(said)})
    for item in tolerated:
        del result.anomaly_info[item["feature"]]
    return tolerated


def names(text: str) -> set[str]:
    return {name for name in text.split(",") if name}


TOLERATED = "tolerated"  # the curated schema's custom property: the tolerated findings, JSON


@component
def AnomalyCheck(  # noqa: N802 - TFX component names are classes
    anomalies: InputArtifact[ExampleAnomalies],
    schema: InputArtifact[Schema],
    curated_schema: OutputArtifact[Schema],
    text_features: Parameter[str] = "",
    optional_features: Parameter[str] = "",
) -> None:
    """Raises AnomaliesFound if any split has an anomaly that is not chance; writes the schema
    Transform reads (SchemaGen's, with `optional_features` optional) and the tolerated findings.

    `text_features`: the features read through a vocabulary with an out-of-vocabulary id
    (texts, categories, bags, open one-hot strings), comma-separated; `optional_features`: the
    columns the input check found missing anywhere in the file."""
    from tensorflow_data_validation import load_schema_text, write_schema_text

    vocabulary, optional = names(text_features), names(optional_features)
    found, tolerated = {}, []
    for split in artifact_utils.decode_split_names(anomalies.split_names):
        path = os.path.join(anomalies.uri, f"Split-{split}", "SchemaDiff.pb")
        result = anomalies_util.load_anomalies_binary(path)
        for item in tolerate(result, vocabulary, optional):
            logging.warning("split %s, feature %s: tolerated: %s", split, *item.values())
            tolerated.append({"split": split, **item})
        if result.anomaly_info or result.HasField("dataset_anomaly_info"):
            found[split] = result
    if found:
        raise AnomaliesFound(f"ExampleValidator found anomalies: {describe_anomalies(found)}")
    inferred = load_schema_text(os.path.join(schema.uri, "schema.pbtxt"))
    for feature in curate(inferred, optional):
        logging.info("feature %s: optional in the schema (missing cells in the input)", feature)
    os.makedirs(curated_schema.uri, exist_ok=True)
    write_schema_text(inferred, os.path.join(curated_schema.uri, "schema.pbtxt"))
    curated_schema.set_string_custom_property(TOLERATED, json.dumps(tolerated))

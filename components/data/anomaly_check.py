"""AnomalyCheck: stops the run when ExampleValidator found anomalies, before any training."""

import logging
import os

from tensorflow_data_validation.utils import anomalies_util
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx import v1 as tfx
from tfx.types import artifact_utils

from core.errors import InputError


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


def guessed_booleans(result) -> list[str]:
    """Features whose only anomaly is a boolean domain SchemaGen guessed for an integer."""
    return [
        feature
        for feature, info in result.anomaly_info.items()
        if info.reason and all(r.type in GUESSED_BOOLEAN for r in info.reason)
    ]


# SchemaGen gives a string feature with few distinct values in the train split a domain of those
# values; every eval text is then "unexpected". Texts, categories and bags of values are read
# through a vocabulary with an out-of-vocabulary id (components/data/preprocessing.py): a value
# the train split did not have is expected there, not drift. A string of at most 16 values
# (inspection.ONE_HOT_MAX, one-hot) is a closed set, a country or a colour: a new value in it is
# drift, and stops the run.
UNEXPECTED_STRINGS = {anomalies_pb2.AnomalyInfo.ENUM_TYPE_UNEXPECTED_STRING_VALUES}


def texts_as_categories(result, text_features: set[str]) -> list[str]:
    """Vocabulary features (texts, categories, bags) whose only anomaly is an eval value missing
    from a domain of the train split's values."""
    return [
        feature
        for feature, info in result.anomaly_info.items()
        if feature in text_features
        and info.reason
        and all(r.type in UNEXPECTED_STRINGS for r in info.reason)
    ]


ExampleAnomalies = tfx.types.standard_artifacts.ExampleAnomalies


@tfx.dsl.components.component
def AnomalyCheck(  # noqa: N802 - TFX component names are classes
    anomalies: tfx.dsl.components.InputArtifact[ExampleAnomalies],
    text_features: tfx.dsl.components.Parameter[str] = "",
) -> None:
    """Raises AnomaliesFound if any split has an anomaly. `text_features`: the features read
    through a vocabulary with an out-of-vocabulary id (texts, categories, bags), comma-separated."""
    texts = {name for name in text_features.split(",") if name}
    found = {}
    for split in artifact_utils.decode_split_names(anomalies.split_names):
        path = os.path.join(anomalies.uri, f"Split-{split}", "SchemaDiff.pb")
        result = anomalies_util.load_anomalies_binary(path)
        for feature in guessed_booleans(result):
            logging.info(
                "split %s, feature %s: an integer TFDV guessed to be boolean from the train "
                "split; values outside {0, 1} elsewhere are not drift",
                split,
                feature,
            )
            del result.anomaly_info[feature]
        for feature in texts_as_categories(result, texts):
            logging.info(
                "split %s, feature %s: values missing from a domain SchemaGen built of the "
                "train split's values; the feature is read through a vocabulary with an "
                "out-of-vocabulary id, not drift",
                split,
                feature,
            )
            del result.anomaly_info[feature]
        if result.anomaly_info or result.HasField("dataset_anomaly_info"):
            found[split] = result
    if found:
        raise AnomaliesFound(f"ExampleValidator found anomalies: {describe_anomalies(found)}")

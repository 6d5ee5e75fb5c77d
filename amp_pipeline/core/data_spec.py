"""DataSpec: what the pipeline knows about its input before it runs (components/data/ingest.py
makes it; Transform, the trainers, the gate and the summary read it)."""

from __future__ import annotations

import dataclasses
from typing import Any

CLASSIFICATION, REGRESSION = "classification", "regression"
CATEGORY_TOP_K = 100_000  # a categorical feature's vocabulary: its most frequent values
# The other values share one id (no hashed buckets: a device maps values to ids with the
# shipped vocabulary alone, no FarmHash), as text tokens do; id 0 is a missing cell
# (components/data/categories.py): a category has its vocabulary's size + 2 ids.
CATEGORY_OOV_BUCKETS = 1
CATEGORY_IDS_BEYOND_VOCABULARY = 2  # missing (0) and out-of-vocabulary (the last)


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """What the pipeline knows about its input before it runs.

    Attributes:
        source: the path the user gave (or "embedded digits").
        format: "csv" or "tfrecord": which ExampleGen reads `input_base`.
        input_base: folder ExampleGen reads.
        input_pattern: file pattern inside `input_base`.
        label: name of the label feature.
        label_kind: "int" or "string": how the label is stored in the examples.
        classes: the label's classes as strings, in class-id order.
        numeric_features: (name, length) of each numeric feature, in model-input order.
        string_features: names of the categorical string features with few values (one-hot).
        categorical_features: names of the categorical features with many values (strings with
            more than 16 distinct values, integer IDs): each gets a vocabulary in Transform and
            a learned embedding in the model.
        bag_features: (name, values kept per row) of the multi-valued string features (values
            joined by `bag_separator`): a vocabulary of the values, and the mean of their
            embeddings in the model.
        bag_separator: what joins a multi-valued cell's values.
        text_features: names of the text features (tokenised in Transform into `max_tokens`
            token ids each, components/data/text.py).
        max_tokens: token ids per text feature (padded or truncated).
        vocab_size: the largest vocabulary per text feature (the most frequent tokens).
        text_figures: per text feature, token-length percentiles and the shares of empty and
            truncated texts, over the rows the input check sampled.
        image_shape: (height, width, channels) when the numeric features form an image.
        pixel_scale: what pixels are divided by (their largest value), for images.
        rows: number of rows read (labelled or not).
        unlabelled_rows: rows with no label, left out before the split (`--missing-label`).
        closed_features: string features whose value domain is closed (`--closed-columns`):
            a value the train split does not have stops the run as drift.
        task: "classification" or "regression".
        task_reason: why (the flag, or what `--task auto` saw in the label).
        label_mean, label_std: a regression label's mean and (population) standard deviation
            over every row the input check read: Transform standardises the label with them
            and the serving signatures answer in the label's units.
        label_range: a regression label's smallest and largest value.
        spans: for `--data` with `{SPAN}` (components/data/spans/selection.py), the spans read:
            {"spans": [numbers, oldest first], "versions", "available": [every span found],
            "resolved": [each span's pattern], "fingerprint": of the earlier spans' files};
            else empty. `input_pattern` then keeps the placeholders.
    """

    source: str
    format: str
    input_base: str
    input_pattern: str
    label: str
    label_kind: str
    classes: tuple[str, ...]
    numeric_features: tuple[tuple[str, int], ...]
    string_features: tuple[str, ...] = ()
    categorical_features: tuple[str, ...] = ()
    bag_features: tuple[tuple[str, int], ...] = ()
    bag_separator: str = "|"
    text_features: tuple[str, ...] = ()
    max_tokens: int = 0
    vocab_size: int = 0
    text_figures: dict[str, Any] = dataclasses.field(default_factory=dict)
    image_shape: tuple[int, int, int] | None = None
    pixel_scale: float = 1.0
    rows: int = 0
    unlabelled_rows: int = 0
    closed_features: tuple[str, ...] = ()
    csv_format: dict[str, Any] | None = None
    excluded: tuple[dict[str, Any], ...] = ()
    missing: dict[str, Any] = dataclasses.field(default_factory=dict)
    class_counts: dict[str, Any] = dataclasses.field(default_factory=dict)
    notices: tuple[str, ...] = ()
    task: str = CLASSIFICATION
    task_reason: str = ""
    label_mean: float = 0.0
    label_std: float = 1.0
    label_range: tuple[float, ...] = ()
    spans: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def regression(self) -> bool:
        return self.task == REGRESSION

    def original_name(self, feature: str) -> str:
        """The column name as the user wrote it, for a feature name."""
        if self.csv_format and feature in self.csv_format["names"]:
            return str(self.csv_format["columns"][self.csv_format["names"].index(feature)])
        return feature

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DataSpec:
        d = dict(d)
        d["classes"] = tuple(d["classes"])
        d["numeric_features"] = tuple((n, int(k)) for n, k in d["numeric_features"])
        d["string_features"] = tuple(d["string_features"])
        d["text_features"] = tuple(d.get("text_features", ()))
        d["closed_features"] = tuple(d.get("closed_features", ()))
        d["categorical_features"] = tuple(d.get("categorical_features", ()))
        d["bag_features"] = tuple((n, int(k)) for n, k in d.get("bag_features", ()))
        if d.get("image_shape") is not None:
            d["image_shape"] = tuple(d["image_shape"])
        d["excluded"] = tuple(d.get("excluded", ()))
        d["notices"] = tuple(d.get("notices", ()))
        d["label_range"] = tuple(d.get("label_range", ()))
        return cls(**d)

"""Categories and bags of values: the ids Transform gives them, written twice (TensorFlow ops in
components/data/preprocessing.py, plain Python here for devices, for `inspect`'s count of a
bag's values), proven identical by tests/test_categories.py. The TFLite models hold the same
lookups in their graph (components/export/device_graph.py).

The rules, simple enough to port to any device app, with the vocabulary file shipped beside
the TFLite models (one value per line, most frequent first):

- **A category** (one value per row): a missing cell is id 0; the value on line i (from 0) is
  id i + 1; any other value is the out-of-vocabulary id, the number of lines + 1. An integer ID
  is looked up as its decimal text (`123`).
- **A bag** (several values per cell, joined by the separator): the cell is split at the
  separator, each part stripped of ASCII whitespace, empty parts dropped; each value's id is its
  line + 1, any other value's the number of lines + 1; the first `values_kept` ids are kept and
  padded with 0. A missing cell is all padding.

No hashed buckets: a device maps values to ids with the vocabulary alone (no FarmHash).

In training only, OOV_SHARE of the category and bag ids (a seeded draw per example and id)
are replaced by the out-of-vocabulary id (components/training/datasets.py), so that its embedding
row learns what an average unseen value looks like instead of staying at its random start.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

MISSING_ID = 0  # a category's missing cell; a bag's padding
ASCII_WHITESPACE = " \t\n\r\f\v"  # what tf.strings.strip removes
OOV_SHARE = 0.01


def oov_id(vocabulary_length: int) -> int:
    """The out-of-vocabulary id of a category or bag: one past the vocabulary's last line."""
    return vocabulary_length + 1


def category_size(vocabulary_length: int) -> int:
    """Ids a category's embedding needs: missing, the vocabulary, out-of-vocabulary."""
    return vocabulary_length + 2


def as_text(value) -> str | None:
    """A cell as the vocabulary holds it: strings as they are, integers in decimal, None (or
    an empty string) missing."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return value if value != "" else None


def encode_categories(values: Iterable, vocabulary: Sequence[str]) -> list[int]:
    """Each value's category id (the rule above)."""
    index = {v: i + 1 for i, v in enumerate(vocabulary)}
    unknown = oov_id(len(vocabulary))
    out = []
    for value in values:
        text = as_text(value)
        out.append(MISSING_ID if text is None else index.get(text, unknown))
    return out


def bag_values(cell, separator: str) -> list[str]:
    """A bag cell's values: split, stripped of ASCII whitespace, empty ones dropped."""
    text = as_text(cell)
    if text is None:
        return []
    parts = (p.strip(ASCII_WHITESPACE) for p in text.split(separator))
    return [p for p in parts if p]


def encode_bags(
    cells: Iterable, vocabulary: Sequence[str], separator: str, values_kept: int
) -> list[list[int]]:
    """Each cell's bag ids, padded or cut to `values_kept` (the rule above)."""
    index = {v: i + 1 for i, v in enumerate(vocabulary)}
    unknown = oov_id(len(vocabulary))
    out = []
    for cell in cells:
        ids = [index.get(v, unknown) for v in bag_values(cell, separator)][:values_kept]
        out.append(ids + [MISSING_ID] * (values_kept - len(ids)))
    return out


CATEGORY_RULE = (
    "a missing cell is id 0; the value on line i (from 0) of the vocabulary file is id i + 1; "
    "any other value is oov_id (the number of lines + 1); an integer is looked up as its "
    "decimal text (components/data/categories.py: encode_categories)"
)
BAG_RULE = (
    "split the cell at `separator`, strip each part of ASCII whitespace, drop empty parts; the "
    "value on line i of the vocabulary file is id i + 1, any other value oov_id (the number of "
    "lines + 1); keep the first `values_kept` ids and pad with 0 (components/data/"
    "categories.py: encode_bags)"
)

"""Text features: one tokenizer, written twice (TensorFlow ops for Transform, plain Python for
`inspect` and for devices), proven identical by tests/test_text.py.

The rule, simple enough to port to any device app:
1. every ASCII control character (0x00-0x1F and 0x7F: NUL, tab, newline, ...) becomes a space;
2. lowercase (Unicode, as Python's `str.lower` and TensorFlow's utf-8 `tf.strings.lower` agree);
3. every ASCII punctuation character becomes a space, and the text is split on spaces;
4. look each token up in the run's vocabulary (one token per line, most frequent first): the
   token on line i (from 0) gets id i + 1; a token not in it gets the one out-of-vocabulary
   id, the number of lines + 1; id 0 is padding;
5. keep the first `max_tokens` ids and pad with 0 to `max_tokens`.

One out-of-vocabulary id, not hashed buckets: TensorFlow hashes OOV buckets with FarmHash
Fingerprint64, which a device app would have to reimplement bit for bit.
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterable, Sequence
from pathlib import Path

PUNCTUATION = string.punctuation  # the 32 ASCII punctuation characters
CONTROL = "".join(map(chr, range(0x20))) + "\x7f"  # NUL, tab, newline, ... DEL: all spaces
PAD_ID = 0
DEFAULT_VOCAB_SIZE = 20_000
MAX_TOKENS_LIMIT = 512
MIN_MULTIWORD_TOKENS = 4  # mean tokens per value at which a string column is text
_PUNCT_TABLE = str.maketrans(dict.fromkeys(PUNCTUATION, " "))
_CONTROL_TABLE = str.maketrans(dict.fromkeys(CONTROL, " "))


def tokenize(text: str) -> list[str]:
    """The tokens of `text` (steps 1-3 of the rule)."""
    spaced = text.translate(_CONTROL_TABLE).lower().translate(_PUNCT_TABLE)
    return [t for t in spaced.split(" ") if t]


def oov_id(vocabulary_length: int) -> int:
    """The out-of-vocabulary id: one past the vocabulary file's last line."""
    return vocabulary_length + 1


def encode(text: str, vocabulary: Sequence[str], max_tokens: int) -> list[int]:
    """Token ids of `text`, padded or truncated to `max_tokens` (steps 4-5); `vocabulary`: the
    run's vocabulary file's lines."""
    return encode_all([text], vocabulary, max_tokens)[0]


def encode_all(texts: Iterable[str], vocabulary: Sequence[str], max_tokens: int) -> list[list[int]]:
    """`encode` of each text, the vocabulary's index built once."""
    index = {token: i + 1 for i, token in enumerate(vocabulary)}
    unknown = oov_id(len(vocabulary))
    out = []
    for text in texts:
        ids = [index.get(t, unknown) for t in tokenize(text)][:max_tokens]
        out.append(ids + [PAD_ID] * (max_tokens - len(ids)))
    return out


def read_vocabulary(path: str | Path) -> list[str]:
    """The vocabulary file Transform wrote (tft's format: one token per line)."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def auto_max_tokens(lengths: Iterable[int]) -> int:
    """The 95th percentile of the token counts, rounded up to a multiple of 8, in [8, 512]."""
    ordered = sorted(lengths)
    if not ordered:
        return 8
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return max(8, min(MAX_TOKENS_LIMIT, -(-p95 // 8) * 8))


def length_figures(lengths: Sequence[int], max_tokens: int) -> dict:
    """Token-length percentiles, the share of empty texts and the share cut at `max_tokens`."""
    ordered = sorted(lengths)
    n = len(ordered)

    def pct(q: float) -> int:
        return ordered[min(n - 1, math.ceil(q * n) - 1)] if n else 0

    return {
        "p50": pct(0.5),
        "p95": pct(0.95),
        "max": ordered[-1] if n else 0,
        "empty_share": sum(1 for x in ordered if x == 0) / n if n else 0.0,
        "truncated_share": sum(1 for x in ordered if x > max_tokens) / n if n else 0.0,
    }


# --- The same rule in TensorFlow ops (Transform's graph) ---------------------------------------


def tf_tokens(texts):
    """[batch] strings -> [batch, None] ragged tokens (steps 1-3), TensorFlow ops only."""
    import re

    import tensorflow as tf

    # Control characters first: utf-8 `tf.strings.lower` stops at a NUL ("AB\x00CD" -> "ab").
    spaced = tf.strings.regex_replace(texts, r"[\x00-\x1f\x7f]", " ")
    lowered = tf.strings.lower(spaced, encoding="utf-8")
    spaced = tf.strings.regex_replace(lowered, "[" + re.escape(PUNCTUATION) + "]", " ")
    tokens = tf.strings.split(spaced, sep=" ")
    return tf.ragged.boolean_mask(tokens, tf.strings.length(tokens) > 0)


def tf_pad_ids(ids, max_tokens: int):
    """[batch, None] ragged ids -> [batch, max_tokens] int64, cut or padded with PAD_ID."""
    return ids[:, :max_tokens].to_tensor(PAD_ID, shape=[None, max_tokens])

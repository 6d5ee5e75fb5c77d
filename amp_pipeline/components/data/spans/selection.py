"""Data that arrives in spans: `--data 'exports/span-{SPAN}/*.csv'` (optionally with `{VERSION}`),
as TFX's file-based ExampleGens read them.

A span is one delivery of data (a day's, a month's files), numbered by the digits that stand
where `{SPAN}` is; a version is a re-delivery of the same span, and the highest one counts. A run
trains on the newest span by default, on span N with `--span N`, and on the K spans that end
there with `--rolling-spans K` (they must be consecutive: a gap is an error, never skipped).

ExampleGen reads them as TFX does: the input pattern keeps `{SPAN}` (and `{VERSION}`) and a static
range names the newest selected span, so the Examples artifact carries TFX's span and version
properties on every orchestrator; the earlier spans of a rolling window travel in the
component's custom_config (components/data/example_gen.py reads them too). TFX's own
ExampleGen reads one span per execution; RollingRange belongs to resolvers over earlier runs,
which a fresh run does not have (tensorflow/tfx#4273).
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from pathlib import Path

from amp_pipeline.core.errors import InputError

SPAN = "{SPAN}"
VERSION = "{VERSION}"
EXTRA_SPANS_KEY = "extra_span_patterns"  # ExampleGen's custom_config: the window's earlier spans


@dataclasses.dataclass(frozen=True)
class SpanSelection:
    """The spans a run reads.

    Attributes:
        input_base: the folder above the first `{SPAN}` (ExampleGen's input_base).
        pattern: the pattern relative to it, `{SPAN}` and `{VERSION}` kept (ExampleGen's split
            pattern).
        spans: the selected span numbers, oldest first; the last is the newest.
        versions: each selected span's version (None without `{VERSION}`).
        files: each selected span's files, in the order of `spans`.
        available: every span number the pattern matches.
    """

    input_base: str
    pattern: str
    spans: tuple[int, ...]
    versions: tuple[int | None, ...]
    files: tuple[tuple[str, ...], ...]
    available: tuple[int, ...]

    def resolved(self, index: int) -> str:
        """The pattern of the index-th selected span, relative to input_base."""
        return resolve(self.pattern, self.spans[index], self.versions[index])

    @property
    def all_files(self) -> list[Path]:
        return [Path(f) for group in self.files for f in group]

    def record(self) -> dict:
        """The DataSpec's `spans`."""
        earlier = [os.stat(f) for group in self.files[:-1] for f in group]
        return {
            "spans": list(self.spans),
            "versions": list(self.versions),
            "available": list(self.available),
            "resolved": [self.resolved(i) for i in range(len(self.spans))],
            "fingerprint": ",".join(f"{st.st_size}:{st.st_mtime_ns}" for st in earlier),
        }

    def describe(self) -> str:
        """'span 3 (of 1-4)' or 'spans 2-4 (of 1-4)'."""
        return describe(self.record())


_PLACEHOLDER = re.compile(r"\{(?P<name>SPAN|VERSION)(?::(?P<width>\d+))?\}")


def describe(record: dict) -> str:
    """A DataSpec's `spans` as 'span 3 (of 1-4)' or 'spans 2-4 (of 1-4)'."""
    chosen = record["spans"]
    head = f"span {chosen[0]}" if len(chosen) == 1 else f"spans {chosen[0]}-{chosen[-1]}"
    return f"{head} (of {_ranges(tuple(record['available']))})"


def has_spans(data: str | None) -> bool:
    return bool(data) and any(h["name"] == "SPAN" for h in _PLACEHOLDER.finditer(str(data)))


def resolve(pattern: str, span: int, version: int | None) -> str:
    """The pattern with `span` (and `version`) in place of its placeholders (`{SPAN:4}`:
    zero-padded to 4 digits, as TFX writes it)."""

    def value(hit: re.Match) -> str:
        number = span if hit["name"] == "SPAN" else version
        return str(number).zfill(int(hit["width"] or 0))

    return _PLACEHOLDER.sub(value, pattern)


def _with_widths(pattern: str, texts: dict[str, set[str]]) -> str:
    """`{SPAN}` as `{SPAN:w}` where the files write their numbers zero-padded to w digits (TFX
    substitutes a plain `{SPAN}` without padding)."""
    for name, seen in texts.items():
        padded = {len(t) for t in seen if len(t) > 1 and t.startswith("0")}
        if padded:
            widths = {len(t) for t in seen}
            if len(widths) > 1:
                raise InputError(
                    f"--data: the {name} numbers are zero-padded to different widths "
                    f"({', '.join(sorted(seen)[:4])}); write them with one width"
                )
            pattern = pattern.replace("{" + name + "}", "{" + name + f":{widths.pop()}" + "}")
    return pattern


def _split(data: str) -> tuple[str, str]:
    """(input_base, pattern): the folder above the first placeholder or wildcard."""
    parts = Path(os.path.expanduser(data)).parts
    for i, part in enumerate(parts):
        if any(ch in part for ch in "{*?["):
            base = Path(*parts[:i]) if i else Path(".")
            return str(base.resolve()), "/".join(parts[i:])
    raise InputError(f"--data {data}: {SPAN} must be in the path")


def _regex(pattern: str) -> re.Pattern:
    """The pattern as a regex over paths relative to input_base: the placeholders as
    groups of digits, the glob wildcards within one path part."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith(SPAN, i):
            out.append(r"(?P<span>\d+)")
            i += len(SPAN)
        elif pattern.startswith(VERSION, i):
            out.append(r"(?P<version>\d+)")
            i += len(VERSION)
        elif pattern[i] == "*":
            out.append(r"[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append(r"[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def select(
    data: str,
    span: int | None = None,
    rolling: int = 1,
    suffixes: tuple[str, ...] = (),
) -> SpanSelection:
    """The spans `data` (a pattern with `{SPAN}`) matches, and the ones this run reads: the
    newest (or `span`) and the `rolling - 1` before it.

    Raises:
        InputError: one line, for a pattern that matches nothing, a missing span, a gap in the
            window, a placeholder used twice or `rolling` under 1.
    """
    data = _PLACEHOLDER.sub(lambda h: "{" + h["name"] + "}", data)  # widths: as the files are
    if data.count(SPAN) != 1 or data.count(VERSION) > 1:
        raise InputError(f"--data {data}: write {SPAN} once (and {VERSION} at most once)")
    if rolling < 1:
        raise InputError(f"--rolling-spans {rolling}: must be at least 1")
    base, pattern = _split(data)
    if not Path(base).is_dir():
        raise InputError(f"--data {data}: no such folder {base}")
    matcher = _regex(pattern)
    found: dict[int, dict[int | None, list[str]]] = {}
    texts: dict[str, set[str]] = {"SPAN": set(), "VERSION": set()}
    wild = pattern.replace(SPAN, "*").replace(VERSION, "*")
    for path in sorted(glob.glob(os.path.join(glob.escape(base), wild))):
        name = os.path.basename(path)
        if name.startswith((".", "_")) or not os.path.isfile(path):
            continue
        if suffixes and not name.lower().endswith(suffixes):
            continue
        hit = matcher.match(os.path.relpath(path, base))
        if hit is None:
            continue
        version = int(hit["version"]) if "version" in hit.groupdict() else None
        texts["SPAN"].add(hit["span"])
        if version is not None:
            texts["VERSION"].add(hit["version"])
        found.setdefault(int(hit["span"]), {}).setdefault(version, []).append(path)
    if not found:
        raise InputError(f"--data {data}: the pattern matches no files")
    available = tuple(sorted(found))
    newest = available[-1] if span is None else span
    if newest not in found:
        raise InputError(
            f"--span {span}: no files for span {span} under --data {data} "
            f"(spans found: {_ranges(available)})"
        )
    wanted = list(range(newest - rolling + 1, newest + 1))
    missing = [s for s in wanted if s not in found]
    if missing:
        raise InputError(
            f"--rolling-spans {rolling}: spans {wanted[0]}-{wanted[-1]} are needed and "
            f"{_ranges(tuple(missing))} {'is' if len(missing) == 1 else 'are'} missing under "
            f"--data {data} (spans found: {_ranges(available)})"
        )
    versions = tuple(max(found[s], key=lambda v: -1 if v is None else v) for s in wanted)
    return SpanSelection(
        input_base=base,
        pattern=_with_widths(pattern, texts),
        spans=tuple(wanted),
        versions=versions,
        files=tuple(tuple(found[s][v]) for s, v in zip(wanted, versions, strict=True)),
        available=available,
    )


def _ranges(numbers: tuple[int, ...]) -> str:
    """'1-3, 5' for (1, 2, 3, 5)."""
    out: list[str] = []
    for n in numbers:
        if out and int(out[-1].split("-")[-1]) == n - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)

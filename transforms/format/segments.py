"""Time-aligned segments of a recording, read from the annotations that carry them.

Beam-free. A `Segment` is the span [start, end) seconds of one recording with
its fields (speaker, text, label...). `parse_segments` reads a whole
annotation (a tar member, a Bigtable cell, any field's bytes), telling its
format from its content:

- RTTM, NIST's diarization format: one `SPEAKER <file> <channel> <onset>
  <duration> <NA> <NA> <name> <NA> <NA>` line per turn, giving the fields
  `speaker` and `channel`; lines of other types (SPKR-INFO, LEXEME, ...) and
  `;;` comments are skipped;
- JSON: a list of objects, or an object whose `segments` member is that list
  (a JSONL file of one object per line is read too);
- CSV with a header row.

A JSON object or CSV row gives its span as `start` (or `offset`, NeMo's name)
and `end` (or `duration`), and every other member as a field. The span is
taken as written: whether it is one (end above start, within the recording)
is the cut's to say, for one segment at a time (transforms/media/cutting.py),
so one bad line fails its segment, not its recording. What does not parse
at all (not UTF-8, a line of the wrong shape, a time that is not a number)
raises ValueError naming the line.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from typing import Any, Iterator, Mapping, NamedTuple

__all__ = ["Segment", "Span", "parse_segments", "segment_of"]

_STARTS = ("start", "offset")
_ENDS = ("end", "duration")
_RTTM_FIELDS = 10
# The line types of NIST's RTTM; only SPEAKER lines are segments.
_RTTM_TYPES = frozenset({"SPEAKER", "SPKR-INFO", "SEGMENT", "LEXEME", "NON-SPEECH", "NON-LEX",
                         "FILLER", "EDIT", "IP", "END-of-SENTENCE", "A/P", "NOSCORE",
                         "NO_RT_METADATA"})


class Span(NamedTuple):
    """The part of a recording's media a segment sample is (its `__span__`):
    [start, end) seconds on the recording's timeline, and the recording's key."""

    start: float
    end: float
    recording: str


@dataclasses.dataclass(frozen=True)
class Segment:
    """[start, end) seconds of a recording and its fields ((name, value) pairs,
    in the annotation's order); `index` is its place among the recording's."""

    start: float
    end: float
    fields: tuple = ()
    index: int = 0


def _seconds(value: Any, what: str) -> float:
    """A time in seconds from a number or its text; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{what} is {value!r}, not a number of seconds")
    try:
        seconds = float(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError, UnicodeDecodeError):
        raise ValueError(f"{what} is {value!r}, not a number of seconds") from None
    if not math.isfinite(seconds):
        raise ValueError(f"{what} is {value!r}, not a finite number of seconds")
    return seconds


def segment_of(values: Mapping[str, Any], index: int = 0, where: str = "") -> Segment:
    """The segment a JSON object or CSV row describes: its span from start (or
    offset) and end (or duration), its other members as fields."""
    where = where or f"segment {index}"
    starts = [name for name in _STARTS if name in values]
    ends = [name for name in _ENDS if name in values]
    if len(starts) != 1 or len(ends) != 1:
        raise ValueError(f"{where}: give its span as one of {'/'.join(_STARTS)} and one of "
                         f"{'/'.join(_ENDS)}; it has {sorted(values)}")
    start = _seconds(values[starts[0]], f"{where}: {starts[0]}")
    end = _seconds(values[ends[0]], f"{where}: {ends[0]}")
    if ends[0] == "duration":
        end += start
    fields = tuple((name, value) for name, value in values.items()
                   if name not in (starts[0], ends[0]))
    return Segment(start, end, fields, index)


def _rttm(text: str) -> Iterator[Segment]:
    index = 0
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts or parts[0] != "SPEAKER":
            continue
        if len(parts) != _RTTM_FIELDS:
            raise ValueError(f"RTTM line {number} has {len(parts)} fields, not "
                             f"{_RTTM_FIELDS}: {line.strip()[:200]!r}")
        start = _seconds(parts[3], f"RTTM line {number}: onset")
        duration = _seconds(parts[4], f"RTTM line {number}: duration")
        yield Segment(start, start + duration,
                      (("speaker", parts[7]), ("channel", parts[2])), index)
        index += 1


def _json_segments(text: str) -> Iterator[Segment]:
    try:
        document = json.loads(text)
    except ValueError:
        # One object per line (JSONL), as listings are.
        try:
            document = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as e:
            raise ValueError(f"segments are not JSON or JSONL: {e}") from None
    if isinstance(document, dict):
        document = document.get("segments")
    if not isinstance(document, list):
        raise ValueError("JSON segments are a list of objects, or an object whose "
                         "'segments' member is one")
    for index, item in enumerate(document):
        if not isinstance(item, dict):
            raise ValueError(f"segment {index} is {type(item).__name__}, not an object")
        yield segment_of(item, index)


def _csv_segments(text: str) -> Iterator[Segment]:
    rows = csv.DictReader(io.StringIO(text))
    for index, row in enumerate(rows):
        if None in row or None in row.values():
            raise ValueError(f"CSV segments line {index + 2} has a different number of "
                             "fields than the header")
        yield segment_of(row, index, f"CSV segments line {index + 2}")


def parse_segments(data: bytes | str) -> list[Segment]:
    """Every segment an annotation holds, in its order (see the module docstring)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ValueError(f"segments are not UTF-8 text: {e}") from None
    text = data.strip()
    if not text:
        return []
    if text[:1] in ("[", "{"):
        return list(_json_segments(text))
    first = next(line.split()[0] for line in text.splitlines()
                 if line.strip() and not line.startswith(";;"))
    if first in _RTTM_TYPES:
        return list(_rttm(text))
    return list(_csv_segments(text))

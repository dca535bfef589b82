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
and `end` (or `duration`), and every other member as a field, but a JSON
segment's `boxes`: a track of boxes over time (a face's, VoxCeleb and AVA
style), each `{"t": seconds, "x", "y", "w", "h"}` or `{"t", "x1", "y1", "x2",
"y2"}` or `[t, x, y, w, h]`, in pixels of the upright frame, or in fractions
of its width and height when no coordinate of the track is above 1. The span is
taken as written: whether it is one (end above start, within the recording)
is the cut's to say, for one segment at a time (transforms/media/cutting.py),
so one bad line fails its segment, not its recording. What does not parse
at all (not UTF-8, a line of the wrong shape, a time that is not a number)
raises ValueError naming the line.
"""

from __future__ import annotations

import bisect
import csv
import dataclasses
import io
import json
import math
from typing import Any, Iterator, Mapping, NamedTuple

__all__ = ["Box", "BoxTrack", "Segment", "Span", "parse_segments", "recording_of",
           "segment_key", "segment_of"]

_STARTS = ("start", "offset")
_ENDS = ("end", "duration")
_RTTM_FIELDS = 10
# The line types of NIST's RTTM; only SPEAKER lines are segments.
_RTTM_TYPES = frozenset({"SPEAKER", "SPKR-INFO", "SEGMENT", "LEXEME", "NON-SPEECH", "NON-LEX",
                         "FILLER", "EDIT", "IP", "END-of-SENTENCE", "A/P", "NOSCORE",
                         "NO_RT_METADATA"})


class Box(NamedTuple):
    """A box at `time` seconds: left `x`, top `y`, width `w`, height `h`."""

    time: float
    x: float
    y: float
    w: float
    h: float


@dataclasses.dataclass(frozen=True)
class BoxTrack:
    """Boxes over time, by time; `normalised` when they are fractions of the
    frame's width and height rather than pixels."""

    boxes: tuple
    normalised: bool

    def at(self, time: float) -> Box:
        """The box nearest `time` (of two as near, the earlier)."""
        later = bisect.bisect_left(self.boxes, time, key=lambda box: box.time)
        if later == len(self.boxes):
            return self.boxes[-1]
        if later and time - self.boxes[later - 1].time <= self.boxes[later].time - time:
            return self.boxes[later - 1]
        return self.boxes[later]


class Span(NamedTuple):
    """The part of a recording's media a segment sample is (its `__span__`):
    [start, end) seconds on the recording's timeline, the recording's key, and
    the segment's box track, if it has one."""

    start: float
    end: float
    recording: str
    boxes: BoxTrack | None = None


@dataclasses.dataclass(frozen=True)
class Segment:
    """[start, end) seconds of a recording and its fields ((name, value) pairs,
    in the annotation's order); `index` is its place among the recording's."""

    start: float
    end: float
    fields: tuple = ()
    index: int = 0
    boxes: BoxTrack | None = None


def segment_key(recording: str, segment: Segment) -> str:
    """A segment's sample key: `<recording key>@<start>-<end>`, milliseconds."""
    return f"{recording}@{segment.start * 1000:.0f}-{segment.end * 1000:.0f}"


def recording_of(key: str) -> str:
    """The recording key of a segment's sample key (`segment_key`)."""
    return key.rpartition("@")[0]


def _number(value: Any, what: str) -> float:
    """A finite number (a time, a coordinate) from a number or its text;
    ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{what} is {value!r}, not a number")
    try:
        number = float(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError, UnicodeDecodeError):
        raise ValueError(f"{what} is {value!r}, not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} is {value!r}, not a finite number")
    return number


def segment_of(values: Mapping[str, Any], index: int = 0, where: str = "") -> Segment:
    """The segment a JSON object or CSV row describes: its span from start (or
    offset) and end (or duration), its other members as fields."""
    where = where or f"segment {index}"
    starts = [name for name in _STARTS if name in values]
    ends = [name for name in _ENDS if name in values]
    if len(starts) != 1 or len(ends) != 1:
        raise ValueError(f"{where}: give its span as one of {'/'.join(_STARTS)} and one of "
                         f"{'/'.join(_ENDS)}; it has {sorted(values)}")
    start = _number(values[starts[0]], f"{where}: {starts[0]}")
    end = _number(values[ends[0]], f"{where}: {ends[0]}")
    if ends[0] == "duration":
        end += start
    fields = tuple((name, value) for name, value in values.items()
                   if name not in (starts[0], ends[0], "boxes"))
    boxes = _box_track(values["boxes"], where) if "boxes" in values else None
    return Segment(start, end, fields, index, boxes)


def _box(item: Any, where: str) -> Box:
    if isinstance(item, (list, tuple)) and len(item) == 5:
        t, x, y, w, h = (_number(v, where) for v in item)
        return Box(t, x, y, w, h)
    if isinstance(item, dict) and "x1" in item:
        t, x1, y1, x2, y2 = (_number(item.get(k), f"{where}: {k}")
                             for k in ("t", "x1", "y1", "x2", "y2"))
        return Box(t, x1, y1, x2 - x1, y2 - y1)
    if isinstance(item, dict):
        return Box(*(_number(item.get(k), f"{where}: {k}") for k in ("t", "x", "y", "w", "h")))
    raise ValueError(f"{where} is {item!r}: a box is [t, x, y, w, h] or an object with t and "
                     "x, y, w, h or x1, y1, x2, y2")


def _box_track(items: Any, where: str) -> BoxTrack:
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}: boxes are a non-empty list, not {items!r}")
    boxes = tuple(sorted((_box(item, f"{where}: box {i}") for i, item in enumerate(items)),
                         key=lambda box: box.time))
    for box in boxes:
        if box.w <= 0 or box.h <= 0 or box.x < 0 or box.y < 0:
            raise ValueError(f"{where}: box {box} has no area or starts outside the frame")
    normalised = all(v <= 1 for box in boxes for v in (box.x, box.y, box.x + box.w,
                                                          box.y + box.h))
    return BoxTrack(boxes, normalised)


def _rttm(text: str) -> Iterator[Segment]:
    index = 0
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts or parts[0] != "SPEAKER":
            continue
        if len(parts) != _RTTM_FIELDS:
            raise ValueError(f"RTTM line {number} has {len(parts)} fields, not "
                             f"{_RTTM_FIELDS}: {line.strip()[:200]!r}")
        start = _number(parts[3], f"RTTM line {number}: onset")
        duration = _number(parts[4], f"RTTM line {number}: duration")
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

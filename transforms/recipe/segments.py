"""A recording with segments -> one sample per segment, the unit the recipe converts.

Beam-free. With `SegmentOptions`, each sample is a recording whose segments
(transforms/format/segments.py) come from one of its fields (`field`: an RTTM,
JSON or CSV member, a Bigtable cell) or from two of its own fields (`columns`:
a listing row's offset and duration, or start and end). Each segment becomes a
sample of its own:

- every field of the recording but the annotation, so the cut finds the media
  and the recording's labels travel with each segment;
- `segment.start`, `segment.end` and `segment.index`, and the segment's own
  fields as `segment.<name>` (`segment.speaker`, `segment.text`), for
  --features, --split_by, --stratify_by, --where and the label counts;
- `__key__` `<recording key>@<start>-<end>` (milliseconds), what its examples'
  order and its dead letters name; `__span__` (format.segments.Span), the part
  of the media the cut reads (transforms/media/cutting.py).

So everything after works per segment: the split (a speaker's segments from
many recordings land in one split), the filters, the outcome and the
accounting (transforms/writer/convert.py), and a bad segment is one dead
letter while the recording's others go on.

Segments may overlap (two speakers at once): each is cut whole, so the audio
they share is in the examples of both, and `overlapping` counts the segments
that overlap another of their recording (the manifest's
accounting.segments.overlapping).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Mapping

from transforms.format.arguments import ArgumentError, check_names
from transforms.format.sample import KEY, SPAN, StoredBytes, field_value
from transforms.format.segments import Segment, Span, parse_segments, segment_key, segment_of
from transforms.media.decoded import SPAN_SLACK_S

__all__ = ["SEGMENT_PREFIX", "SegmentOptions", "converted_key", "overlapping", "segment_samples"]

# What the fields a segment gives its sample start with.
SEGMENT_PREFIX = "segment."


@dataclasses.dataclass(frozen=True)
class SegmentOptions:
    """Where a recording's segments are: in the field `field` (RTTM, JSON or CSV
    text), or given by its two fields `columns` (start, then end; a duration
    when the second's name says `dur`, as `duration` and `dur_s` do, as in a
    NeMo manifest's offset and duration). Each segment is then a sample of its
    own (transforms/recipe/segments.py).

    >>> import transforms as dg
    >>> recipe = dg.ExampleRecipe(
    ...     spec=dg.FeatureSpec.parse("text:string"),
    ...     cut=dg.CutOptions(mode="segments", audio_fields=("wav",)),
    ...     segments=dg.SegmentOptions(columns=("offset", "duration")))
    >>> [f.name for f in recipe.spec]   # a whole segment's audio, its times, its text
    ['audio', 'source_key', 'start_time', 'end_time', 'text']
    >>> dg.SegmentOptions(columns="offset,duration")
    Traceback (most recent call last):
    transforms.format.arguments.ArgumentTypeError: segments.columns must be a tuple of ...
    """

    field: str = ""
    columns: tuple = ()

    def __post_init__(self):
        if self.field and self.columns:
            raise ArgumentError("segments.field", "and {segments.columns}: one or the other")
        object.__setattr__(self, "columns", check_names("segments.columns", self.columns))
        if self.columns and (len(self.columns) != 2 or not all(self.columns)):
            raise ArgumentError("segments.columns", f"{','.join(self.columns)!r}: two columns, "
                                "START,END or OFFSET,DURATION")

    def check(self, cut_mode: str) -> None:
        """ValueError unless these segments and the cut `cut_mode` go together."""
        if self.enabled and cut_mode == "none":
            raise ArgumentError("segments.field", "and {segments.columns} cut inside segments: "
                                "name the cut ({cut.mode} segments, audio_windows, frames or "
                                "clips)")
        if cut_mode == "segments" and not self.enabled:
            raise ArgumentError("cut.mode", "segments needs the segments: {segments.field} (a "
                                "member or cell of RTTM, JSON or CSV) or {segments.columns} (a "
                                "listing's)")

    @property
    def enabled(self) -> bool:
        return bool(self.field or self.columns)

    def makes(self, field: str) -> bool:
        """Whether `field` is one each segment's sample gets (segment.start, ...)."""
        return self.enabled and field.startswith(SEGMENT_PREFIX)

    @property
    def reads(self) -> tuple:
        """The fields segments are read from."""
        return (self.field,) if self.field else self.columns


def _segments(sample: Mapping[str, Any], options: SegmentOptions) -> list[Segment]:
    if options.field:
        if options.field not in sample:
            raise ValueError(f"no segments field {options.field!r}")
        value = sample[options.field]
        return parse_segments(value.read() if isinstance(value, StoredBytes) else bytes(value))
    start, end = options.columns
    for column in options.columns:
        if column not in sample:
            raise ValueError(f"no segment column {column!r}")
    return [segment_of({"start": sample[start],
                        "duration" if "dur" in end.lower() else "end": sample[end]},
                       where=f"segment columns {start},{end}")]


def segment_samples(sample: Mapping[str, Any], options: SegmentOptions) -> Iterator[dict]:
    """The sample of each of the recording's segments, in the annotation's
    order; ValueError naming what is wrong when its segments cannot be read
    (the field is missing, not RTTM, JSON or CSV, a time not a number)."""
    recording = sample[KEY]
    base = {name: value for name, value in sample.items() if name != options.field}
    for segment in _segments(sample, options):
        yield {
            **base,
            KEY: segment_key(recording, segment),
            SPAN: Span(segment.start, segment.end, recording, segment.boxes),
            f"{SEGMENT_PREFIX}start": segment.start,
            f"{SEGMENT_PREFIX}end": segment.end,
            f"{SEGMENT_PREFIX}index": segment.index,
            **{SEGMENT_PREFIX + name: field_value(value) for name, value in segment.fields},
        }


def converted_key(key: str, values: tuple, options: SegmentOptions) -> str | None:
    """The key a reader's sample of `key` is converted under: its own, or for
    a row that is one segment (`columns`, their `values`) that segment's; None
    when the values give no segment (converting the row says why). A
    recording whose segments are in a field keeps its key: its segments'
    keys are made of it."""
    if not options.columns:
        return key
    try:
        (segment,) = segment_samples({KEY: key, **dict(zip(options.columns, values))}, options)
    except ValueError:
        return None
    return segment[KEY]


def overlapping(segments: list[Mapping[str, Any]]) -> int:
    """How many of a recording's segment samples overlap another of them (of
    those that are spans: a segment without length overlaps nothing), by more
    than SPAN_SLACK_S: turns that touch (one ends where the next starts, give
    or take the annotation's rounding) do not. In start order, one overlaps an
    earlier one when it starts before the latest end so far, and a later one
    when the next starts before it ends."""
    spans = sorted((sample[SPAN].start, sample[SPAN].end - SPAN_SLACK_S) for sample in segments
                   if sample[SPAN].end > sample[SPAN].start)
    count, latest_end = 0, float("-inf")
    for i, (start, end) in enumerate(spans):
        later = i + 1 < len(spans) and spans[i + 1][0] < end
        count += start < latest_end or later
        latest_end = max(latest_end, end)
    return count

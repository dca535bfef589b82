"""Example durations per split: a histogram of log-spaced bins, and bucket boundaries.

While a job runs, each example's duration (a whole sample's `duration_s`, or
a cut's end - start) is counted into a bin of a logarithmic scale, 5% wide,
and its milliseconds summed (transforms/recipe/measures/durations.py): a few
numbers per unit however many examples.
The manifest gets, per split, the total, the histogram and the boundaries
that cut the split into buckets of about equal example counts, for batching
clips of like length together (`reader.load(bucket_by_duration=True)`, tf.data's
`bucket_by_sequence_length`). Beam-free.
"""

from __future__ import annotations

import math
from typing import Mapping

__all__ = ["BUCKETS", "bin_range", "describe_durations", "duration_bin", "split_durations"]

_GROWTH = 1.05      # each bin is 5% wider than the one below
_SHORTEST = 1e-3    # seconds; shorter durations share its bin
BUCKETS = 8         # buckets the suggested boundaries aim for


def duration_bin(seconds: float) -> int:
    """The histogram bin of a duration: bin b holds [1.05**b, 1.05**(b + 1))."""
    return math.floor(math.log(max(seconds, _SHORTEST)) / math.log(_GROWTH) + 1e-9)


def bin_range(b: int) -> tuple[float, float]:
    """A bin's [from, to) in seconds, rounded to the millisecond."""
    return round(_GROWTH ** b, 3), round(_GROWTH ** (b + 1), 3)


def _boundaries(bins: Mapping[int, int], buckets: int) -> list:
    """Durations that cut the examples into about `buckets` buckets of equal
    counts, at bin edges: none when they all fall in one bin."""
    total = sum(bins.values())
    ordered = sorted(bins)
    boundaries, seen = [], 0
    for b in ordered[:-1]:
        seen += bins[b]
        if seen * buckets >= (len(boundaries) + 1) * total:
            boundaries.append(bin_range(b)[1])
    return boundaries


def split_durations(bins: Mapping[int, int], total_ms: int, buckets: int = BUCKETS) -> dict:
    """A split's manifest entry from its {bin: examples} and summed milliseconds."""
    return {
        "total_s": round(total_ms / 1000, 3),
        "histogram": [{"from_s": bin_range(b)[0], "to_s": bin_range(b)[1], "examples": n}
                      for b, n in sorted(bins.items())],
        "bucket_boundaries_s": _boundaries(bins, buckets),
    }


def describe_durations(entry: Mapping) -> str:
    """A split's manifest entry in words: '1.6 min; buckets at 0.5, 1 s' ('' when
    its examples have no duration)."""
    total = entry.get("total_s", 0.0)
    if not total:
        return ""
    text = f"{total / 3600:.1f} h" if total >= 360 else f"{total / 60:.1f} min"
    boundaries = entry.get("bucket_boundaries_s", [])
    if boundaries:
        text += "; buckets at " + ", ".join(f"{b:g}" for b in boundaries) + " s"
    return text

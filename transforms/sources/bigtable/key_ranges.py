"""Key ranges of a table, Bigtable-free: how a requested range is cut into work
units, and the restriction tracker a splittable read claims row keys with.

- `key_ranges`: [start, end) cut at the table's `sample_row_keys` (tablet
  boundaries) into at most `max_ranges` contiguous ranges; `estimated_bytes`
  sizes one from the samples' byte offsets.
- `ByteKeyRange` / `ByteKeyRangeTracker`: the SDF restriction and its tracker
  (claims, dynamic splits, progress). A split point is interpolated between
  keys, which balances well for evenly spread keys but can cut off a
  key-space half that holds no rows when keys cluster.

Keys are bytes; b"" as an end means the end of the table (row keys are never
empty).
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Iterable, Sequence

from apache_beam.io.iobase import RestrictionProgress, RestrictionTracker
from apache_beam.io.range_trackers import LexicographicKeyRangeTracker

__all__ = ["END_OF_RANGE", "ByteKeyRange", "ByteKeyRangeTracker", "estimated_bytes",
           "key_ranges", "prefix_end"]

# try_claim(END_OF_RANGE) claims the rest of a range: the reader found no more
# rows (the convention of Java's ByteKeyRangeTracker; row keys are never empty).
END_OF_RANGE = b""
# The smallest row key.
_FIRST_KEY = b"\x00"
# Smaller split fractions split at the next unclaimed key (see try_split).
_MIN_SPLIT_FRACTION = 1e-9


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key starting with `prefix` (b"" = no such key)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else b""


def key_ranges(sample_keys: Iterable[bytes], start: bytes = b"", end: bytes = b"",
               max_ranges: int = 64) -> list:
    """[start, end) cut at the sample keys into at most `max_ranges` contiguous
    ranges, in key order.

    `sample_keys` are the keys of `table.sample_row_keys()` (tablet
    boundaries; any order, duplicates and b"" ignored). b"" as `end` is the end
    of the table. When there are more pieces than `max_ranges`, adjacent pieces
    are merged into `max_ranges` ranges of (nearly) equal piece counts. An
    empty range gives [].
    """
    if max_ranges < 1:
        raise ValueError(f"max_ranges must be >= 1, got {max_ranges}")
    if end and start >= end:
        return []
    cuts = sorted({k for k in sample_keys if k and k > start and (not end or k < end)})
    bounds = [start, *cuts, end]
    pieces = len(bounds) - 1
    count = min(pieces, max_ranges)
    # Integer steps: floor((i+1)p/n) - floor(ip/n) >= 1 whenever p >= n.
    edges = [bounds[i * pieces // count] for i in range(count + 1)]
    return list(zip(edges, edges[1:]))


def estimated_bytes(samples: Sequence[tuple], start: bytes, end: bytes) -> int:
    """Bytes in [start, end) by `table.sample_row_keys()`: (key, bytes before it) pairs."""
    keys = [k for k, _ in samples if k]
    offsets = [o for k, o in samples if k]
    total = max((o for _, o in samples), default=0)

    def offset(key: bytes) -> int:
        if not key:
            return 0
        i = bisect.bisect_right(keys, key)
        return offsets[i - 1] if i else 0

    return max(0, (total if not end else offset(end)) - offset(start))


@dataclasses.dataclass(frozen=True)
class ByteKeyRange:
    """The keys [start, end) of a table; b"" as end = the end of the table."""

    start: bytes = b""
    end: bytes = b""

    def __post_init__(self):
        if self.end and self.start > self.end:
            raise ValueError(f"key range start {self.start!r} is after its end {self.end!r}")

    @property
    def is_empty(self) -> bool:
        # No row key sorts before b"\x00": keys are never empty.
        return bool(self.end) and (self.start >= self.end or self.end == _FIRST_KEY)

    def fraction_of(self, key: bytes) -> float:
        """Where `key` lies in the range by key interpolation, 0..1."""
        if self.is_empty or key <= self.start:
            return 0.0
        if self.end and key >= self.end:
            return 1.0
        fraction = LexicographicKeyRangeTracker.position_to_fraction(key, self.start,
                                                                     self.end or None)
        return min(1.0, max(0.0, fraction))


class ByteKeyRangeTracker(RestrictionTracker):
    """Claims row keys of a ByteKeyRange in increasing order; splits dynamically.

    `try_claim(key)` is True while `key` is inside the range; a key at or past
    the end, or END_OF_RANGE (b"", "no more rows"), finishes the range and is
    False. `try_split(f)` cuts the unclaimed rest at a key interpolated `f` of
    the way from just after the last claimed key to the end (for an unbounded
    end, toward the top of the key space).
    """

    def __init__(self, restriction: ByteKeyRange):
        self._range = restriction
        self._last_claimed: bytes | None = None
        self._done = False  # the end was claimed: nothing left to read

    def current_restriction(self) -> ByteKeyRange:
        return self._range

    def try_claim(self, key: bytes) -> bool:
        if self._done:
            return False
        if key == END_OF_RANGE:
            self._done = True
            return False
        if self._last_claimed is not None and key <= self._last_claimed:
            raise ValueError(f"key {key!r} claimed after {self._last_claimed!r}: keys must "
                             f"be claimed in increasing order")
        if key < self._range.start:
            raise ValueError(f"key {key!r} is before the range start {self._range.start!r}")
        if self._range.end and key >= self._range.end:
            self._done = True
            return False
        self._last_claimed = key
        return True

    def _next_unclaimed(self) -> bytes:
        # The smallest key that may still be claimed. Never b"", which as an
        # end would mean "unbounded" where a checkpoint needs "nothing".
        if self._last_claimed is None:
            return self._range.start or _FIRST_KEY
        return self._last_claimed + b"\x00"

    def try_split(self, fraction_of_remainder: float):
        if self._done:
            return None
        start, end = self._range.start, self._range.end
        rest = self._next_unclaimed()
        if end and rest >= end:
            return None
        split = rest
        # Below this, interpolation needs more precision than a float holds
        # (Beam's helper overflows); the split point is `rest` anyway.
        if fraction_of_remainder > _MIN_SPLIT_FRACTION:
            split = LexicographicKeyRangeTracker.fraction_to_position(
                min(fraction_of_remainder, 1.0), rest, end or None)
            # Interpolation never returns a key before `rest`; an unbounded end
            # at fraction 1 gives None - nothing sensible to split off.
            if not split or split < rest:
                return None
        if end and split >= end:
            return None
        primary, residual = ByteKeyRange(start, split), ByteKeyRange(split, end)
        self._range = primary
        return primary, residual

    def check_done(self) -> None:
        if self._done or self._range.is_empty:
            return
        where = (f"after key {self._last_claimed!r}" if self._last_claimed is not None
                 else "before any key was claimed")
        raise ValueError(f"key range [{self._range.start!r}, {self._range.end!r}) not fully "
                         f"read: stopped {where} without claiming the end")

    def current_progress(self) -> RestrictionProgress:
        if self._done:
            done = 1.0
        elif self._last_claimed is None:
            done = 0.0
        else:
            done = self._range.fraction_of(self._last_claimed)
        return RestrictionProgress(completed=done, remaining=1.0 - done)

    def is_bounded(self) -> bool:
        return True

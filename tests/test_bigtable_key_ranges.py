"""Key ranges and the restriction tracker (transforms/sources/bigtable/key_ranges.py),
Bigtable-free: plain assertions and hypothesis properties."""

import pytest
from apache_beam.io.range_trackers import LexicographicKeyRangeTracker
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.sources.bigtable.key_ranges import (
    END_OF_RANGE,
    ByteKeyRange,
    ByteKeyRangeTracker,
    estimated_bytes,
    key_ranges,
    prefix_end,
)

# --- the tracker --------------------------------------------------------------

def test_tracker_claims_and_done():
    tracker = ByteKeyRangeTracker(ByteKeyRange(b"b", b"d"))
    assert tracker.current_progress().completed_work == 0
    assert tracker.try_claim(b"b")
    assert tracker.try_claim(b"bz")
    with pytest.raises(ValueError, match="increasing order"):
        tracker.try_claim(b"ba")
    with pytest.raises(ValueError, match="not fully read"):
        tracker.check_done()
    assert not tracker.try_claim(b"d")  # the end is exclusive
    tracker.check_done()
    assert not tracker.try_claim(b"e")
    assert tracker.current_progress().completed_work == 1
    assert tracker.try_split(0.5) is None and tracker.is_bounded()

    with pytest.raises(ValueError, match="before the range start"):
        ByteKeyRangeTracker(ByteKeyRange(b"b", b"d")).try_claim(b"a")


def test_tracker_end_of_range_and_empty():
    tracker = ByteKeyRangeTracker(ByteKeyRange(b"a", b""))
    assert tracker.try_claim(b"zzzz")
    assert not tracker.try_claim(END_OF_RANGE)
    tracker.check_done()
    ByteKeyRangeTracker(ByteKeyRange(b"k", b"k")).check_done()  # nothing to read
    with pytest.raises(ValueError, match="after its end"):
        ByteKeyRange(b"z", b"a")


def test_tracker_split_bounded():
    tracker = ByteKeyRangeTracker(ByteKeyRange(b"row-000", b"row-100"))
    assert tracker.try_claim(b"row-010")
    primary, residual = tracker.try_split(0.5)
    assert primary.start == b"row-000" and residual.end == b"row-100"
    assert b"row-010" < primary.end == residual.start < b"row-100"
    # halfway through the unclaimed rest, interpolating bytes (not digits)
    assert LexicographicKeyRangeTracker.position_to_fraction(
        residual.start, b"row-010\x00", b"row-100") == pytest.approx(0.5, abs=1e-6)
    assert tracker.current_restriction() == primary
    assert not tracker.try_claim(residual.start)  # belongs to the residual now
    tracker.check_done()


def test_tracker_checkpoint_and_unbounded_split():
    tracker = ByteKeyRangeTracker(ByteKeyRange(b"a", b""))
    assert tracker.try_split(0) == (ByteKeyRange(b"a", b"a"), ByteKeyRange(b"a", b""))
    tracker.check_done()  # the primary is empty

    # At the table start the checkpoint is at b"\x00": [b"", b"") would mean everything.
    tracker = ByteKeyRangeTracker(ByteKeyRange(b"", b""))
    primary, residual = tracker.try_split(1e-311)
    assert (primary, residual) == (ByteKeyRange(b"", b"\x00"), ByteKeyRange(b"\x00", b""))
    assert primary.is_empty and not tracker.try_claim(b"\x00")
    tracker.check_done()

    tracker = ByteKeyRangeTracker(ByteKeyRange(b"", b""))
    assert tracker.try_claim(b"m")
    primary, residual = tracker.try_split(0)
    assert primary == ByteKeyRange(b"", b"m\x00") and residual == ByteKeyRange(b"m\x00", b"")

    tracker = ByteKeyRangeTracker(ByteKeyRange(b"", b""))
    assert tracker.try_claim(b"m")
    primary, residual = tracker.try_split(0.5)
    assert b"m" < primary.end == residual.start and residual.end == b""
    assert tracker.try_split(1.0) is None  # no key is "all the way" to an unbounded end


def test_tracker_progress_moves_forward():
    tracker = ByteKeyRangeTracker(ByteKeyRange(b"\x00", b"\xff"))
    seen = []
    for key in (b"\x10", b"\x40", b"\x80", b"\xc0"):
        tracker.try_claim(key)
        progress = tracker.current_progress()
        assert progress.completed_work + progress.remaining_work == pytest.approx(1)
        seen.append(progress.completed_work)
    assert seen == sorted(seen) and 0.45 < seen[2] < 0.55


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.binary(min_size=1, max_size=4), min_size=1, max_size=30, unique=True),
       claimed=st.integers(0, 30), fraction=st.floats(0, 0.999), bounded=st.booleans())
def test_tracker_split_partitions_keys(keys, claimed, fraction, bounded):
    keys.sort()
    end = b"\xff\xff\xff\xff\xff" if bounded else b""
    tracker = ByteKeyRangeTracker(ByteKeyRange(b"", end))
    claimed = min(claimed, len(keys))
    for key in keys[:claimed]:
        assert tracker.try_claim(key)
    split = tracker.try_split(fraction)
    if split is None:
        return
    primary, residual = split
    assert primary.end == residual.start and residual.end == end
    rest = [k for k in keys[claimed:] if tracker.try_claim(k)]
    second = ByteKeyRangeTracker(residual)
    later = [k for k in keys[claimed:] if residual.start <= k and second.try_claim(k)]
    assert keys[:claimed] + rest + later == keys


# --- key ranges -----------------------------------------------------------------

def _check_cover(ranges, start, end):
    ordered = sorted(ranges, key=lambda r: r[0])
    assert ordered[0][0] == start and ordered[-1][1] == end
    for (_, a_end), (b_start, _) in zip(ordered, ordered[1:]):
        assert a_end == b_start  # no gap, no overlap
    assert all(not e or s < e for s, e in ordered)


@settings(max_examples=200, deadline=None)
@given(samples=st.lists(st.binary(max_size=3), max_size=40), start=st.binary(max_size=2),
       end=st.binary(max_size=2), max_ranges=st.integers(1, 12))
def test_key_ranges_cover_exactly_in_key_order(samples, start, end, max_ranges):
    ranges = key_ranges(samples, start, end, max_ranges)
    if end and start >= end:
        assert ranges == []
        return
    _check_cover(ranges, start, end)
    assert ranges == sorted(ranges, key=lambda r: r[0])
    cuts = {k for k in samples if k and k > start and (not end or k < end)}
    assert len(ranges) == min(len(cuts) + 1, max_ranges)
    assert ranges == key_ranges(list(reversed(samples)), start, end, max_ranges)


def test_key_ranges_merge_evenly():
    samples = [b"k%03d" % i for i in range(1, 100)]  # 100 pieces
    ranges = key_ranges(samples, b"", b"", max_ranges=8)
    _check_cover(ranges, b"", b"")
    sizes = sorted(sum(1 for k in [b"", *samples] if s <= k and (not e or k < e))
                   for s, e in ranges)
    assert len(ranges) == 8 and sizes[-1] - sizes[0] <= 1
    assert key_ranges([], b"a", b"b", 8) == [(b"a", b"b")]
    assert key_ranges([b"x"], b"b", b"b", 8) == []


def test_estimated_bytes():
    # sample_row_keys: (key, bytes stored before it), the last key b"" = the table end
    samples = [(b"b", 100), (b"d", 300), (b"", 500)]
    assert estimated_bytes(samples, b"", b"b") == 100
    assert estimated_bytes(samples, b"b", b"d") == 200
    assert estimated_bytes(samples, b"d", b"") == 200
    assert estimated_bytes(samples, b"c", b"") == 400  # from the sample at or before b"c"
    assert estimated_bytes([], b"", b"") == 0


def test_prefix_end():
    assert prefix_end(b"spk1/") == b"spk10"
    assert prefix_end(b"a\xff\xff") == b"b"
    assert prefix_end(b"\xff") == b""  # every key from the prefix on

"""What became of a job's inputs, counted: tallies, and the accounting they add up to.

Beam-free. Every pass counts, per work unit, what became of each input as
`Tally`s: a `Kind` and a detail (the split of what was written, a filter's
reason, a dead letter's unit), each with a count. The driver
(transforms/recipe/driver.py) tallies a unit's samples, the writer the dead
letters of the steps before it and what a sink refused; the final step sums
them all, and `Accounting` makes of the sums the manifest's `accounting`
and checks that samples read = written + filtered + failed, and the same of
segments and of examples a cut made.

A recording cut into segments is written when it gave its segments
(SEGMENTED; a listing row whose segment is in its columns fails with it,
FAILED_BY_SEGMENT), and its segments are tallied as SEGMENTS_*; examples a
cut made before the writer (a PCollection's CutSamples dicts) as
CUT_EXAMPLES_*, their samples by the writer from what became of them.
"""

from __future__ import annotations

import collections
import enum
import functools
from typing import Any, Iterable, Mapping, NamedTuple

from transforms.format.dead_letters import EXAMPLE, FILE, SAMPLE, SEGMENT

__all__ = ["Accounting", "Kind", "Tally", "inputs_and_failed", "parse_tallies", "what_came"]


class Kind(enum.StrEnum):
    """What a tally counts (its detail, when it has one)."""

    READ = "read"                          # samples read (a file that gave none is no read)
    WRITTEN = "written"                    # samples that gave all their examples (split)
    EXAMPLES = "examples"                  # examples written (split)
    FILTERED = "filtered"                  # samples filtered (the reason)
    FAILED = "failed"                      # dead letters (their unit: file, sample, ...)
    SEGMENTED = "segmented"                # recordings that gave their segments
    FAILED_BY_SEGMENT = "failed_by_segment"   # listing rows failed with their segment
    SEGMENTS_READ = "segments_read"
    SEGMENTS_WRITTEN = "segments_written"  # (split)
    SEGMENTS_FILTERED = "segments_filtered"   # (the reason)
    SEGMENTS_OVERLAPPING = "segments_overlapping"
    CUT_EXAMPLES_READ = "cut_examples_read"
    CUT_EXAMPLES_WRITTEN = "cut_examples_written"   # (split)
    CUT_EXAMPLES_FILTERED = "cut_examples_filtered"  # (the reason)
    CUT_EXAMPLES_FAILED = "cut_examples_failed"
    EXAMPLES_FILTERED = "examples_filtered"          # (the reason: a --keep clause, ...)


class Tally(NamedTuple):
    """What one count counts: its kind and detail ('' when it has none)."""

    kind: Kind
    detail: str = ""


def parse_tallies(pairs: Iterable) -> tuple:
    """((kind, detail), n) pairs read back from JSON as (Tally, n) pairs."""
    return tuple((Tally(Kind(kind), detail), n) for (kind, detail), n in pairs)


class Accounting:
    """Summed tallies ({Tally: n}) as the manifest's accounting (`section`),
    its totals checked (`mismatch`) and its inputs and failures counted."""

    def __init__(self, tallies: Mapping[Tally, int]):
        self._tallies = tallies
        self._totals = collections.Counter()
        for tally, n in tallies.items():
            self._totals[tally.kind] += n

    def total(self, kind: Kind) -> int:
        return self._totals[kind]

    def _failed(self, unit: str) -> int:
        return self._tallies.get(Tally(Kind.FAILED, unit), 0)

    def _by_detail(self, kind: Kind) -> dict:
        return {tally.detail: n for tally, n in sorted(self._tallies.items()) if tally.kind == kind}

    @functools.cached_property
    def section(self) -> dict:
        """The manifest's accounting."""
        total, by_detail = self.total, self._by_detail
        segmented = total(Kind.SEGMENTED)
        accounting = {
            "samples_read": total(Kind.READ),
            "samples_written": total(Kind.WRITTEN) + segmented,
            "samples_filtered": total(Kind.FILTERED),
            "samples_failed": self._failed(SAMPLE) + total(Kind.FAILED_BY_SEGMENT),
            "files_failed": self._failed(FILE),
            "examples_failed": self._failed(EXAMPLE),
            # A recording's segments may go to several splits: its samples per
            # split are its segments.
            "samples_written_per_split": by_detail(Kind.SEGMENTS_WRITTEN if segmented
                                                   else Kind.WRITTEN),
            "examples_per_split": by_detail(Kind.EXAMPLES),
            "samples_filtered_per_reason": by_detail(Kind.FILTERED),
        }
        if total(Kind.EXAMPLES_FILTERED):
            accounting["examples_filtered_per_reason"] = by_detail(Kind.EXAMPLES_FILTERED)
        if total(Kind.CUT_EXAMPLES_READ):
            accounting["cut_examples"] = {
                "read": total(Kind.CUT_EXAMPLES_READ),
                "written": total(Kind.CUT_EXAMPLES_WRITTEN),
                "filtered": total(Kind.CUT_EXAMPLES_FILTERED),
                "failed": total(Kind.CUT_EXAMPLES_FAILED),
                "filtered_per_reason": by_detail(Kind.CUT_EXAMPLES_FILTERED),
            }
        if segmented or total(Kind.FAILED_BY_SEGMENT):
            accounting["segments"] = {
                "recordings": segmented + total(Kind.FAILED_BY_SEGMENT),
                "recordings_failed": total(Kind.FAILED_BY_SEGMENT),
                "read": total(Kind.SEGMENTS_READ),
                "written": total(Kind.SEGMENTS_WRITTEN),
                "filtered": total(Kind.SEGMENTS_FILTERED),
                "failed": self._failed(SEGMENT),
                "overlapping": total(Kind.SEGMENTS_OVERLAPPING),
                "written_per_split": by_detail(Kind.SEGMENTS_WRITTEN),
                "filtered_per_reason": by_detail(Kind.SEGMENTS_FILTERED),
            }
        return accounting

    def mismatch(self) -> str:
        """What does not add up ('' when everything does): samples read =
        written + filtered + failed, and the same of segments and cut examples."""
        a = self.section
        parts = [a[name] for name in ("segments", "cut_examples") if name in a]
        if a["samples_read"] != a["samples_written"] + a["samples_filtered"] + a[
                "samples_failed"] or any(part["read"] != part["written"] + part["filtered"]
                                         + part["failed"] for part in parts):
            return f"accounting mismatch: {a}"
        return ""

    @property
    def failed(self) -> int:
        """Dead letters of every unit."""
        return self.total(Kind.FAILED)


def inputs_and_failed(accounting: Mapping[str, Any]) -> tuple[int, int]:
    """How many inputs a job had and how many became dead letters, of its
    accounting section (Accounting.section): samples (a recording cut into
    segments counts as its segments) and files that yielded none; failed
    ones, and examples a sink refused."""
    a = accounting
    segments = a.get("segments", {"recordings": 0, "recordings_failed": 0, "read": 0,
                                  "failed": 0})
    inputs = a["samples_read"] - segments["recordings"] + segments["read"] + a["files_failed"]
    # A row that failed with its segment is counted once, as the segment.
    failed = (a["samples_failed"] - segments["recordings_failed"] + segments["failed"]
              + a["files_failed"] + a["examples_failed"])
    return inputs, failed


def what_came(accounting: Mapping[str, Any]) -> str:
    """'12 samples read: 0 written, 12 filtered, 0 failed', of an accounting section."""
    a = accounting
    return (f"{a['samples_read']} samples read: {a['samples_written']} written, "
            f"{a['samples_filtered']} filtered, {a['samples_failed']} failed")

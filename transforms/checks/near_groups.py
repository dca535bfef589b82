"""Near groups: the samples that are one recording, found without comparing all pairs.

Each sample's `near` signature (transforms/media/near_duplicates.py) is cut
into band keys (as many rows a band as the threshold asks: `band_rows`).
The samples sharing a band key are a bucket, however many: each member is a
candidate with the bucket's smallest member (star edges, as BigCode's MinHash
deduplication makes them), so a bucket of n gives n - 1 candidates, never
n^2, and a clip copied ten thousand times is as findable as one copied
twice. A candidate is joined with its two signatures by member and proposed
when it is a match (`near_match`: alike to the threshold).

A proposal is only a similarity of landmarks: two calls that open with one
greeting, one sentence in two voices, share many. So each is then checked on
the pair itself (`_Verified`): the two recordings' profiles, joined by member
(only those of members proposed are shuffled), aligned and compared frame by
frame (transforms/media/same_recording.py). The near groups are the connected
components of the confirmed pairs (transforms/checks/components.py), each
with the landmark similarity of its weakest edge: a group's members are one
recording, and `--duplicates drop` may keep one of them. A pair proposed but
not confirmed is a `similar` pair, listed with why, never dropped. Only band
keys, members, signatures (1 KB), the proposed members' profiles and labels
are shuffled, never the landmarks.

Before any of that, the signatures' bins are tallied (`CommonLandmarks`) to
find the landmarks common to much of the corpus (a greeting many calls open
with), which band keys leave out and a match must be alike without
(transforms/media/near_duplicates.py): a tally per
worker, merged into one whose size is bounded by the landmarks there are.
Up to a million signatures are tallied, and beyond that a million of them
(`tallied`): a landmark in 2% of them is in 20,000, so the cut is as sharp,
and the tally shuffles about a gigabyte at most (8 bytes a vote), however
large the corpus. The counter `near_common_landmarks` says how many it found.
"""

from __future__ import annotations

import zlib
from typing import Iterable, Iterator, NamedTuple

import apache_beam as beam

from transforms.checks.components import ConnectedComponents
from transforms.media.near_duplicates import (
    NEAR,
    NOTHING_COMMON,
    LandmarkTally,
    band_rows,
    near_bands,
    near_match,
    profile_of,
)
from transforms.media.same_recording import compare
from transforms.runner.counters import counter

__all__ = ["SIMILAR", "CommonLandmarks", "NearEdge", "NearGroup", "NearGroups", "star_edges",
           "tallied"]

# A pair whose landmarks are alike but which the frame-by-frame check finds
# not to be one recording.
SIMILAR = "similar"

# The signatures tallied for the common landmarks, at most (about).
_TALLIED = 1_000_000


class NearEdge(NamedTuple):
    """Two samples whose audio is alike, as members (tuples, the key first),
    and their estimated similarity."""

    first: tuple
    second: tuple
    similarity: float


class NearGroup(NamedTuple):
    """Samples joined by pairs confirmed as one recording (`kind` NEAR), or a
    pair alike but not confirmed (SIMILAR, `why` says how they differ): the
    members, sorted, and the landmark similarity of the weakest pair."""

    members: tuple
    similarity: float
    kind: str = NEAR
    why: str = ""


def star_edges(members: Iterable) -> Iterator[tuple]:
    """(smallest member, member) for every other member of a band's bucket of a
    different key. `members` is read twice (a grouped value re-iterates),
    never held."""
    smallest = min(members)
    for member in members:
        if member[0] != smallest[0]:
            yield smallest, member


def tallied(member: tuple, signatures: int) -> bool:
    """Whether the member's signature is one of those tallied, of `signatures`:
    all up to _TALLIED, and beyond that a share chosen by the member's hash
    (the same on every run)."""
    return (signatures <= _TALLIED
            or zlib.crc32(repr(member).encode()) < _TALLIED / signatures * 2**32)


class CommonLandmarks(beam.CombineFn):
    """Near digests -> the hashes of the landmarks common to much of the corpus
    (sorted; `LandmarkTally.common`)."""

    def create_accumulator(self) -> LandmarkTally:
        return LandmarkTally()

    def add_input(self, tally: LandmarkTally, digest: str) -> LandmarkTally:
        tally.add(digest)
        return tally

    def merge_accumulators(self, tallies) -> LandmarkTally:
        return LandmarkTally.merged(tallies)

    def compact(self, tally: LandmarkTally) -> LandmarkTally:
        return tally.compact()

    def extract_output(self, tally: LandmarkTally):
        return tally.common()


def _banded(member: tuple, digest: str, rows: int = 0, common=NOTHING_COMMON) -> Iterator:
    """(band key, member) of each of its signature's bands."""
    for band in near_bands(digest, rows, common):
        yield band, member


def _scored(second: tuple, joined: dict, threshold: float = 0.0,
            common=NOTHING_COMMON) -> Iterator[NearEdge]:
    """The NearEdge of each candidate of `second` that is a match at `threshold`
    (`near_match`); `joined` holds its digest and the (first, first's digest)
    of its candidates."""
    for digest in joined["digest"]:
        for first, other in joined["firsts"]:
            similarity = near_match(other, digest, threshold, common)
            if similarity is not None:
                yield NearEdge(first, second, similarity)


def _group(_, joined: dict) -> Iterator[NearGroup]:
    for weakest in joined["weakest"]:
        yield NearGroup(tuple(sorted(joined["members"])), weakest)


def _with_first_profile(_, joined: dict) -> Iterator[tuple]:
    """(second, (edge, first's profile)) of each edge proposed from one member."""
    for profile in joined["profile"]:
        for edge in joined["edge"]:
            yield edge.second, (edge, profile)


def _checked(_, joined: dict) -> Iterator[tuple]:
    """(the edge, the two profiles' Alignment) of each proposed edge to this member."""
    for profile in joined["profile"]:
        for edge, first_profile in joined["firsts"]:
            yield edge, compare(first_profile, profile)


def _count_checked(_, alignment) -> None:
    counter("near_pairs_proposed").inc()
    if alignment.same:
        counter("near_pairs_confirmed").inc()


class _Verified(beam.PTransform):
    """Proposed NearEdges -> (edge, Alignment) of each: the pair's two profiles
    (from `digests`, only the proposed members') aligned and compared."""

    def __init__(self, digests):
        super().__init__()
        self._digests = digests

    def expand(self, edges):
        proposed = beam.pvalue.AsDict(
            edges
            | "EdgeMembers" >> beam.FlatMap(lambda e: ((e.first, None), (e.second, None)))
            | "DistinctMembers" >> beam.Distinct())
        profiles = (self._digests
                    | "OfProposed" >> beam.Filter(lambda kv, members: kv[0] in members, proposed)
                    | "Profiles" >> beam.MapTuple(lambda member, digest: (member,
                                                                          profile_of(digest))))
        firsts = ({"edge": edges | "ByFirst" >> beam.Map(lambda e: (e.first, e)),
                   "profile": profiles}
                  | "JoinFirstProfile" >> beam.CoGroupByKey()
                  | "FirstProfile" >> beam.FlatMapTuple(_with_first_profile))
        return ({"firsts": firsts, "profile": profiles}
                | "JoinSecondProfile" >> beam.CoGroupByKey()
                | "Compare" >> beam.FlatMapTuple(_checked))


class NearGroups(beam.PTransform):
    """(member, near digest) of each sample -> a NearGroup of each set of
    samples joined by pairs that match at `threshold` (`near_match`: alike to
    it, and not by common sounds alone) and are confirmed as one recording,
    and a SIMILAR NearGroup of each pair that matches but is not (module
    docstring). The counters `near_pairs_proposed` and `near_pairs_confirmed`
    say how many."""

    def __init__(self, threshold: float):
        super().__init__()
        self._threshold = threshold

    def expand(self, full_digests):
        threshold, rows = self._threshold, band_rows(self._threshold)
        # The landmarks' signatures alone until a pair is proposed.
        digests = full_digests | "Signatures" >> beam.MapTuple(
            lambda member, digest: (member, digest.partition(".")[0]))
        signatures = beam.pvalue.AsSingleton(
            digests | "CountSignatures" >> beam.combiners.Count.Globally())
        common_landmarks = (
            digests
            | "Tallied" >> beam.Filter(lambda kv, count: tallied(kv[0], count), signatures)
            | "Digests" >> beam.Values()
            | "CommonLandmarks" >> beam.CombineGlobally(CommonLandmarks()))
        _ = common_landmarks | "CountCommon" >> beam.Map(
            lambda common: counter("near_common_landmarks").inc(len(common)))
        common = beam.pvalue.AsSingleton(common_landmarks)
        candidates = (
            digests
            | "Bands" >> beam.FlatMapTuple(_banded, rows=rows, common=common)
            | "ByBand" >> beam.GroupByKey()
            | "Stars" >> beam.FlatMapTuple(lambda _, members: star_edges(members))
            | "DistinctPairs" >> beam.Distinct())
        firsts = (
            {"pairs": candidates, "digest": digests}
            | "JoinFirst" >> beam.CoGroupByKey()
            | "FirstDigest" >> beam.FlatMapTuple(lambda first, joined: (
                (second, (first, digest))
                for digest in joined["digest"] for second in joined["pairs"])))
        proposed = ({"firsts": firsts, "digest": digests}
                    | "JoinSecond" >> beam.CoGroupByKey()
                    | "Score" >> beam.FlatMapTuple(_scored, threshold=threshold, common=common))
        checked = proposed | "Verify" >> _Verified(full_digests)
        _ = checked | "CountChecked" >> beam.MapTuple(_count_checked)
        edges = checked | "Confirmed" >> beam.FlatMapTuple(
            lambda edge, alignment: [edge] if alignment.same else [])
        similar = checked | "NotConfirmed" >> beam.FlatMapTuple(
            lambda edge, alignment: [] if alignment.same else [NearGroup(
                tuple(sorted((edge.first, edge.second))), edge.similarity, SIMILAR,
                alignment.describe())])
        components = (edges
                      | "Ends" >> beam.Map(lambda edge: (edge.first, edge.second))
                      | "Components" >> ConnectedComponents())
        weakest = (
            {"label": components,
             "similarity": edges | "ByFirst" >> beam.Map(lambda e: (e.first, e.similarity))}
            | "EdgeComponent" >> beam.CoGroupByKey()
            | "ComponentSimilarity" >> beam.FlatMapTuple(lambda _, joined: (
                (label, similarity)
                for label in joined["label"] for similarity in joined["similarity"]))
            | "Weakest" >> beam.CombinePerKey(min))
        groups = ({"members": components | "ByComponent" >> beam.Map(lambda nl: (nl[1], nl[0])),
                   "weakest": weakest}
                  | "Component" >> beam.CoGroupByKey()
                  | "Group" >> beam.FlatMapTuple(_group))
        return (groups, similar) | "GroupsAndSimilar" >> beam.Flatten()

"""Near pairs: the samples whose audio is alike, found without comparing all pairs.

Each sample's `near` signature (transforms/recipe/near_duplicates.py) is cut
into band keys; the samples that share one are the candidate pairs, and each
candidate is joined with its two signatures by member and kept when their
estimated similarity reaches the threshold. Only band keys, members and
signatures (1 KB) are shuffled, never the landmarks.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

import apache_beam as beam

from transforms.recipe.near_duplicates import near_bands, near_similarity

__all__ = ["NearPair", "NearPairs"]


class NearPair(NamedTuple):
    """Two samples whose audio is alike, as members (tuples, the key first),
    and their estimated similarity."""

    first: tuple
    second: tuple
    similarity: float

# A band key more samples share than this is a common sound, not a copy: its
# pairs are not candidates (a copy shares other bands with its original).
_BAND_CAP = 256


def _candidates(members: Sequence[tuple]) -> Iterator[tuple]:
    """(member, member) of each pair of samples of different keys that share a
    band key; none from a band more than _BAND_CAP share."""
    distinct = sorted(set(members))
    if len(distinct) > _BAND_CAP:
        beam.metrics.Metrics.counter("datagen", "near_bands_skipped").inc()
        return
    for i, first in enumerate(distinct):
        for second in distinct[i + 1:]:
            if first[0] != second[0]:
                yield first, second


def _scored(second: tuple, joined: dict, threshold: float) -> Iterator[NearPair]:
    """The NearPair of each candidate pair of `second` alike to `threshold` or
    more; `joined` holds its digest and the (first, first's digest) of its
    pairs."""
    for digest in joined["digest"]:
        for first, other in joined["firsts"]:
            similarity = near_similarity(other, digest)
            if similarity >= threshold:
                yield NearPair(first, second, similarity)


class NearPairs(beam.PTransform):
    """(member, near digest) of each sample -> the NearPair of each pair alike
    to `threshold` or more. The pairs that
    share a band key are the candidates; each is joined with its two digests
    by member, so no digest is shuffled more than twice per pair."""

    def __init__(self, threshold: float):
        super().__init__()
        self._threshold = threshold

    def expand(self, digests):
        threshold = self._threshold
        candidates = (
            digests
            | "Bands" >> beam.FlatMapTuple(lambda member, digest: (
                (band, member) for band in near_bands(digest)))
            | "ByBand" >> beam.GroupByKey()
            | "Candidates" >> beam.FlatMap(lambda band_members: _candidates(band_members[1]))
            | "DistinctPairs" >> beam.Distinct())
        firsts = (
            {"pairs": candidates, "digest": digests}
            | "JoinFirst" >> beam.CoGroupByKey()
            | "FirstDigest" >> beam.FlatMapTuple(lambda first, joined: (
                (second, (first, digest))
                for digest in joined["digest"] for second in joined["pairs"])))
        return ({"firsts": firsts, "digest": digests}
                | "JoinSecond" >> beam.CoGroupByKey()
                | "Score" >> beam.FlatMapTuple(
                    lambda second, joined: _scored(second, joined, threshold)))

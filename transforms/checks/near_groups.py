"""Near groups: the samples whose audio is alike, found without comparing all pairs.

Each sample's `near` signature (transforms/recipe/near_duplicates.py) is cut
into band keys (as many rows a band as the threshold asks: `band_rows`).
The samples sharing a band key are a bucket, however many: each member is a
candidate with the bucket's smallest member (star edges, as BigCode's MinHash
deduplication makes them), so a bucket of n gives n - 1 candidates, never
n^2, and a clip copied ten thousand times is as findable as one copied
twice. A candidate is joined with its two signatures by member and kept
when their estimated similarity reaches the threshold; the near groups are
the connected components of the kept edges (transforms/checks/components.py),
each with the similarity of its weakest edge. Only band keys, members,
signatures (1 KB) and labels are shuffled, never the landmarks.
"""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

import apache_beam as beam

from transforms.checks.components import ConnectedComponents
from transforms.recipe.near_duplicates import band_rows, near_bands, near_similarity

__all__ = ["NearEdge", "NearGroup", "NearGroups", "star_edges"]


class NearEdge(NamedTuple):
    """Two samples whose audio is alike, as members (tuples, the key first),
    and their estimated similarity."""

    first: tuple
    second: tuple
    similarity: float


class NearGroup(NamedTuple):
    """Samples joined by edges alike to the threshold or more: the members,
    sorted, and the similarity of the group's weakest edge."""

    members: tuple
    similarity: float


def star_edges(members: Iterable) -> Iterator[tuple]:
    """(smallest member, member) for every other member of a band's bucket of a
    different key. `members` is read twice (a grouped value re-iterates),
    never held."""
    smallest = min(members)
    for member in members:
        if member[0] != smallest[0]:
            yield smallest, member


def _scored(second: tuple, joined: dict, threshold: float) -> Iterator[NearEdge]:
    """The NearEdge of each candidate of `second` alike to `threshold` or more;
    `joined` holds its digest and the (first, first's digest) of its candidates."""
    for digest in joined["digest"]:
        for first, other in joined["firsts"]:
            similarity = near_similarity(other, digest)
            if similarity >= threshold:
                yield NearEdge(first, second, similarity)


def _group(_, joined: dict) -> Iterator[NearGroup]:
    for weakest in joined["weakest"]:
        yield NearGroup(tuple(sorted(joined["members"])), weakest)


class NearGroups(beam.PTransform):
    """(member, near digest) of each sample -> a NearGroup of each set of samples
    joined by pairs alike to `threshold` or more (module docstring)."""

    def __init__(self, threshold: float):
        super().__init__()
        self._threshold = threshold

    def expand(self, digests):
        threshold, rows = self._threshold, band_rows(self._threshold)
        candidates = (
            digests
            | "Bands" >> beam.FlatMapTuple(lambda member, digest: (
                (band, member) for band in near_bands(digest, rows)))
            | "ByBand" >> beam.GroupByKey()
            | "Stars" >> beam.FlatMapTuple(lambda _, members: star_edges(members))
            | "DistinctPairs" >> beam.Distinct())
        firsts = (
            {"pairs": candidates, "digest": digests}
            | "JoinFirst" >> beam.CoGroupByKey()
            | "FirstDigest" >> beam.FlatMapTuple(lambda first, joined: (
                (second, (first, digest))
                for digest in joined["digest"] for second in joined["pairs"])))
        edges = ({"firsts": firsts, "digest": digests}
                 | "JoinSecond" >> beam.CoGroupByKey()
                 | "Score" >> beam.FlatMapTuple(
                     lambda second, joined: _scored(second, joined, threshold)))
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
        return ({"members": components | "ByComponent" >> beam.Map(lambda nl: (nl[1], nl[0])),
                 "weakest": weakest}
                | "Component" >> beam.CoGroupByKey()
                | "Group" >> beam.FlatMapTuple(_group))

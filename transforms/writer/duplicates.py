"""The duplicate check: the same content under two keys, found on every run.

A group key keeps one speaker's samples in one split; it cannot see a clip
uploaded twice, a recording copied into two tar files, or a FLAC and a WAV of
one take. Each written sample's content fingerprints
(transforms/recipe/fingerprints.py) travel in its unit's receipt; here they
are grouped by fingerprint, distributed as the leakage check is (only
(fingerprint, split, key, url) records are shuffled, and only groups of two
or more keys go on), and the final step reports them by --duplicates:

- `warn` (the default): publishes, lists every group in duplicates.jsonl
  and warns of those across splits;
- `fail`: a group across splits fails the job before anything is published
  (the list is left beside the run's dead letters);
- `off`: no fingerprint is taken.

Copies within one split are counted and listed, never a failure.
"""

from __future__ import annotations

import json
from typing import Iterable, NamedTuple, Sequence

import apache_beam as beam

__all__ = ["POLICIES", "DuplicateGroup", "FindDuplicates", "duplicates_lines",
           "duplicates_message", "duplicates_summary"]

POLICIES = ("off", "warn", "fail")


class DuplicateGroup(NamedTuple):
    """Samples of one content: the fingerprint kinds that matched, and each
    member's (key, split, url), sorted."""

    kinds: tuple
    members: tuple

    @property
    def splits(self) -> tuple:
        return tuple(sorted({split for _, split, _ in self.members}))


def _merged(fingerprint_groups: Iterable[tuple]) -> list[DuplicateGroup]:
    """(kind, [(key, split, url), ...]) per fingerprint -> one group per set of
    samples, its kinds merged (a copied file matches by bytes and by content)."""
    by_members: dict = {}
    for kind, members in fingerprint_groups:
        by_members.setdefault(tuple(sorted(set(members))), set()).add(kind)
    return sorted(DuplicateGroup(tuple(sorted(kinds)), members)
                  for members, kinds in by_members.items())


class FindDuplicates(beam.PTransform):
    """Unit receipts -> (kind, [(key, split, url), ...]) of every fingerprint
    two or more samples share."""

    def expand(self, receipts):
        return (
            receipts
            | "Fingerprints" >> beam.FlatMap(
                lambda r: (((kind, digest), (key, split, url))
                           for kind, digest, split, key, url in r.fingerprints))
            | "ByFingerprint" >> beam.GroupByKey()
            # ((kind, digest), [(key, split, url), ...])
            | "Shared" >> beam.Filter(lambda kv: len({key for key, _, _ in kv[1]}) > 1)
            | "Kind" >> beam.MapTuple(lambda fingerprint, members: (fingerprint[0],
                                                                    sorted(members))))


def _pair(splits: Sequence[str], order: Sequence[str]) -> str:
    rank = {name: i for i, name in enumerate(order)}
    first, second = sorted(splits, key=lambda s: (rank.get(s, len(rank)), s))[:2]
    return f"{first}/{second}"


def duplicates_summary(fingerprint_groups: Iterable[tuple], split_order: Sequence[str],
                       kinds: Sequence[str]) -> tuple[dict, list[DuplicateGroup]]:
    """({"kinds", "groups", "across_splits": {"train/test": n}, "within_split":
    {"train": n}}, the merged groups) from FindDuplicates' output."""
    groups = _merged(fingerprint_groups)
    across: dict = {}
    within: dict = {}
    for group in groups:
        splits = group.splits
        if len(splits) > 1:
            for i, a in enumerate(splits):
                for b in splits[i + 1:]:
                    pair = _pair((a, b), split_order)
                    across[pair] = across.get(pair, 0) + 1
        else:
            within[splits[0]] = within.get(splits[0], 0) + 1
    return ({"kinds": list(kinds), "groups": len(groups),
             "across_splits": dict(sorted(across.items())),
             "within_split": dict(sorted(within.items()))}, groups)


def duplicates_lines(groups: Iterable[DuplicateGroup]) -> str:
    """duplicates.jsonl: a line per group of identical content."""
    return "".join(json.dumps({
        "kinds": list(group.kinds), "splits": list(group.splits),
        "members": [{"key": key, "split": split, "url": url}
                    for key, split, url in group.members]}, sort_keys=True) + "\n"
        for group in groups)


def duplicates_message(summary: dict, groups: Sequence[DuplicateGroup], where: str) -> str:
    """'3 recordings appear in more than one split (train/test 2, ...): first: a
    (train) = b (test); list in <where>'."""
    across = [group for group in groups if len(group.splits) > 1]
    pairs = ", ".join(f"{pair} {n}" for pair, n in summary["across_splits"].items())
    first = " = ".join(f"{key} ({split})" for key, split, _ in across[0].members[:3])
    many = f"{len(across)} recordings appear" if len(across) > 1 else "1 recording appears"
    return f"{many} in more than one split ({pairs}): first: {first}; list in {where}"

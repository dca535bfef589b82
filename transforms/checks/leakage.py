"""The leakage check: no group key in two splits, proven on every run.

By ratio or stratified, a group's split is a function of the group, so a leak
would be a bug; with an explicit split field (--split_column) it is the data's
own doing - one speaker's rows marked train and test - and equally fatal for
an honest evaluation. WriteDataset's final step fails the job, before anything
is published, when `SplitGroups` finds any; the groups it counts per split
tell that step why a split came out empty or lopsided.

The check is distributed: only the (group, split) pairs that differ are
shuffled, and only leaking groups (normally none) reach the final step.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import apache_beam as beam

from transforms.checks.check import DatasetCheck, Judging, Policy, Verdict
from transforms.recipe.observers import SPLIT_GROUPS

__all__ = ["SplitGroups", "SplitLeakage", "leakage_message"]

_SHOWN = 5


def leakage_message(leaks: Iterable[tuple]) -> str:
    """(group, [splits]) pairs -> one line naming the first few (its {parameters}
    said in the caller's terms: DatasetConfig.said)."""
    leaks = sorted(leaks)
    shown = "; ".join(f"{group!r} in {', '.join(splits)}" for group, splits in leaks[:_SHOWN])
    more = f" and {len(leaks) - _SHOWN} more" if len(leaks) > _SHOWN else ""
    return (f"split leakage: {len(leaks)} group key(s) in more than one split: "
            f"{shown}{more} (groups by {{split_by}}; with {{split_column}} the split field "
            f"must agree for every sample of a group)")


class SplitGroups(beam.PTransform):
    """(group key, split) pairs, one per sample -> {"leaks": (group key, sorted
    splits) of each group found in more than one split, "counts": (split, the
    number of groups in it)}."""

    def expand(self, pairs):
        splits_per_group = (
            pairs
            | "DistinctGroupSplits" >> beam.Distinct()
            | "SplitsPerGroup" >> beam.GroupByKey()
            # (group, [split, ...]), each split once
            | "Sorted" >> beam.MapTuple(lambda group, splits: (group, sorted(splits))))
        return {
            "leaks": splits_per_group | "InSeveral" >> beam.Filter(lambda kv: len(kv[1]) > 1),
            "counts": (splits_per_group
                       | "EachSplit" >> beam.FlatMap(lambda kv: kv[1])
                       | "GroupsPerSplit" >> beam.combiners.Count.PerElement()),
        }


_LEAK, _GROUPS = "leak", "groups"


class _TaggedSplitGroups(beam.PTransform):
    """(group key, split) pairs -> ("leak", group, splits) and ("groups",
    split, n) records, the two of SplitGroups."""

    def expand(self, pairs):
        found = pairs | "SplitGroups" >> SplitGroups()
        return ((found["leaks"] | "Leaks" >> beam.MapTuple(lambda g, s: (_LEAK, g, s)),
                 found["counts"] | "Counts" >> beam.MapTuple(lambda s, n: (_GROUPS, s, n)))
                | "Found" >> beam.Flatten())


class SplitLeakage(DatasetCheck):
    """A group key in one split only; the number of groups in each split is
    the manifest's (`group_counts`)."""

    name = "leakage"
    observer = SPLIT_GROUPS   # distinct (group key, split) pairs

    def join(self, policy: Policy) -> beam.PTransform:  # noqa: ARG002
        return _TaggedSplitGroups()

    def judge(self, found: list, judging: Judging) -> Verdict:
        leaks = [(group, splits) for kind, group, splits in found if kind == _LEAK]
        counts = {split: n for kind, split, n in found if kind == _GROUPS}
        # A leak is the data's or a bug: every rerun would find it again.
        return Verdict(judging.said(leakage_message(leaks)) if leaks else "", final=bool(leaks),
                       facts={"group_counts": counts})

    def published(self, document: Mapping[str, Any], policy: Policy) -> Mapping | None:  # noqa: ARG002
        counts = {name: split.get("num_groups") for name, split in document["splits"].items()}
        if None in counts.values():   # a manifest from before it counted them
            return None
        return {"group_counts": {name: n for name, n in counts.items() if n}}

"""Copies by --duplicates, as one of the dataset's checks (transforms/checks/check.py).

Its observer keeps each written sample's content fingerprints; the join
groups them (transforms/checks/duplicates.py: identical content, near copies
confirmed frame by frame, similar pairs), and only the groups' summed
tallies and the first group across splits reach the judge, which says what
--duplicates makes of them: with `fail`, copies across splits refuse the
dataset; with `drop`, the groups were found before anything was written and
the judge refuses any group two of whose members were written anyway (on a
published ledger, which holds only written samples: any group). Its facts
are the manifest's `duplicates` section, which verify compares with the
ledger's (but with `drop`: the manifest counts the copies dropped too).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import apache_beam as beam

from transforms.checks.check import DatasetCheck, Judging, Policy, Verdict
from transforms.checks.duplicates import (
    SIMILAR,
    GroupsOfCopies,
    dropped_message,
    duplicates_message,
    duplicates_summary,
    group_tallies,
    similar_message,
)
from transforms.format.manifest import DUPLICATES_FILE, lists_duplicates
from transforms.recipe.observers import CONTENT_FINGERPRINTS, observed

__all__ = ["Duplicates"]


class _Summed(beam.PTransform):
    """DuplicateGroups -> one (summed group_tallies, [the first group across
    splits]): all the judge needs of them."""

    def __init__(self, split_order):
        super().__init__()
        self._split_order = split_order

    def expand(self, groups):
        tallies = (groups
                   | "GroupTallies" >> beam.FlatMap(group_tallies, self._split_order)
                   | "SumGroupTallies" >> beam.CombinePerKey(sum))
        firsts = (groups
                  | "AcrossSplits" >> beam.Filter(
                      lambda group: len(group.splits) > 1 and group.kinds != (SIMILAR,))
                  | "FirstAcross" >> beam.combiners.Top.Smallest(1))
        return (groups.pipeline
                | "Once" >> beam.Create([None])
                | "Together" >> beam.Map(lambda _, t, f: (t, f),
                                         beam.pvalue.AsDict(tallies),
                                         beam.pvalue.AsSingleton(firsts)))


class Duplicates(DatasetCheck):
    """The same content under two keys, by --duplicates (module docstring)."""

    name = "duplicates"
    observer = CONTENT_FINGERPRINTS

    def applies(self, policy: Policy) -> bool:
        return policy.duplicates != "off"

    def records(self, receipt) -> Iterable:
        return (((kind, digest), (key, split, url))
                for kind, digest, split, key, url in observed(receipt, self.observer.name))

    def join(self, policy: Policy) -> beam.PTransform:
        return GroupsOfCopies(policy.near_duplicates)

    def summarise(self, policy: Policy) -> beam.PTransform:
        return _Summed(policy.split_plan.names)

    def judge(self, found: list, judging: Judging) -> Verdict:
        policy, said = judging.policy, judging.said
        tallies, firsts = found[0] if found else ({}, [])
        summary = duplicates_summary(tallies, policy.fingerprint_kinds,
                                     policy.fingerprinted_features)
        facts = {"duplicates": summary}
        if not lists_duplicates(summary):
            return Verdict(facts=facts)
        similar = similar_message(summary, DUPLICATES_FILE)
        notes = (similar,) if similar else ()
        if policy.duplicates == "drop":
            written = tallies.get(("written_twice",), 0)
            refusal = (f"{written} group(s) of copies have two or more samples written, though "
                       f"{{duplicates}} drop keeps one of each" if written else "")
            copied = dropped_message(summary, DUPLICATES_FILE) if summary["groups"] else ""
            # Every rerun would write them again: a bug, not the data's.
            return Verdict(said(refusal), final=bool(written), facts=facts,
                           warnings=((said(copied),) if copied else ()) + notes)
        if not summary["across_splits"]:
            return Verdict(facts=facts, warnings=notes)
        where = DUPLICATES_FILE if policy.duplicates == "warn" else judging.duplicates_in
        copied = duplicates_message(summary, tallies, firsts[0], where)
        refusal = ""
        if policy.duplicates == "fail":
            advice = (f"; {judging.rerun} {{duplicates}} warn publishes this run's work"
                      if judging.rerun else "")
            refusal = said(f"{copied}{advice}")
        return Verdict(refusal, facts=facts, warnings=(copied,) + notes)

    def published(self, document: Mapping[str, Any], policy: Policy) -> Mapping | None:
        section = document.get("duplicates")
        if section is None or policy.duplicates == "drop":
            return None   # with drop, it counts the copies dropped: the ledger holds none
        return {"duplicates": {name: value for name, value in section.items() if name != "file"}}

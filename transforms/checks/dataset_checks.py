"""The seam for what is checked over the whole dataset, not where a piece of it sits.

A `DatasetCheck` has an observer (transforms/recipe/observers.py) that every
unit's driver tells what became of each sample; it reads what the observer
kept in each unit's receipt (the writer's UnitReceipt, or a line of a
published ledger that verify reads) as small records (`records`), joins
them over the dataset in one Beam step (`join`), and
judges what it found (`judge`): a `Verdict` that may refuse the dataset,
warn, and give the manifest facts. WriteDataset's final step runs every
check of `DATASET_CHECKS` before anything is published
(transforms/writer/finalise.py); verify runs the same checks on the ledger
(transforms/verify/ledger_checks.py). A new dataset-wide rule is a module
here and a line in `DATASET_CHECKS`.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Iterable, Mapping, NamedTuple

import apache_beam as beam

from transforms.checks.keys import KeysWrittenTwice, written_twice_message
from transforms.checks.leakage import SplitGroups, leakage_message
from transforms.recipe.observers import KEYS, SPLIT_GROUPS, KeyedObserver, observed

__all__ = ["DATASET_CHECKS", "DatasetCheck", "FindAll", "KeysOnce", "SplitLeakage", "Verdict",
           "judge"]


class Verdict(NamedTuple):
    """What a check made of what it found: `refusal`, the one line that stops
    the dataset being published ("" when it may be); `final` when no rerun
    can lift it (the run's work is then discarded); `facts` the manifest
    takes ({name: value})."""

    refusal: str = ""
    final: bool = False
    facts: Mapping[str, Any] = types.MappingProxyType({})


class DatasetCheck:
    """A rule over the whole dataset (module docstring). `name` names its
    steps and what it found; `observer` is what it learns of each sample."""

    name: str
    observer: KeyedObserver

    def records(self, receipt) -> Iterable:
        """The small records one unit's receipt gives the check: by default
        what its observer kept."""
        return observed(receipt, self.observer.name)

    def join(self) -> beam.PTransform:
        """The step joining every unit's records into what the check found."""
        raise NotImplementedError

    def judge(self, found: list, said: Callable[[str], str]) -> Verdict:
        """The Verdict of what the check `found`; `said` puts a {parameter} in
        the caller's terms (DatasetConfig.said)."""
        raise NotImplementedError


class SplitLeakage(DatasetCheck):
    """A group key in one split only (transforms/checks/leakage.py); the
    number of groups in each split is the manifest's (`group_counts`)."""

    name = "leakage"
    observer = SPLIT_GROUPS   # distinct (group key, split) pairs

    def join(self) -> beam.PTransform:
        return _TaggedSplitGroups()

    def judge(self, found: list, said: Callable[[str], str]) -> Verdict:
        leaks = [(group, splits) for kind, group, splits in found if kind == _LEAK]
        counts = {split: n for kind, split, n in found if kind == _GROUPS}
        return Verdict(said(leakage_message(leaks)) if leaks else "", final=bool(leaks),
                       facts={"group_counts": counts})


_LEAK, _GROUPS = "leak", "groups"


class _TaggedSplitGroups(beam.PTransform):
    """(group key, split) pairs -> ("leak", group, splits) and ("groups",
    split, n) records, the two of SplitGroups."""

    def expand(self, pairs):
        found = pairs | "SplitGroups" >> SplitGroups()
        return ((found["leaks"] | "Leaks" >> beam.MapTuple(lambda g, s: (_LEAK, g, s)),
                 found["counts"] | "Counts" >> beam.MapTuple(lambda s, n: (_GROUPS, s, n)))
                | "Found" >> beam.Flatten())


class KeysOnce(DatasetCheck):
    """A key once in the dataset (transforms/checks/keys.py): the keys each
    unit's samples gave, counted over every unit."""

    name = "keys"
    observer = KEYS

    def records(self, receipt) -> Iterable:
        return ((key, receipt.unit) for key in observed(receipt, KEYS.name))

    def join(self) -> beam.PTransform:
        return KeysWrittenTwice()

    def judge(self, found: list, said: Callable[[str], str]) -> Verdict:  # noqa: ARG002
        # A repeat is the data's: every rerun would find it again.
        return Verdict(written_twice_message(found) if found else "", final=bool(found))


# In the order their refusals are said.
DATASET_CHECKS: tuple = (SplitLeakage(), KeysOnce())
_BY_NAME = {check.name: check for check in DATASET_CHECKS}


class FindAll(beam.PTransform):
    """Receipts -> (name, what it found) of each of the DATASET_CHECKS, each
    joined over them all: only its small records are shuffled."""

    def expand(self, receipts):
        return ([receipts
                 | f"{check.name.title()}Records" >> beam.FlatMap(check.records)
                 | f"{check.name.title()}Check" >> check.join()
                 | f"{check.name.title()}Found" >> beam.combiners.ToList()
                 | f"{check.name.title()}Named" >> beam.Map(lambda found, name: (name, found),
                                                             check.name)
                 for check in DATASET_CHECKS]
                | "AllFound" >> beam.Flatten())


def judge(found: Mapping[str, list], said: Callable[[str], str]) -> list[Verdict]:
    """The Verdict of each of the DATASET_CHECKS, in order, on what `FindAll`
    found (by name)."""
    return [check.judge(found.get(check.name, []), said) for check in DATASET_CHECKS]

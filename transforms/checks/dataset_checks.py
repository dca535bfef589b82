"""The dataset's checks, each judged over the whole dataset, not where a piece of it sits.

`DATASET_CHECKS` lists every rule (transforms/checks/check.py says what a
check is): the share of failed inputs, a group key in one split, a key
once, some example written, no split left empty, and copies by
--duplicates. WriteDataset's final step runs `FindAll` over the units'
receipts and `judge` before anything is published
(transforms/writer/finalise.py); verify runs the same on the published
ledger and manifest (transforms/verify/ledger_checks.py). A new
dataset-wide rule is a module here and a line in `DATASET_CHECKS`.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import apache_beam as beam

from transforms.checks.check import DatasetCheck, Judging, Policy, Verdict
from transforms.checks.duplicates_check import Duplicates
from transforms.checks.keys import KeysOnce
from transforms.checks.leakage import SplitLeakage
from transforms.checks.totals import FailureFraction, SomeExamples, SplitBalance

__all__ = ["DATASET_CHECKS", "FOUND", "FindAll", "judge", "observing", "over_totals"]

# In the order they are judged: a refusal is the first one's, a check sees the
# facts of those before it (the balance of the splits, their groups).
DATASET_CHECKS: tuple = (FailureFraction(), SplitLeakage(), KeysOnce(), SomeExamples(),
                         SplitBalance(), Duplicates())

# What FindAll gives judge: (name, a record the check found, summarised) of
# each, read as a multimap (beam.pvalue.AsMultiMap): no step gathers them.
FOUND = "found"


class FindAll(beam.PTransform):
    """Receipts -> {FOUND: (name, a summarised finding) of each of the
    DATASET_CHECKS with an observer that `policy` asks for, and, by each
    one's name, what its join found}. Only the checks' small records are
    shuffled. `given` holds what a check found by a pass of its own before
    the receipts were written (--duplicates drop decides before writing)."""

    def __init__(self, policy: Policy, given: Mapping[str, beam.PCollection] | None = None):
        super().__init__()
        self._policy = policy
        self._given = dict(given or {})

    def expand(self, receipts):
        policy, joined, summaries = self._policy, {}, []
        for check in DATASET_CHECKS:
            if check.observer is None or not check.applies(policy):
                continue
            step = check.name.title()
            found = self._given.get(check.name)
            if found is None:
                found = (receipts
                         | f"{step}Records" >> beam.FlatMap(check.records)
                         | f"{step}Check" >> check.join(policy))
            joined[check.name] = found
            summarise = check.summarise(policy)
            if summarise is not None:
                found = found | f"{step}Summary" >> summarise
            summaries.append(found | f"{step}Named" >> beam.Map(
                lambda found, name: (name, found), check.name))
        return {FOUND: summaries | "AllFound" >> beam.Flatten(), **joined}


def judge(found: Mapping[str, Iterable], judging: Judging,
          checks: tuple | None = None) -> list[Verdict]:
    """The Verdict of each of `checks` (all), in order, on what `FindAll` found
    (a multimap: each observing check's records by its name; a check over the
    totals finds none), each judging with the facts of those before (an empty Verdict of
    one the policy does not ask for)."""
    verdicts, facts = [], dict(judging.facts or {})
    for check in DATASET_CHECKS if checks is None else checks:
        verdict = Verdict()
        if check.applies(judging.policy):
            records = [] if check.observer is None else list(found[check.name])
            verdict = check.judge(records, judging._replace(facts=facts))
            facts.update(verdict.facts)
        verdicts.append(verdict)
    return verdicts


def observing() -> tuple[DatasetCheck, ...]:
    """The DATASET_CHECKS that observe the samples."""
    return tuple(check for check in DATASET_CHECKS if check.observer is not None)


def over_totals() -> tuple[DatasetCheck, ...]:
    """The DATASET_CHECKS that judge the totals alone."""
    return tuple(check for check in DATASET_CHECKS if check.observer is None)

"""The dataset's checks, run on what was published as the writer runs them.

The published ledger (units.jsonl, transforms/writer/ledger.py) holds what
each unit's receipt held: what its observers learned of its samples (their
(group key, split) pairs, their keys, their content fingerprints).
`LedgerChecks` runs every one of the writer's checks that observe the
samples (transforms/checks/dataset_checks.py: a group in one split, a key
once, copies by --duplicates) over the whole ledger with the checks' own
steps, judged by the policy the manifest records, and compares the facts
each finds with those the manifest holds (its groups per split, its
duplicates section); `totals_problems` judges the manifest's accounting by
the checks over the totals (the share of failed inputs, an example written,
no empty split). So a dataset the writer would have refused is refused
whatever wrote it. A ledger an earlier version wrote has each record in a
field of its own, and perhaps no keys: its samples' content fingerprints
name their keys (with --duplicates warn, the default), and are counted
instead; its fingerprints are not grouped again (they were taken otherwise).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, NamedTuple

import apache_beam as beam

from transforms.checks.check import Judging, Policy
from transforms.checks.dataset_checks import FOUND, FindAll, judge, observing, over_totals
from transforms.format.arguments import said
from transforms.format.manifest import MANIFEST, DatasetInfo
from transforms.recipe.observers import KEYS, SPLIT_GROUPS

__all__ = ["LedgerChecks", "LedgerReceipt", "judging_of", "ledger_receipt", "totals_problems"]


class LedgerReceipt(NamedTuple):
    """What the checks read of a ledger line's receipt."""

    unit: int
    observed: tuple   # (name, records) of each observer (UnitReceipt.observed)


def ledger_receipt(line: str) -> LedgerReceipt:
    """One ledger line's LedgerReceipt (records as tuples, as the writer's)."""
    receipt = json.loads(line)
    if "observed" in receipt:
        found = dict(receipt["observed"])
    else:   # an earlier version's fields
        found = {name: receipt.get(name, ()) for name in (SPLIT_GROUPS.name, KEYS.name)}
        if KEYS.name not in receipt:
            # (kind, digest, split, key, url) of each written sample's fingerprints
            found[KEYS.name] = sorted({f[3] for f in receipt.get("fingerprints", ())})
    return LedgerReceipt(receipt["unit"], tuple(
        (name, tuple(tuple(r) if isinstance(r, list) else r for r in records))
        for name, records in found.items()))


def judging_of(info: DatasetInfo, current_ledger: bool = True) -> Judging:
    """What the checks judge a published dataset by: the policy its manifest
    records (a manifest from before it did: none that refuses), its
    accounting and its groups per split; copies are judged only on a ledger
    of this version (`current_ledger`)."""
    recipe, duplicates = info.recipe, info.document.get("duplicates") or {}
    writing = recipe.get("writing", {})
    if "max_failure_fraction" in writing and "splits" in recipe.get("splits", {}):
        policy = Policy.of_recipe(recipe, duplicates)
    else:
        policy = Policy(None, 1.0, True, "off")
    if not current_ledger:
        policy = policy._replace(duplicates="off")
    groups = {name: split["num_groups"] for name, split in info.splits.items()
              if split.get("num_groups")}
    return Judging(policy, info.accounting, said, facts={"group_counts": groups})


def totals_problems(info: DatasetInfo) -> list:
    """A problem line for each of the checks over the totals that refuses the
    manifest's accounting."""
    return [f"{MANIFEST}: {verdict.refusal}"
            for verdict in judge({}, judging_of(info), over_totals()) if verdict.refusal]


class LedgerChecks(beam.PTransform):
    """The pipeline's root -> a problem line (naming the ledger as `name`, or
    the manifest) for each of the dataset's checks that refuses the ledger
    at `path`, or finds other facts than the manifest's `document` holds."""

    def __init__(self, path: str, name: str, document: Mapping[str, Any], judging: Judging):
        super().__init__()
        self._path = path
        self._name = name
        self._document = document
        self._judging = judging

    def expand(self, pbegin):
        checks = (pbegin
                  | "ReadLedger" >> beam.io.ReadFromText(self._path)
                  | "Receipts" >> beam.Map(ledger_receipt)
                  | "DatasetChecks" >> FindAll(self._judging.policy))
        return (pbegin
                | "Once" >> beam.Create([None])
                | "Problems" >> beam.FlatMap(
                    lambda _, found, *args: _problems(found, *args),
                    beam.pvalue.AsMultiMap(checks[FOUND]), self._name, self._document,
                    self._judging))


def _problems(found: Mapping[str, Iterable], name: str, document: Mapping[str, Any],
              judging: Judging) -> list:
    checks = observing()
    problems = []
    for check, verdict in zip(checks, judge(found, judging, checks)):
        if verdict.refusal:
            problems.append(f"{name}: {verdict.refusal}")
        if not check.applies(judging.policy):
            continue
        published = check.published(document, judging.policy)
        for fact, value in (published or {}).items():
            if verdict.facts.get(fact) != value:
                problems.append(f"{MANIFEST}: its {fact} {value}, the ledger's samples give "
                                f"{verdict.facts.get(fact)}")
    return problems

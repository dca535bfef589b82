"""The dataset's checks, run on what was published as the writer runs them.

The published ledger (units.jsonl, transforms/writer/ledger.py) holds what
each unit's receipt held: what its observers learned of its samples (their
(group key, split) pairs, their keys). `LedgerChecks` runs every one of the
writer's dataset-wide checks (transforms/checks/dataset_checks.py: a group in
one split, a key once) over the whole ledger with the checks' own steps, so
a dataset the writer would have refused is refused whatever wrote it. A
ledger an earlier version wrote has each in a field of its own, and perhaps
no keys: its samples' content fingerprints name their keys (with
--duplicates warn, the default), and are counted instead.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import apache_beam as beam

from transforms.checks.dataset_checks import FindAll, judge
from transforms.format.arguments import said
from transforms.recipe.observers import KEYS, SPLIT_GROUPS

__all__ = ["LedgerChecks", "LedgerReceipt", "ledger_receipt"]


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


class LedgerChecks(beam.PTransform):
    """The pipeline's root -> a problem line (naming the ledger as `name`) for
    each of the dataset's checks that refuses the ledger at `path`."""

    def __init__(self, path: str, name: str):
        super().__init__()
        self._path = path
        self._name = name

    def expand(self, pbegin):
        return (pbegin
                | "ReadLedger" >> beam.io.ReadFromText(self._path)
                | "Receipts" >> beam.Map(ledger_receipt)
                | "DatasetChecks" >> FindAll()
                | "AllFound" >> beam.combiners.ToDict()
                | "Problems" >> beam.FlatMap(_problems, self._name))


def _problems(found: dict, name: str) -> list:
    return [f"{name}: {verdict.refusal}" for verdict in judge(found, said) if verdict.refusal]

"""The dataset's checks, run on what was published as the writer runs them.

The published ledger (units.jsonl, transforms/writer/ledger.py) holds what
each unit's receipt held: the (group key, split) pairs and keys of its
samples. `LedgerChecks` runs every one of the writer's dataset-wide checks
(transforms/checks/dataset_checks.py: a group in one split, a key once) over
the whole ledger with the checks' own steps, so a dataset the writer would
have refused is refused whatever wrote it. A ledger an earlier version wrote
has no keys: its samples' content fingerprints name their keys (with
--duplicates warn, the default), and are counted instead.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import apache_beam as beam

from transforms.checks.dataset_checks import FindAll, judge
from transforms.format.arguments import said

__all__ = ["LedgerChecks", "LedgerReceipt", "ledger_receipt"]


class LedgerReceipt(NamedTuple):
    """What the checks read of a ledger line's receipt."""

    unit: int
    groups: tuple   # distinct (group key, split) pairs of its samples with examples
    keys: tuple     # the key of each sample it was given


def ledger_receipt(line: str) -> LedgerReceipt:
    """One ledger line's LedgerReceipt."""
    receipt = json.loads(line)
    if "keys" in receipt:
        keys = receipt["keys"]
    else:   # (kind, digest, split, key, url) of each written sample's fingerprints
        keys = sorted({fingerprint[3] for fingerprint in receipt.get("fingerprints", ())})
    return LedgerReceipt(receipt["unit"], tuple(map(tuple, receipt.get("groups", ()))),
                         tuple(keys))


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

"""A key once in the dataset, checked as the writer checks it.

The published ledger (units.jsonl, transforms/writer/ledger.py) holds the
keys each unit's samples gave; `LedgerKeys` counts them over the whole
ledger with the writer's own step (transforms/checks/keys.py
`KeysWrittenTwice`), so a dataset holding a key twice is refused whatever
wrote it. A ledger an earlier version wrote has no keys: its samples'
content fingerprints name their keys (with --duplicates warn, the default),
and are counted instead.
"""

from __future__ import annotations

import json
from typing import Iterator

import apache_beam as beam

from transforms.checks.keys import KeysWrittenTwice

__all__ = ["LedgerKeys", "ledger_keys"]


def ledger_keys(line: str) -> Iterator[tuple]:
    """(key, unit) of each sample one ledger line's unit was given."""
    receipt = json.loads(line)
    if "keys" in receipt:
        keys = receipt["keys"]
    else:   # (kind, digest, split, key, url) of each written sample's fingerprints
        keys = sorted({fingerprint[3] for fingerprint in receipt.get("fingerprints", ())})
    for key in keys:
        yield key, receipt["unit"]


class LedgerKeys(beam.PTransform):
    """The pipeline's root -> a problem line for each key the ledger at `path`
    (named `name` in the lines) gives more than once."""

    def __init__(self, path: str, name: str):
        super().__init__()
        self._path = path
        self._name = name

    def expand(self, pbegin):
        name = self._name
        return (pbegin
                | "ReadLedger" >> beam.io.ReadFromText(self._path)
                | "LedgerKeys" >> beam.FlatMap(ledger_keys)
                | "KeysWrittenTwice" >> KeysWrittenTwice()
                | "Problem" >> beam.MapTuple(lambda key, units: (
                    f"{name}: key {key!r} is given {len(units)} times (units "
                    f"{', '.join(map(str, units))}): a key is the dataset's, given once (its "
                    "examples are named, ordered and split by it)")))

"""What is learned of each converted sample for a check over the whole dataset.

Beam-free. A `KeyedObserver` is told what became of every sample (segment,
cut example) a unit's driver converts (transforms/recipe/driver.py) and
keeps small records of it; the unit's receipt carries each observer's
records by its name (`UnitReceipt.observed`), and a dataset check joins them
over every unit (transforms/checks/dataset_checks.py). The merged kind, the
measures (transforms/recipe/measures/), is fed each example instead and
merged into a manifest section.

    work = driver.start(observers=(SPLIT_GROUPS, KEYS))
    ...
    work.observations()   # (("groups", ((group, split), ...)), ("keys", (key, ...)))
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from transforms.format.dead_letters import DUPLICATE_KEY
from transforms.format.sample import CONTENT_KEY_PREFIX, KEY, URL, is_text

__all__ = ["CONTENT_FINGERPRINTS", "KEYS", "KeyedObserver", "SPLIT_GROUPS", "observed"]


class KeyedObserver:
    """Keeps small records of what became of each converted sample. `name`
    names them in the receipt; `observe(sample, outcome)` gives a sample's
    records; `kept(records)` what of all of a unit's the receipt carries
    (by default all of them, in order)."""

    name: str

    def observe(self, sample: Mapping[str, Any], outcome) -> Iterable:
        raise NotImplementedError

    def kept(self, records: list) -> tuple:
        return tuple(records)


class _SplitGroups(KeyedObserver):
    """(group key, split) of each sample with examples, each pair once: the
    leakage check's and the manifest's groups per split."""

    name = "groups"

    def observe(self, sample, outcome) -> Iterable:  # noqa: ARG002
        return ((outcome.group, outcome.split),) if outcome.examples else ()

    def kept(self, records: list) -> tuple:
        return tuple(sorted(set(records), key=repr))


class _ContentFingerprints(KeyedObserver):
    """(kind, digest, split, key, url) of each content fingerprint of a sample
    with examples (transforms/recipe/fingerprints.py): the duplicate check's."""

    name = "fingerprints"

    def observe(self, sample, outcome) -> Iterable:
        if not outcome.examples:
            return ()
        return ((kind, digest, outcome.split, sample.get(KEY), sample.get(URL, ""))
                for kind, digest in outcome.learned)


class _Keys(KeyedObserver):
    """The key of each sample given, but those given more than once in the
    input (each a dead letter, counted by the pre-pass) and those a check
    cannot count: a key of no text of its own (a dict keyed by its content
    is the duplicate check's; a name in no UTF-8 fails as it is read)."""

    name = "keys"

    def observe(self, sample, outcome) -> Iterable:
        key = sample.get(KEY)
        if not isinstance(key, str) or not is_text(key) or key.startswith(CONTENT_KEY_PREFIX):
            return ()
        if outcome.failure is not None and outcome.failure.stage == DUPLICATE_KEY:
            return ()
        return (key,)


SPLIT_GROUPS = _SplitGroups()
CONTENT_FINGERPRINTS = _ContentFingerprints()
KEYS = _Keys()


def observed(receipt, name: str) -> tuple:
    """The records the observer `name` kept of a receipt's unit (none when
    it did not observe it)."""
    return next((records for found, records in receipt.observed if found == name), ())

"""The accounting of augmented copies (transforms/media/augment.py): the
manifest's `accounting.augmentation`, per split: its original and augmented
examples, its copies, and how many copies took each speed, each gain and SNR
(dB, rounded) and a peak normalisation, how many had silent speech (no
noise), and how many noise and RIR recordings they used.

Fed each copy as it is planned (`add_copy`: a copy counts even when it gives
no example) and each example written (`add`). A unit's accumulator is a
Counter of (what, split, value): a few numbers per unit. Beam-free.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Iterable

from transforms.media.augment import Augmentation
from transforms.recipe.measures import ACCOUNTING, Measure, Seen

__all__ = ["AugmentedCopies"]

# The copies' parameters counted per value: the section's key, as it is counted.
_PER_VALUE = ("speed", "gain_db", "snr_db")
_CORPORA = ("noise", "rir")


def _copy_facts(augmentation: Augmentation) -> list:
    """(what, value) of one copy's parameters."""
    facts = [("copies", ""), ("speed", f"{augmentation.speed:g}")]
    if augmentation.gain_db:
        facts.append(("gain_db", f"{round(augmentation.gain_db):d}"))
    if augmentation.noise is not None:
        facts += [("snr_db", f"{round(augmentation.snr_db):d}"),
                  ("noise", augmentation.noise.key)]
    if augmentation.rir is not None:
        facts.append(("rir", augmentation.rir.key))
    if augmentation.mix.peak_normalized:
        facts.append(("peak_normalized", ""))
    if augmentation.silent:
        facts.append(("silent", ""))
    return facts


@dataclasses.dataclass(frozen=True)
class AugmentedCopies(Measure):
    """The accounting of augmented copies (module docstring)."""

    name = "augmentation"
    place = ACCOUNTING

    def create(self) -> collections.Counter:
        return collections.Counter()

    def add(self, accumulator: collections.Counter, seen: Seen) -> None:
        accumulator[("examples", seen.split, "")] += 1
        if seen.values["aug.copy"][0]:
            accumulator[("augmented", seen.split, "")] += 1

    def add_copy(self, accumulator: collections.Counter, split: str,
                 augmentation: Augmentation) -> None:
        for what, value in _copy_facts(augmentation):
            accumulator[(what, split, value)] += 1

    def merge(self, accumulators: Iterable[collections.Counter]) -> collections.Counter:
        merged = collections.Counter()
        for accumulator in accumulators:
            merged.update(accumulator)
        return merged

    def section(self, counts: collections.Counter, split_names: list) -> dict | None:  # noqa: ARG002
        def by_split(what) -> dict:   # {split: n}
            return {split: n for (w, split, _), n in sorted(counts.items()) if w == what}

        def per_value(what, numeric=True) -> dict:   # {split: {value: copies}}, numbers in order
            found: dict = {}
            for (_, split, value), n in sorted(
                    ((key, n) for key, n in counts.items() if key[0] == what),
                    key=lambda item: (item[0][1], float(item[0][2]) if numeric else 0.0)):
                found.setdefault(split, {})[value] = n
            return found

        copies = by_split("copies")
        if not copies:
            return None
        augmented = by_split("augmented")
        return {"examples": {split: {"original": n - augmented.get(split, 0),
                                     "augmented": augmented.get(split, 0)}
                             for split, n in by_split("examples").items()},
                "copies": copies,
                **{what: per_value(what) for what in _PER_VALUE},
                **{f"{corpus}_recordings_used": {
                    split: len(used) for split, used in per_value(corpus, numeric=False).items()}
                   for corpus in _CORPORA},
                "peak_normalized": by_split("peak_normalized"),
                "silent": by_split("silent")}

    def to_json(self, counts: collections.Counter) -> list:
        return [[*key, n] for key, n in sorted(counts.items())]

    def from_json(self, data) -> collections.Counter:
        return collections.Counter({(what, split, value): n for what, split, value, n in data})

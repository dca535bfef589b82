"""Examples per label, per split: each split's `label_counts` (--label_field,
--stratify_by), every split listed, so a reader tells an empty one from a
missing one. The label is the split plan's, as text. Beam-free."""

from __future__ import annotations

import collections
import dataclasses

from transforms.recipe.measures import PER_SPLIT, Seen, SeenExamples, SplitCounts

__all__ = ["Labels"]


@dataclasses.dataclass(frozen=True)
class Labels(SplitCounts):
    """{split: {label: examples}}, labels in order."""

    name = "label_counts"
    place = PER_SPLIT

    def add(self, accumulator: dict, seen: Seen) -> None:
        if seen.label is not None:
            accumulator.setdefault(seen.split, collections.Counter())[seen.label] += 1

    def add_examples(self, accumulator: dict, seen: SeenExamples) -> None:
        if seen.label is not None:
            accumulator.setdefault(seen.split, collections.Counter())[seen.label] += seen.count

    def section(self, accumulator: dict, split_names: list) -> dict:
        return {split: dict(sorted(accumulator.get(split, {}).items()))
                for split in split_names}

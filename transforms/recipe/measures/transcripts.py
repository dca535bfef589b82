"""The transcripts' characters per split: the manifest's `transcripts`, the
normalisation (transforms/recipe/transcripts.py), the train split's
vocabulary and each split's characters train never had. Counted from the
transcript each written example holds. Beam-free."""

from __future__ import annotations

import collections
import dataclasses

from transforms.recipe.measures import Seen, SplitCounts
from transforms.recipe.transcripts import TranscriptOptions, transcripts_section

__all__ = ["Transcripts"]


@dataclasses.dataclass(frozen=True)
class Transcripts(SplitCounts):
    """{split: {character: n}} of the transcripts in `options.field`."""

    options: TranscriptOptions
    name = "transcripts"

    def add(self, accumulator: dict, seen: Seen) -> None:
        text = seen.values[self.options.field][0]
        accumulator.setdefault(seen.split, collections.Counter()).update(
            text.decode("utf-8") if isinstance(text, bytes) else text)

    def section(self, accumulator: dict, split_names: list) -> dict:
        return transcripts_section(self.options, accumulator, split_names)

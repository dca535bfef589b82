"""Transcripts: the text feature an utterance's audio is labelled with.

Beam-free. `TranscriptOptions.field` names a `string` feature of the spec;
each example's value is then normalised, by a rule the manifest states:

1. decoded as UTF-8, strictly (a transcript that is not is a dead letter,
   stage `transcript`), without a byte-order mark or surrounding whitespace;
2. Unicode NFC (a composed é, never e + a combining accent);
3. `case`: "keep", "lower" or "upper" (`str.lower`, `str.upper`);
4. `punctuation`: "keep", or "strip": every character of Unicode category P
   removed but an apostrophe between letters (it's, don't), runs of
   whitespace made one space.

Its characters are counted per split as the examples are written (a
measure, transforms/recipe/measures/transcripts.py); the manifest gets the
character vocabulary of the train split and, per split, the characters
train never had (`transcripts_section`).

A transcript belongs to a whole utterance, so a cut into windows, frames or
clips with a transcript is refused (`check`): a window does not hold its
utterance's text. `drop` leaves the transcript out instead.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata

from transforms.format.arguments import ArgumentError, check_choice
from transforms.format.sample import field_text

__all__ = ["TranscriptOptions", "WHOLE_UTTERANCE_CUTS", "transcripts_section"]

CASES = ("keep", "lower", "upper")
PUNCTUATION = ("keep", "strip")
# Cuts whose examples hold a whole sample's (or a segment's) audio.
WHOLE_UTTERANCE_CUTS = ("none", "utterances", "segments")
_APOSTROPHES = "'\u2019"
_SPACES = re.compile(r"\s+")


@dataclasses.dataclass(frozen=True)
class TranscriptOptions:
    """Which feature holds the transcript, and how it is normalised.

    >>> from transforms.recipe.transcripts import TranscriptOptions
    >>> TranscriptOptions("text", case="lower", punctuation="strip").normalize(
    ...     "  It's 'Cafe\\u0301', OK?\\n")
    "it's café ok"
    """

    field: str = ""
    case: str = "keep"
    punctuation: str = "keep"
    # With a cut into windows, leave the transcript out instead of refusing.
    drop: bool = False

    def __post_init__(self):
        check_choice("text_case", self.case, CASES)
        check_choice("text_punctuation", self.punctuation, PUNCTUATION)

    def __bool__(self) -> bool:
        return bool(self.field)

    def check(self, spec, mode: str) -> None:
        """ArgumentError unless the transcript is a `string` scalar of `spec`
        and `mode` keeps utterances whole (or the transcript is dropped)."""
        if not self.field or self.dropped(mode):
            return
        feature = next((f for f in spec if f.name == self.field), None)
        if feature is None or feature.dtype != "string" or feature.shape:
            raise ArgumentError("text_field", f"{self.field!r} must name a string feature of "
                                "{features}, e.g. text=txt:string")
        if mode not in WHOLE_UTTERANCE_CUTS and not self.drop:
            raise ArgumentError("text_field", f"{self.field!r} is an utterance's text, and "
                                f"{{mode}} {mode} cuts utterances apart: a window does not "
                                "hold its utterance's words; cut utterances or segments, or "
                                "leave the transcript out ({drop_transcript})")

    def dropped(self, mode: str) -> bool:
        """Whether the transcript is left out of this cut's examples."""
        return bool(self.field) and self.drop and mode not in WHOLE_UTTERANCE_CUTS

    def normalize(self, value) -> str:
        """The transcript as the examples hold it; ValueError when it is not UTF-8."""
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"the transcript is not UTF-8 text: {e}") from None
        text = unicodedata.normalize("NFC", field_text(value))
        if self.case != "keep":
            text = text.lower() if self.case == "lower" else text.upper()
        if self.punctuation == "strip":
            text = _SPACES.sub(" ", "".join(
                c for i, c in enumerate(text)
                if not unicodedata.category(c).startswith("P") or _inner_apostrophe(text, i)
            )).strip()
        return text

    def describe(self) -> dict:
        """The rule, as the manifest states it."""
        return {"feature": self.field, "unicode": "NFC", "case": self.case,
                "punctuation": self.punctuation}


def _inner_apostrophe(text: str, i: int) -> bool:
    return (text[i] in _APOSTROPHES and 0 < i < len(text) - 1
            and text[i - 1].isalpha() and text[i + 1].isalpha())


def transcripts_section(options: TranscriptOptions, counts: dict, split_names: list) -> dict:
    """The manifest's `transcripts`: the normalisation, the train split's
    character vocabulary (by code point) and, per split, its characters and
    those of them train never had; `counts` is {split: {character: n}}."""
    vocabulary = sorted(counts.get("train", {}))
    known = set(vocabulary)
    splits = {}
    for split in split_names:
        found = counts.get(split, {})
        unseen = {c: n for c, n in sorted(found.items()) if c not in known}
        splits[split] = {"characters": sum(found.values()), "unseen": sum(unseen.values()),
                         "unseen_characters": unseen}
    return {**options.describe(), "vocabulary": vocabulary, "splits": splits}

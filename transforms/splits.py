"""Deterministic splits: a split is a function of a group key, never of `random`.

Beam-free. The group key is a field's value (`__key__`, `cls`, `json.speaker`)
or the first capture of a regex over it; its stable hash picks the split by the
ratios, so every example of one speaker or video lands in one split on every
run and runner.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from typing import Any, Mapping

from transforms.sample import FieldReader

__all__ = ["SplitPlan", "parse_splits", "parse_split_by", "stable_hash64"]


def stable_hash64(text: str, salt: bytes) -> int:
    """A 64-bit hash of `text` that is the same in every process and on every runner.

    `salt` keeps hashes for different purposes (splits, shard order) independent.
    """
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8"), digest_size=8, person=salt).digest(), "big")


def parse_splits(text: str) -> tuple:
    """'train=0.8,eval=0.1,test=0.1' -> (('train', 0.8), ('eval', 0.1), ('test', 0.1)).

    Ratios must be positive and sum to 1; names unique and path-safe.
    """
    splits = []
    for term in (t.strip() for t in text.split(",")):
        name, sep, ratio = term.partition("=")
        name = name.strip()
        try:
            value = float(ratio)
        except ValueError:
            value = math.nan
        if not sep or not re.fullmatch(r"[A-Za-z0-9_-]+", name) or not value > 0:
            raise ValueError(
                f"--splits term {term!r} is not name=ratio with a positive ratio, "
                f"e.g. 'train=0.8,eval=0.1,test=0.1'")
        splits.append((name, value))
    names = [n for n, _ in splits]
    if len(set(names)) != len(names):
        raise ValueError(f"--splits {text!r} names a split twice")
    total = sum(r for _, r in splits)
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise ValueError(f"--splits {text!r}: ratios sum to {total:g}, not 1")
    return tuple(splits)


def parse_split_by(text: str) -> tuple:
    """'FIELD[:REGEX]' -> (field, compiled-regex pattern or None).

    The regex must have a capture group; its first capture is the group key.
    """
    field, sep, pattern = text.partition(":")
    if not field:
        raise ValueError(f"--split_by {text!r} names no field")
    if not sep:
        return field, None
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise ValueError(f"--split_by {text!r}: bad regex: {e}") from None
    if regex.groups < 1:
        raise ValueError(f"--split_by {text!r}: the regex needs a capture group, "
                         f"e.g. '__key__:^([^_]+)'")
    return field, pattern


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """Which split a sample belongs to: ratios plus the group key's field and regex."""

    splits: tuple  # ((name, ratio), ...)
    field: str = "__key__"
    pattern: str | None = None

    @classmethod
    def from_flags(cls, splits: str, split_by: str) -> "SplitPlan":
        field, pattern = parse_split_by(split_by)
        return cls(parse_splits(splits), field, pattern)

    @property
    def names(self) -> list:
        return [n for n, _ in self.splits]

    def group_key(self, sample: Mapping[str, Any], reader: FieldReader | None = None) -> str:
        """The sample's group key; ValueError when the field is missing or the regex misses."""
        try:
            value = (reader or FieldReader(sample)).get(self.field)
        except KeyError as e:
            raise ValueError(f"split key: {e.args[0]}") from None
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        if self.pattern is None:
            return text
        m = re.search(self.pattern, text)
        if not m or m.group(1) is None:
            raise ValueError(
                f"split key: --split_by regex {self.pattern!r} does not match "
                f"{self.field}={text[:80]!r}")
        return m.group(1)

    def split_of(self, group_key: str) -> str:
        """The split for a group key: its hash's position in [0, 1) against the ratios."""
        position = stable_hash64(group_key, b"datagen-split") / 2.0**64
        cumulative = 0.0
        for name, ratio in self.splits:
            cumulative += ratio
            if position < cumulative:
                return name
        return self.splits[-1][0]  # ratios summing to 1 - 1e-9

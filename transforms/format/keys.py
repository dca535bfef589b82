"""A key given more than once: where each sample of it is, and what is said of it.

Beam-free. A sample's `__key__` names it in the whole dataset: its examples
are named, ordered and split by it, and its dead letter, its duplicates and
its ledger entry speak of it. So a key is the dataset's to be unique, not a
work unit's: every sample of a key the input gives more than once is a dead
letter (stage `duplicate_key`) naming all their places, wherever the units'
boundaries fall, and the job goes on (transforms/checks/keys.py finds them
before any example is built).

A reader says where a sample of a key is with a `KeyPlace`: the input it
read, a position in it that orders its places, and its own words for it
(`member a.flac`, `row 12`), or none yet for a listing's line, whose number
is counted only for the keys found twice.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

__all__ = ["KeyPlace", "given_again_message", "places_text"]

# The places a message names of one key, at most.
_SHOWN = 5


class KeyPlace(NamedTuple):
    """Where a reader gives a sample of some key: the input (`url`), a position
    in it (`at`: a byte offset, a member's or a row's index) and the reader's
    words for it (`where`; '' for a listing's line, named once known)."""

    url: str
    at: int
    where: str = ""


def places_text(places: Iterable[KeyPlace]) -> str:
    """'a.csv line 3, b.csv line 1095': the places in order, the first few."""
    places = sorted(set(places))
    shown = ", ".join(f"{p.url} {p.where}".strip() for p in places[:_SHOWN])
    return shown + (f" and {len(places) - _SHOWN} more" if len(places) > _SHOWN else "")


def given_again_message(key: str, times: int, places: str) -> str:
    """Why a sample of a key given `times` times is a dead letter."""
    return (f"key {key!r} is given {times} times ({places}): each sample needs its own "
            "__key__ (examples are named, ordered and split by it), so none of them is "
            "written; give each its own key")

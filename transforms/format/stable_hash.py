"""The stable 64-bit hash every split, order key and seeded choice comes from
(Beam-free): the same in every process, on every runner and machine, unlike
Python's `hash`.
"""

from __future__ import annotations

import hashlib

__all__ = ["stable_hash64"]


def stable_hash64(text: str, salt: bytes) -> int:
    """A 64-bit hash of `text` that is the same in every process and on every runner.

    `salt` keeps hashes for different purposes (splits, shard order) independent.
    """
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8"), digest_size=8, person=salt).digest(), "big")

"""Random access to a split's records through the shards' record indexes.

Beam-free. Every uncompressed shard has `<shard>.idx` beside it
(transforms/writer/tfrecord.py), one `offset size` line per record in DALI's
`tfrecord2idx` format, with its CRC32C in the manifest. `RecordTable` loads a
split's indexes (each checked against the manifest) into three arrays, so
record `i` of the split, counting through its shards in order, is
`(file, offset, size)`; `read` fetches any records by number, seeking in
each shard, and checks their framing and CRCs as TensorFlow's own reader
does. The reader builds its global shuffle, exact resume and per-worker
sharding on this (transforms/format/reader.py).
"""

from __future__ import annotations

import concurrent.futures
import struct
from typing import Callable, Iterable, Sequence

import google_crc32c
import numpy as np

__all__ = ["FRAME_OVERHEAD", "RecordTable", "RecordIndexError", "index_text", "masked_crc32c",
           "parse_index"]

# A record's frame: length (8 bytes), its CRC (4), the record, the record's CRC (4).
FRAME_OVERHEAD = 16
_INDEX_READERS = 16


class RecordIndexError(ValueError):
    """A record index or a record read through it does not check out."""


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC32C, rotated and offset."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def index_text(record_sizes: Iterable[int]) -> str:
    """The index of a shard of records of these sizes: `offset size` per line,
    each the whole frame's (what DALI's tfrecord2idx writes)."""
    lines, offset = [], 0
    for size in record_sizes:
        lines.append(f"{offset} {size + FRAME_OVERHEAD}\n")
        offset += size + FRAME_OVERHEAD
    return "".join(lines)


def parse_index(text: bytes, name: str) -> np.ndarray:
    """An index file's lines -> an int64 array [records, 2] of (offset, size)."""
    try:
        table = np.array([line.split() for line in text.decode("ascii").splitlines()],
                         dtype=np.int64).reshape(-1, 2)
    except ValueError as e:
        raise RecordIndexError(f"{name}: not a record index of 'offset size' lines: {e}") from None
    if len(table) and (table[0, 0] != 0 or np.any(table[1:, 0] != table[:-1].sum(axis=1))):
        raise RecordIndexError(f"{name}: its records do not follow one another")
    return table


class RecordTable:
    """Where each record of a split is: `files[file_ids[i]]` at `offsets[i]`, `sizes[i]`
    bytes (a whole frame: length, its CRC, the record, its CRC).

    `shards` are the manifest's shard entries in order; `open_file(path)` opens
    a path for binary reading (the reader passes TensorFlow's gfile, which reads
    gs:// as well).
    """

    def __init__(self, root: str, shards: Sequence[dict], open_file: Callable):
        self._open = open_file
        self.files = [f"{root}/{s['file']}" for s in shards]
        # In parallel: on gs:// each index is a request, and a split may have thousands.
        with concurrent.futures.ThreadPoolExecutor(_INDEX_READERS) as pool:
            tables = list(pool.map(lambda shard: _load_index(root, shard, open_file), shards))
        self.file_ids = np.concatenate(
            [np.full(len(t), i, dtype=np.int32) for i, t in enumerate(tables)] or
            [np.zeros(0, np.int32)])
        joined = np.concatenate(tables or [np.zeros((0, 2), np.int64)])
        self.offsets, self.sizes = joined[:, 0], joined[:, 1]

    def __len__(self) -> int:
        return len(self.offsets)

    def read(self, ids: np.ndarray) -> np.ndarray:
        """The serialized records `ids` (an object array of bytes, in that order).

        Records next to each other in a shard are fetched in one read, so a
        sequential batch costs a read or two, a shuffled one a seek per record.
        """
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty(len(ids), dtype=object)
        order = np.lexsort((self.offsets[ids], self.file_ids[ids]))
        files, offsets, sizes = (a[ids[order]] for a in (self.file_ids, self.offsets, self.sizes))
        # A read starts where the file changes or a record does not follow the one before.
        starts = np.flatnonzero(np.r_[True, (files[1:] != files[:-1])
                                      | (offsets[1:] != offsets[:-1] + sizes[:-1])])
        for begin, end in zip(starts, np.r_[starts[1:], len(order)]):
            path, first = self.files[files[begin]], int(offsets[begin])
            with self._open(path) as f:
                f.seek(first)
                data = f.read(int(offsets[end - 1] + sizes[end - 1]) - first)
            for k in range(begin, end):
                at = int(offsets[k]) - first
                out[order[k]] = _unframe(data[at:at + int(sizes[k])], path, int(offsets[k]))
        return out


def _load_index(root: str, shard: dict, open_file: Callable) -> np.ndarray:
    """A manifest shard entry's index, checked against the entry."""
    index = shard.get("index")
    if not index:
        raise RecordIndexError(f"{shard['file']} has no record index (only uncompressed "
                               "shards have one: write with compression 'none')")
    with open_file(f"{root}/{index['file']}") as f:
        text = f.read()
    if f"{google_crc32c.value(text):08x}" != index["crc32c"]:
        raise RecordIndexError(f"{index['file']}: CRC32C does not match the manifest's")
    table = parse_index(text, index["file"])
    if len(table) != shard["num_examples"]:
        raise RecordIndexError(f"{index['file']} lists {len(table)} records, the manifest "
                               f"{shard['num_examples']}")
    return table


def _unframe(frame: bytes, path: str, offset: int) -> bytes:
    """The record in one TFRecord frame, its length and CRCs checked."""
    if len(frame) < FRAME_OVERHEAD:
        raise RecordIndexError(f"{path} at {offset}: the file ends inside the record")
    length = frame[:8]
    (size,) = struct.unpack("<Q", length)
    (length_crc,) = struct.unpack("<I", frame[8:12])
    if length_crc != masked_crc32c(length) or size != len(frame) - FRAME_OVERHEAD:
        raise RecordIndexError(f"{path} at {offset}: no record of the indexed size starts here")
    record = frame[12:12 + size]
    (record_crc,) = struct.unpack("<I", frame[12 + size:])
    if record_crc != masked_crc32c(record):
        raise RecordIndexError(f"{path} at {offset}: the record fails its CRC32C")
    return record

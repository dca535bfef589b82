"""ArrayRecord shards read back: in order for verify, by number for the reader.

Beam-free. ArrayRecord's own reader (`array_record` on PyPI) checks the hash
of every chunk it reads and raises at a corrupt one; it opens local files
only (a bucket is read through a mount, such as gcsfuse, as Grain and TFDS
read it).

- `ArrayRecordStream`: every record of one shard in order, with the
  interface of a TFRecord `RecordStream` (transforms/format/records.py):
  once iterated, `crc32c` of the file as stored, `sizes` and `problems`.
- `ArrayRecordTable`: a split's records by number, counting through its
  shards in order, as `RecordTable` (transforms/format/record_index.py) is
  for TFRecord: the reader's global shuffle, sharding and resume use it.
"""

from __future__ import annotations

import os
import tempfile
import threading
from typing import Iterable, Iterator, Sequence

import numpy as np
from array_record.python.array_record_module import ArrayRecordReader

from transforms.format.record_index import RecordIndexError
from transforms.format.records import Record, StoredFile

__all__ = ["ArrayRecordStream", "ArrayRecordTable"]

# Random access: no read-ahead, which would fetch chunks no one asked for.
_RANDOM_ACCESS = "readahead_buffer_size:0,max_parallelism:0"
_UNREADABLE = "not a readable ArrayRecord file (truncated, or another format)"


def _open(path: str, options: str = "") -> ArrayRecordReader:
    try:
        reader = ArrayRecordReader(path, options)
    except (RuntimeError, ValueError) as e:
        raise RecordIndexError(f"{path}: {_UNREADABLE}: {e}") from None
    if not reader.ok():
        raise RecordIndexError(f"{path}: {_UNREADABLE}")
    return reader


class ArrayRecordStream(StoredFile):
    """The records of one ArrayRecord file whose bytes are `chunks` (see
    StoredFile). ArrayRecord reads local files only: `local_path`, when the
    chunks are that file's, is read in place; otherwise the chunks are
    copied to a temporary file first."""

    def __init__(self, chunks: Iterable[bytes], local_path: str | None = None):
        super().__init__(chunks)
        self._local = local_path

    def _local_copy(self) -> str:
        """The file's local path, its CRC32C taken on the way."""
        if self._local is not None:
            for _ in self._stored():
                pass
            return self._local
        handle, spool = tempfile.mkstemp(suffix=".array_record")
        with os.fdopen(handle, "wb") as spool_file:
            for chunk in self._stored():
                spool_file.write(chunk)
        return spool

    def __iter__(self) -> Iterator[Record]:
        path = self._local_copy()
        try:
            try:
                reader = _open(path)
            except RecordIndexError:
                self.problems.append(_UNREADABLE)
                return
            for number in range(reader.num_records()):
                try:
                    data = reader.read()
                except RuntimeError as e:
                    self.problems.append(f"record {number}: {e}; the rest of the file is "
                                         "unreadable")
                    return
                self.sizes.append(len(data))
                yield Record(number, None, data)
        finally:
            if path != self._local:
                os.remove(path)


class ArrayRecordTable:
    """Record `i` of a split, counting through its shards in order, read by number.

    `shards` are the manifest's shard entries; each file is opened on its
    first read, and one holding more or fewer records than its entry says is
    a RecordIndexError, not a silent shift of every later number.
    """

    def __init__(self, root: str, shards: Sequence[dict]):
        self.files = [f"{root}/{s['file']}" for s in shards]
        self._counts = [s["num_examples"] for s in shards]
        self._starts = np.cumsum([0] + self._counts)
        self._readers: dict = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _reader(self, file_id: int) -> ArrayRecordReader:
        with self._lock:
            if file_id not in self._readers:
                reader = _open(self.files[file_id], _RANDOM_ACCESS)
                if reader.num_records() != self._counts[file_id]:
                    raise RecordIndexError(f"{self.files[file_id]} holds "
                                           f"{reader.num_records()} records, the manifest "
                                           f"{self._counts[file_id]}")
                self._readers[file_id] = reader
            return self._readers[file_id]

    def read(self, ids: np.ndarray) -> np.ndarray:
        """The serialized records `ids` (an object array of bytes, in that order)."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty(len(ids), dtype=object)
        file_ids = np.searchsorted(self._starts, ids, side="right") - 1
        for file_id in np.unique(file_ids):
            at = np.flatnonzero(file_ids == file_id)
            positions = (ids[at] - self._starts[file_id]).tolist()
            try:
                out[at] = self._reader(int(file_id)).read(positions)
            except RuntimeError as e:  # a chunk that fails its hash
                raise RecordIndexError(f"{self.files[file_id]}: {e}") from None
        return out

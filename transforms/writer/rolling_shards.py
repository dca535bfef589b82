"""One work unit's examples into per-split shard files, written as they are built.

A `RollingShards` holds one open shard file per split it has seen: each
example goes to its split's file, and a file is closed and a new one started
before it would grow past the target size (a single larger example gets a file
of its own). A file is opened only for an example, so no shard is empty.
Memory is one write buffer per open file, however large the unit.

Files go to the job's temporary folder under names unique to this attempt at
the unit, so a retried or duplicated attempt never writes over another; the
final step moves only the shards whose records reached it.
"""

from __future__ import annotations

import uuid

from apache_beam.io.filesystems import FileSystems

from transforms.format.shard_format import ShardFormat
from transforms.writer.shard_files import ShardRecord, open_shard_writer, shard_record

__all__ = ["RollingShards"]


class RollingShards:
    """Writes one unit's examples, in order, into rolling per-split shards.

        # `order` starts with the unit's index
        shards = RollingShards(temp_dir, order=(unit.index,), shard_format=ShardFormat(),
                               shard_size_bytes=SHARD_SIZE_BYTES)
        shards.write("train", serialized)
        records = shards.close()   # ShardRecords, ordered by `order + (part,)`
    """

    def __init__(self, temp_dir: str, order: tuple, shard_format: ShardFormat,
                 shard_size_bytes: int):
        self._temp_dir = temp_dir
        self._order = order
        self._format = shard_format
        self._target = shard_size_bytes
        self._attempt = uuid.uuid4().hex[:12]
        self._open: dict = {}   # split -> (part, writer)
        self._parts: dict = {}  # split -> parts started
        self._done: list = []

    def write(self, split: str, serialized: bytes) -> None:
        current = self._open.get(split)
        if current is not None and current[1].num_bytes + len(serialized) > self._target:
            self._finish(split)
            current = None
        if current is None:
            current = self._start(split)
        current[1].write(serialized)

    def _start(self, split: str) -> tuple:
        part = self._parts.get(split, 0)
        self._parts[split] = part + 1
        # The unit's index and the attempt name the file; the rest of `order` (a
        # split unit's row key) stays in the record, out of file names.
        name = f"{split}-{self._order[0]:06d}-{part:05d}-{self._attempt}"
        path = FileSystems.join(self._temp_dir, name + self._format.suffix)
        self._open[split] = (part, open_shard_writer(path, self._format))
        return self._open[split]

    def _finish(self, split: str) -> None:
        part, writer = self._open.pop(split)
        writer.close()
        self._done.append(shard_record(writer, split, (*self._order, part)))

    def close(self) -> list[ShardRecord]:
        """Closes every open file; the records of all shards written."""
        for split in sorted(self._open):
            self._finish(split)
        return sorted(self._done)

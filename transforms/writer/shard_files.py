"""A shard file of either format: its writer, its final name, and its record.

Every writer of shards (rolling, global, transformed) opens them here, so the
format (transforms/format/shard_format.py) is chosen in one place: a
TFRecordWriter (transforms/writer/tfrecord.py) or an ArrayRecordShardWriter
(transforms/writer/array_record.py), which count and checksum alike.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from transforms.format.shard_format import ShardFormat
from transforms.writer.array_record import ArrayRecordShardWriter
from transforms.writer.tfrecord import TFRecordWriter

__all__ = ["ShardRecord", "open_shard_writer", "shard_name", "shard_record", "write_shard"]


class ShardRecord(NamedTuple):
    """A shard written to the job's temporary folder, waiting for the final step
    to name it `data-NNNNN-of-MMMMM` by its place in its split and move it."""

    split: str
    order: tuple       # the split's shards are named in this order
    temp: str          # where it was written
    num_examples: int
    num_bytes: int     # serialized examples, before compression
    crc32c: str        # of the file's bytes, 8 hex digits
    index_crc32c: str | None = None  # of its record index (`temp` + INDEX_SUFFIX), if it has one


def shard_name(split: str, index: int, num_shards: int, shard_format: ShardFormat) -> str:
    """`train/data-00003-of-00008.tfrecord`, relative to the output directory:
    TFDS's `{SPLIT}/data-{SHARD_X_OF_Y}.{FILEFORMAT}` (five digits or more)."""
    digits = max(5, len(str(num_shards)))
    return (f"{split}/data-{index:0{digits}d}-of-{num_shards:0{digits}d}"
            f"{shard_format.suffix}")


def open_shard_writer(path: str, shard_format: ShardFormat):
    """A writer of one shard file at `path`: `write(record)`, `close()`, then its
    num_records, num_bytes, crc32c and index_crc32c."""
    if shard_format.array_record:
        return ArrayRecordShardWriter(path)
    return TFRecordWriter(path, shard_format.compression)


def shard_record(writer, split: str, order: tuple) -> ShardRecord:
    """A closed writer's file as the shard of `split` at `order`."""
    return ShardRecord(split, order, writer.path, writer.num_records, writer.num_bytes,
                       writer.crc32c, writer.index_crc32c)


def write_shard(path: str, records: Iterable[bytes], shard_format: ShardFormat,
                split: str, order: tuple) -> ShardRecord:
    """Writes `records` as one shard file; its ShardRecord."""
    writer = open_shard_writer(path, shard_format)
    with writer:
        for record in records:
            writer.write(record)
    return shard_record(writer, split, order)

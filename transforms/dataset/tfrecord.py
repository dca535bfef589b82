"""TFRecord files: framing, a streaming writer, and the record of a written shard.

A TFRecord is the record's length, a masked CRC32C of the length, the record,
and a masked CRC32C of the record. `TFRecordWriter` streams records into one
file through Beam's filesystems (local, gs://), holding at most a write
buffer, never the file. GZIP is deflated by ISA-L (python-isal) at its
default level: many times faster than zlib's at the same ratio on PCM
payloads, where zlib had been half of a pipeline's time (docs/performance.md). The
output is ordinary gzip (fixed header, no timestamp), so every reader takes it
and reruns are byte-identical.
"""

from __future__ import annotations

import struct
from typing import Iterable, NamedTuple

import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from isal import isal_zlib

__all__ = ["COMPRESSIONS", "SUFFIXES", "ShardRecord", "TFRecordWriter", "shard_name",
           "write_tfrecords"]

SUFFIXES = {"gzip": ".tfrecord.gz", "none": ".tfrecord"}
COMPRESSIONS = tuple(SUFFIXES)
# Frames are gathered up to this much before one compress and write. Larger
# buffers are slower, not faster: glibc gives their memory back after every
# flush and the next one faults it in again (8 MiB: +45% time on payloads).
_WRITE_BUFFER = 1 << 20
_GZIP_WBITS = 31  # deflate inside a gzip header and trailer


class ShardRecord(NamedTuple):
    """A shard written to the job's temporary folder, waiting for the final step
    to name it `data-NNNNN-of-MMMMM` by its place in its split and move it."""

    split: str
    order: tuple       # the split's shards are named in this order
    temp: str          # where it was written
    num_examples: int
    num_bytes: int     # serialized examples, before compression


def shard_name(split: str, index: int, num_shards: int, compression: str) -> str:
    """`train/data-00003-of-00008.tfrecord.gz`, relative to the output directory."""
    return f"{split}/data-{index:05d}-of-{num_shards:05d}{SUFFIXES[compression]}"


def _masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _frame(record: bytes) -> tuple:
    """One TFRecord's parts: length, masked CRC32C of the length, data, masked CRC32C
    of the data. Not joined: the writer's flush copies them once."""
    length = struct.pack("<Q", len(record))
    return (length, struct.pack("<I", _masked_crc(length)), record,
            struct.pack("<I", _masked_crc(record)))


class TFRecordWriter:
    """Streams records into one TFRecord file (`compression` gzip or none).

        with TFRecordWriter(path, "gzip") as writer:
            writer.write(serialized)
        writer.num_records, writer.num_bytes
    """

    def __init__(self, path: str, compression: str):
        if compression not in SUFFIXES:
            raise ValueError(f"compression {compression!r}: expected one of {COMPRESSIONS}")
        self._file = FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
        self._compressor = (isal_zlib.compressobj(isal_zlib.ISAL_DEFAULT_COMPRESSION,
                                                  isal_zlib.DEFLATED, _GZIP_WBITS)
                            if compression == "gzip" else None)
        self._pending: list = []
        self._pending_bytes = 0
        self.num_records = 0
        self.num_bytes = 0  # records, before framing and compression

    def write(self, record: bytes) -> None:
        self.num_records += 1
        self.num_bytes += len(record)
        if len(record) >= _WRITE_BUFFER:
            # A large record is not copied into the buffer: its frame goes out
            # in buffer-sized pieces, so writing it adds no copy of it.
            self._flush()
            for part in _frame(record):
                view = memoryview(part)
                for start in range(0, len(view), _WRITE_BUFFER):
                    self._write(view[start:start + _WRITE_BUFFER])
            return
        self._pending += _frame(record)
        self._pending_bytes += len(record) + 16
        if self._pending_bytes >= _WRITE_BUFFER:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._write(b"".join(self._pending))
        self._pending, self._pending_bytes = [], 0

    def _write(self, data) -> None:
        self._file.write(self._compressor.compress(data) if self._compressor else data)

    def close(self) -> None:
        self._flush()
        if self._compressor:
            self._file.write(self._compressor.flush())
        self._file.close()

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_tfrecords(path: str, records: Iterable[bytes], compression: str) -> int:
    """Writes records as one TFRecord file; returns the bytes of the records."""
    with TFRecordWriter(path, compression) as writer:
        for record in records:
            writer.write(record)
    return writer.num_bytes

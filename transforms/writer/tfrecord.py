"""TFRecord files: framing, a streaming writer and a checked reader.

A TFRecord is the record's length, a masked CRC32C of the length, the record,
and a masked CRC32C of the record. `TFRecordWriter` streams records into one
file through Beam's filesystems (local, gs://), holding at most a write
buffer, never the file. GZIP is deflated by ISA-L (python-isal) at its
default level: many times faster than zlib's at the same ratio on PCM
payloads, where zlib had been half of a pipeline's time (docs/performance.md). The
output is ordinary gzip (fixed header, no timestamp), so every reader takes it
and reruns are byte-identical.

Every shard's bytes are checksummed as they are written (CRC32C, the checksum
GCS keeps for every object), and an uncompressed shard gets a record index
beside it (`<shard>.idx`): one `offset size` line per record, in bytes, the
text format of DALI's `tfrecord2idx`. A reader seeks with it to any record
(exact resume, a global shuffle) without scanning the shard; offsets into a
gzip stream could not be seeked to, so a gzip shard has none. The index
format and its reader are transforms/format/record_index.py.
"""

from __future__ import annotations

import struct
from typing import Iterator

import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from isal import isal_zlib

from transforms.format.record_index import FRAME_OVERHEAD, index_text, masked_crc32c
from transforms.format.records import RecordStream

__all__ = ["INDEX_SUFFIX", "TFRecordWriter", "read_tfrecords"]

INDEX_SUFFIX = ".idx"
# Frames are gathered up to this much before one compress and write. Larger
# buffers are slower, not faster: glibc gives their memory back after every
# flush and the next one faults it in again (8 MiB: +45% time on payloads).
_WRITE_BUFFER = 1 << 20
_GZIP_WBITS = 31  # deflate inside a gzip header and trailer


def _frame(record: bytes) -> tuple:
    """One TFRecord's parts: length, masked CRC32C of the length, data, masked CRC32C
    of the data. Not joined: the writer's flush copies them once."""
    length = struct.pack("<Q", len(record))
    return (length, struct.pack("<I", masked_crc32c(length)), record,
            struct.pack("<I", masked_crc32c(record)))


class TFRecordWriter:
    """Streams records into one TFRecord file (`compression` gzip or none), and
    an uncompressed one's record index into `path` + INDEX_SUFFIX when closed.

        with TFRecordWriter(path, "gzip") as writer:
            writer.write(serialized)
        writer.num_records, writer.num_bytes, writer.crc32c
    """

    def __init__(self, path: str, compression: str):
        self._file = FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
        self._compressor = (isal_zlib.compressobj(isal_zlib.ISAL_DEFAULT_COMPRESSION,
                                                  isal_zlib.DEFLATED, _GZIP_WBITS)
                            if compression == "gzip" else None)
        self.path = path
        self._pending: list = []
        self._pending_bytes = 0
        self._crc = 0
        self._record_sizes: list | None = [] if compression == "none" else None
        self.num_records = 0
        self.num_bytes = 0  # records, before framing and compression
        self.crc32c = ""    # set on close
        self.index_crc32c: str | None = None

    def write(self, record: bytes) -> None:
        self.num_records += 1
        self.num_bytes += len(record)
        if self._record_sizes is not None:
            self._record_sizes.append(len(record))
        if len(record) >= _WRITE_BUFFER:
            # A large record is not copied into the buffer: its frame goes out
            # as it is, or through the compressor in buffer-sized pieces.
            self._flush()
            for part in _frame(record):
                if self._compressor is None:
                    self._write(part)
                    continue
                view = memoryview(part)
                for start in range(0, len(view), _WRITE_BUFFER):
                    self._write(view[start:start + _WRITE_BUFFER])
            return
        self._pending += _frame(record)
        self._pending_bytes += len(record) + FRAME_OVERHEAD
        if self._pending_bytes >= _WRITE_BUFFER:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._write(b"".join(self._pending))
        self._pending, self._pending_bytes = [], 0

    def _write(self, data) -> None:
        if self._compressor:
            data = self._compressor.compress(data)
        self._crc = google_crc32c.extend(self._crc, data)
        self._file.write(data)

    def close(self) -> None:
        self._flush()
        if self._compressor:
            tail = self._compressor.flush()
            self._crc = google_crc32c.extend(self._crc, tail)
            self._file.write(tail)
        self._file.close()
        self.crc32c = f"{self._crc:08x}"
        if self._record_sizes is not None:
            index = index_text(self._record_sizes).encode("ascii")
            with FileSystems.create(self.path + INDEX_SUFFIX,
                                    compression_type=CompressionTypes.UNCOMPRESSED) as f:
                f.write(index)
            self.index_crc32c = f"{google_crc32c.value(index):08x}"

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_tfrecords(path: str) -> Iterator[bytes]:
    """The records of an uncompressed TFRecord file, read and checked as
    verify reads them (transforms/format/records.py): ValueError naming the
    file at its first problem."""
    def chunks():
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            while chunk := f.read(_WRITE_BUFFER):
                yield chunk

    stream = RecordStream(chunks(), "none")
    for record in stream:
        if stream.problems:
            break
        yield record.data
    if stream.problems:
        raise ValueError(f"{path}: {stream.problems[0]}")

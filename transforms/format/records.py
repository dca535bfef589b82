"""A TFRecord file's bytes -> its records, with every checksum on the way checked.

Beam-free. `RecordStream` reads a shard as TensorFlow's reader would, from
the raw bytes up: it takes the CRC32C of the file as stored (what the
manifest and GCS keep), inflates a gzip file (whose trailer holds the CRC32
and length of the data), and cuts the records out of their frames, checking
the length's and the record's masked CRC32C. What is wrong goes to
`problems` with the byte where it is, and the stream goes on where it
still can: a record that fails its CRC is reported and skipped, but after a
length that fails its CRC no frame can be trusted, so nothing more is read.
"""

from __future__ import annotations

import struct
from typing import Iterable, Iterator, NamedTuple

import google_crc32c
from isal import isal_zlib

from transforms.format.record_index import FRAME_OVERHEAD, masked_crc32c

__all__ = ["Record", "RecordStream", "StoredFile"]

_GZIP_WBITS = 31
_HEADER = 12  # the length and its CRC


class Record(NamedTuple):
    """The `number`-th record of a file, whose frame starts at byte `offset` of
    the uncompressed stream (None where a format does not say: ArrayRecord)."""

    number: int
    offset: int | None
    data: bytes


class StoredFile:
    """A shard file read from its raw `chunks`, its records checked by a
    subclass as they are iterated; once iterated, `crc32c` (8 hex digits, of
    the file as stored), `sizes` (every record's size, intact or not) and
    `problems`."""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks = chunks
        self._crc = 0
        self.sizes: list = []
        self.problems: list = []

    @property
    def crc32c(self) -> str:
        return f"{self._crc:08x}"

    def _stored(self) -> Iterator[bytes]:
        """The file's bytes, each through the CRC."""
        for chunk in self._chunks:
            self._crc = google_crc32c.extend(self._crc, chunk)
            yield chunk


class RecordStream(StoredFile):
    """The intact records of one TFRecord file, from its raw `chunks`
    (`compression` gzip or none): see StoredFile."""

    def __init__(self, chunks: Iterable[bytes], compression: str):
        super().__init__(chunks)
        self._gzip = compression == "gzip"

    def _payload(self) -> Iterator[bytes]:
        """The uncompressed bytes; every stored byte passes through the CRC, even
        after the data is found broken."""
        stored = self._stored()
        if not self._gzip:
            yield from stored
            return
        inflate, broken, trailing = isal_zlib.decompressobj(_GZIP_WBITS), False, 0
        for chunk in stored:
            if broken or inflate.eof:
                trailing += len(chunk)
                continue
            try:
                yield inflate.decompress(chunk)
            except isal_zlib.error as e:
                self.problems.append(f"the gzip stream is corrupt: {e}")
                broken = True
        if broken:
            return
        if not inflate.eof:
            self.problems.append("the gzip stream ends early: the file is truncated")
        elif trailing or inflate.unused_data:
            self.problems.append(f"{trailing + len(inflate.unused_data)} bytes follow the end "
                                 "of the gzip stream")

    def __iter__(self) -> Iterator[Record]:
        buffer, at, offset = b"", 0, 0  # `at` in buffer is `offset` in the stream
        lost = False
        for data in self._payload():
            if lost:
                continue  # drained only for the file's CRC
            buffer = buffer[at:] + data
            at = 0
            while len(buffer) - at >= _HEADER:
                length = buffer[at:at + 8]
                if struct.unpack("<I", buffer[at + 8:at + 12])[0] != masked_crc32c(length):
                    self.problems.append(f"byte {offset}: no record starts here (its length "
                                         "fails its CRC); the rest of the file is unreadable")
                    lost = True
                    break
                (size,) = struct.unpack("<Q", length)
                end = at + size + FRAME_OVERHEAD
                if len(buffer) < end:
                    break
                record = buffer[at + _HEADER:end - 4]
                number = len(self.sizes)
                self.sizes.append(size)
                if struct.unpack("<I", buffer[end - 4:end])[0] == masked_crc32c(record):
                    yield Record(number, offset, record)
                else:
                    self.problems.append(f"record {number} (byte {offset}): fails its CRC")
                offset += end - at
                at = end
        if not lost and len(buffer) > at:
            self.problems.append(f"byte {offset}: the file ends inside a record: it is truncated")

"""ArrayRecord files: a streaming writer with the TFRecord writer's counts and checksum.

ArrayRecord's writer (`array_record` on PyPI, Google's C++ behind TFDS and
Grain) opens local files only, so a shard bound for gs:// is written to a
local spool file and copied up when closed; a local one is written in place.
Records go in chunks of one (`group_size:1`, what Grain and TFDS's data
sources read fastest) and uncompressed, as our TFRecord shards are. The
file's CRC32C (the checksum GCS keeps and the manifest records) is taken as
the closed file is read back, or copied up.
"""

from __future__ import annotations

import os
import tempfile

import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from array_record.python.array_record_module import ArrayRecordWriter

from transforms.storage.folders import is_local

__all__ = ["WRITER_OPTIONS", "ArrayRecordShardWriter"]

WRITER_OPTIONS = "group_size:1,uncompressed"
_COPY_BUFFER = 1 << 20


class ArrayRecordShardWriter:
    """Streams records into one ArrayRecord file at `path` (local or any Beam filesystem).

        with ArrayRecordShardWriter(path) as writer:
            writer.write(serialized)
        writer.num_records, writer.num_bytes, writer.crc32c
    """

    index_crc32c = None  # its index is inside the file

    def __init__(self, path: str):
        self.path = path
        if is_local(path):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._local, self._spooled = path, False
        else:
            spool, self._local = tempfile.mkstemp(suffix=".array_record")
            os.close(spool)
            self._spooled = True
        self._writer = ArrayRecordWriter(self._local, WRITER_OPTIONS)
        if not self._writer.ok():
            raise IOError(f"{path}: ArrayRecord could not open {self._local} for writing")
        self.num_records = 0
        self.num_bytes = 0  # records, before framing
        self.crc32c = ""    # set on close

    def write(self, record: bytes) -> None:
        self._writer.write(record)
        self.num_records += 1
        self.num_bytes += len(record)

    def close(self) -> None:
        self._writer.close()
        crc = 0
        try:
            with open(self._local, "rb") as local:
                upload = (FileSystems.create(self.path,
                                             compression_type=CompressionTypes.UNCOMPRESSED)
                          if self._spooled else None)
                while chunk := local.read(_COPY_BUFFER):
                    crc = google_crc32c.extend(crc, chunk)
                    if upload is not None:
                        upload.write(chunk)
                if upload is not None:
                    upload.close()
        finally:
            if self._spooled:
                os.remove(self._local)
        self.crc32c = f"{crc:08x}"

    def __enter__(self) -> "ArrayRecordShardWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

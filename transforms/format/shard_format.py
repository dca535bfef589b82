"""What a dataset's shard files are: TFRecord (plain or gzip) or ArrayRecord.

Beam-free: the writer, the manifest, verify and the reader share it.

- **TFRecord** (the default): a stream of framed records, what tf.data, Keras,
  TFDS's `as_dataset` and DALI read. Uncompressed shards get a record index
  beside them (`<shard>.idx`) for seeking; gzip shards are smaller and can
  only be streamed.
- **ArrayRecord** (`array_record` on PyPI): records in chunks of one, with an
  index in the file's footer, so any record is one seek away. TFDS's
  `as_data_source` and Grain read it by index (JAX training loops, a uniform
  shuffle without a buffer). Its chunks are stored uncompressed, as ours are,
  so a shard holds the same records in about the same bytes.
"""

from __future__ import annotations

import dataclasses

__all__ = ["COMPRESSIONS", "FILE_FORMATS", "ShardFormat", "compressions_of"]

COMPRESSIONS = ("none", "gzip")
FILE_FORMATS = ("tfrecord", "array_record")
_SUFFIXES = {("tfrecord", "none"): ".tfrecord", ("tfrecord", "gzip"): ".tfrecord.gz",
             ("array_record", "none"): ".array_record"}


def compressions_of(file_format: str) -> tuple:
    """The compressions a file format's shards can be written with."""
    return tuple(c for f, c in _SUFFIXES if f == file_format)


@dataclasses.dataclass(frozen=True)
class ShardFormat:
    """A shard file's format and compression; ValueError for a pair that has none.

    >>> ShardFormat().suffix, ShardFormat("array_record").suffix
    ('.tfrecord', '.array_record')
    >>> ShardFormat("array_record", "gzip")
    Traceback (most recent call last):
    ValueError: array_record shards are written with compression 'none', not 'gzip'
    """

    file_format: str = "tfrecord"
    compression: str = "none"

    def __post_init__(self):
        if self.file_format not in FILE_FORMATS:
            raise ValueError(f"file_format {self.file_format!r}: expected one of {FILE_FORMATS}")
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"compression {self.compression!r}: expected one of {COMPRESSIONS}")
        if self.compression not in compressions_of(self.file_format):
            allowed = " or ".join(map(repr, compressions_of(self.file_format)))
            raise ValueError(f"{self.file_format} shards are written with compression {allowed}, "
                             f"not {self.compression!r}")

    def __str__(self) -> str:
        """What a person reads: `tfrecord, compression none`."""
        return f"{self.file_format}, compression {self.compression}"

    @property
    def suffix(self) -> str:
        """The shard files' suffix: `.tfrecord`, `.tfrecord.gz`, `.array_record`."""
        return _SUFFIXES[(self.file_format, self.compression)]

    @property
    def array_record(self) -> bool:
        return self.file_format == "array_record"

    @property
    def has_record_index(self) -> bool:
        """Whether each shard has a `<shard>.idx` beside it (plain TFRecord);
        ArrayRecord keeps its index inside the file."""
        return self == ShardFormat()

    @property
    def seekable(self) -> bool:
        """Whether a reader can go straight to any record (global shuffle, shard, start)."""
        return self.has_record_index or self.array_record

    @property
    def tfds_readable(self) -> bool:
        """Whether TFDS reads these shards (uncompressed TFRecord or ArrayRecord)."""
        return self.compression == "none"

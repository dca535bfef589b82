"""One shard against its manifest entry: `check_shard`, and `VerifyShards` running it.

Per shard, a verification reads every byte once (transforms/format/records.py,
or ArrayRecord's own reader: transforms/format/array_records.py) and checks
that:

- every record's framing and CRCs, and a gzip file's stream and trailer, hold
  (an ArrayRecord file's chunk hashes);
- the file's CRC32C is the one the writer recorded in the manifest (CRC32C,
  as GCS keeps for every object: `gsutil hash -c` shows the same);
- the records are as many, and hold as many bytes, as the manifest says;
- the record index, if the shard has one, is byte for byte what the records
  make, and its CRC32C the manifest's;
- every record is a tf.train.Example of the manifest's spec, its values meet
  every --keep clause the writer applied, and the media of a seeded sample of
  them decode (transforms/verify/examples.py).

It also notes which of the `sought` recordings (the duplicate check's list)
its records come from, by their `source_key`.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, Iterator, Mapping, NamedTuple

import apache_beam as beam
import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms.format.array_records import ArrayRecordStream
from transforms.format.example_check import example_problems, parse_example, stored_values
from transforms.format.record_index import index_text
from transforms.format.records import RecordStream
from transforms.format.sample import SOURCE_KEY
from transforms.format.shard_format import ShardFormat
from transforms.format.spec import FeatureSpec
from transforms.recipe.keep import KeepFilter
from transforms.storage.folders import is_local
from transforms.verify.augmentation import AugmentedRange, record_problems
from transforms.verify.examples import media_problems

__all__ = ["ShardReport", "VerifyShards", "check_shard", "chosen_for_decoding"]

_READ_CHUNK = 8 << 20
# Problems listed per shard: a shard broken throughout says so in a few lines.
_PROBLEMS_SHOWN = 10


class ShardReport(NamedTuple):
    """What verifying one shard found."""

    file: str            # relative to the dataset
    num_records: int     # intact records read
    num_bytes: int       # their bytes
    num_decoded: int     # records whose media were decoded
    problems: tuple      # each "file: what is wrong"
    found: tuple = ()    # the `sought` source keys its records hold
    augmented: int = 0   # its records that are augmented copies


def chosen_for_decoding(seed: int, file: str, number: int, fraction: float) -> bool:
    """Whether record `number` of `file` is in the seeded sample whose media are
    decoded: the same records on every run and runner with this seed."""
    return zlib.crc32(f"{seed}/{file}/{number}".encode()) < fraction * 2**32


def _chunks(path: str) -> Iterator[bytes]:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        while chunk := f.read(_READ_CHUNK):
            yield chunk


def _read(path: str) -> bytes:
    return b"".join(_chunks(path))


def _records(path: str, shard_format: ShardFormat, read_chunks: Callable):
    """The stream of the shard at `path`'s records."""
    if not shard_format.array_record:
        return RecordStream(read_chunks(path), shard_format.compression)
    return ArrayRecordStream(read_chunks(path), path if is_local(path) else None)


def check_shard(root: str, entry: Mapping[str, Any], spec: FeatureSpec, shard_format: ShardFormat,
                decode: Callable[[int], bool], read_chunks: Callable = _chunks,
                read_file: Callable = _read, sought: frozenset = frozenset(),
                augmented: AugmentedRange | None = None,
                classes: Mapping[str, int] | None = None,
                keep: KeepFilter | None = None) -> ShardReport:
    """Verifies the shard of manifest `entry` under `root`, each record against
    the spec, its declared `classes` and the `keep` filter; `decode(number)` says
    whether to decode a record's media; the report says which `sought` source
    keys it holds, and with `augmented` how many copies, each record's aug.*
    values checked (transforms/verify/augmentation.py). `read_chunks(path)`
    yields a file's bytes, `read_file(path)` returns them (Beam's filesystems
    by default)."""
    name = entry["file"]
    kinds = {f.name: f.kind for f in spec}
    problems, decoded, num_bytes, found_keys, copies = [], 0, 0, set(), 0
    stream = _records(f"{root}/{name}", shard_format, read_chunks)
    for record in stream:
        num_bytes += len(record.data)
        where = f"record {record.number}" + (f" (byte {record.offset})"
                                             if record.offset is not None else "")
        try:
            example = parse_example(record.data)
        except ValueError as e:
            problems.append(f"{where}: {e}")
            continue
        found = example_problems(example, spec, classes)
        if not found and keep:
            found = _keep_problems(example, kinds, keep)
        if sought and not found:
            found_keys.update(key.decode() for key in stored_values(example, SOURCE_KEY, "bytes")
                              if key.decode() in sought)
        if not found and augmented is not None:
            copy, found = record_problems(example, augmented)
            copies += copy
        if not found and decode(record.number):
            count, found = media_problems(example, spec)
            decoded += count > 0
        problems += [f"{where}: {p}" for p in found]
    problems = stream.problems + problems
    num_records = len(stream.sizes)
    if entry.get("crc32c") and stream.crc32c != entry["crc32c"]:
        problems.append(f"its CRC32C is {stream.crc32c}, the manifest's {entry['crc32c']}")
    if num_records != entry["num_examples"]:
        problems.append(f"{num_records} records, the manifest says {entry['num_examples']}")
    elif sum(stream.sizes) != entry["num_bytes"]:
        problems.append(f"{sum(stream.sizes)} bytes of records, the manifest says "
                        f"{entry['num_bytes']}")
    if entry.get("index"):
        problems += _index_problems(root, entry["index"], stream.sizes, read_file)
    shown = [f"{name}: {p}" for p in problems[:_PROBLEMS_SHOWN]]
    if len(problems) > _PROBLEMS_SHOWN:
        shown.append(f"{name}: … and {len(problems) - _PROBLEMS_SHOWN} more problems")
    return ShardReport(name, num_records, num_bytes, decoded, tuple(shown),
                       tuple(sorted(found_keys)), copies)


def _keep_problems(example, kinds: Mapping[str, str], keep: KeepFilter) -> list:
    """The --keep clauses a record that passed its spec ({feature: kind}) fails."""
    problems = []
    for clause in keep.clauses:
        value = stored_values(example, clause.name, kinds[clause.name])[0]
        if not clause.holds(value):
            problems.append(f"feature {clause.name!r} is {value:g}, which the writer's "
                            f"--keep '{clause}' removes")
    return problems


def _index_problems(root: str, index: Mapping[str, str], sizes: list,
                    read_file: Callable) -> list:
    try:
        text = read_file(f"{root}/{index['file']}")
    except (OSError, IOError):  # listed as missing by the layout check
        return []
    problems = []
    if f"{google_crc32c.value(text):08x}" != index["crc32c"]:
        problems.append(f"its index {index['file']} fails the manifest's CRC32C")
    if text != index_text(sizes).encode("ascii"):
        problems.append(f"its index {index['file']} does not match its records")
    return problems


class _CheckShardFn(beam.DoFn):
    def __init__(self, root: str, spec: FeatureSpec, shard_format: ShardFormat,
                 decode_fraction: float, seed: int, sought: frozenset,
                 augmented: AugmentedRange | None, classes: Mapping[str, int],
                 keep: KeepFilter | None):
        self._root = root
        self._keep = keep
        self._classes = classes
        self._sought = sought
        self._augmented = augmented
        self._spec = spec
        self._format = shard_format
        self._fraction = decode_fraction
        self._seed = seed

    def process(self, entry: dict) -> Iterator[ShardReport]:
        def decode(number: int) -> bool:
            return chosen_for_decoding(self._seed, entry["file"], number, self._fraction)

        report = check_shard(self._root, entry, self._spec, self._format, decode,
                             sought=self._sought, augmented=self._augmented,
                             classes=self._classes, keep=self._keep)
        beam.metrics.Metrics.counter("datagen", "records_verified").inc(report.num_records)
        yield report


class VerifyShards(beam.PTransform):
    """Manifest shard entries -> a ShardReport each (see `check_shard`), the
    shards spread over the workers. Each record is held to the spec, its
    declared `classes` and the `keep` filter; its media are decoded with
    probability `decode_fraction`, chosen by `seed`; the `sought` source keys
    found are reported, and with `augmented` the copies."""

    def __init__(self, root: str, spec: FeatureSpec, shard_format: ShardFormat,
                 decode_fraction: float, seed: int = 0, sought: frozenset = frozenset(),
                 augmented: AugmentedRange | None = None,
                 classes: Mapping[str, int] | None = None,
                 keep: KeepFilter | None = None):
        super().__init__()
        self._fn = _CheckShardFn(root, spec, shard_format, decode_fraction, seed, sought,
                                 augmented, dict(classes or {}), keep)

    def expand(self, entries):
        return (entries
                | "Spread" >> beam.Reshuffle()
                | "CheckShard" >> beam.ParDo(self._fn))

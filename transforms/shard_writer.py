"""Sharded TFRecord writing: deterministic, balanced, never an empty shard.

Every example carries a 64-bit order key (a stable hash). Per split, a combine
builds a histogram of order keys over hash buckets (32-bit buckets, coarsened
only when a split has more than 65,536 distinct ones), from which a shard plan
cuts the bucket range into `n` contiguous, non-empty runs of about equal count.
Examples are then grouped by (split, shard), sorted by order key and written
to temporary files that `commit_shards` renames into place once every shard is
complete (and again, harmlessly, if the runner retries it): the same input
gives byte-identical shards on every run and runner, and no reader ever sees a
partial file.

The payload crosses one shuffle; the plan's side input is a few ints per shard.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import struct
from typing import Iterable

import apache_beam as beam
import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from isal import isal_zlib

from transforms.counters import counter
from transforms.fileops import ensure_dir

__all__ = ["WriteShards", "ShardPlan", "plan_shards", "commit_shards", "shard_name", "tfrecord_frame"]

_START_BITS = 32
_MAX_BUCKETS = 1 << 16
_WRITE_BUFFER = 8 << 20
_SUFFIX = {"gzip": ".tfrecord.gz", "none": ".tfrecord"}
_GZIP_WBITS = 31  # deflate inside a gzip header and trailer


def shard_name(split: str, index: int, num_shards: int, compression: str) -> str:
    """`train/data-00003-of-00008.tfrecord.gz`, relative to the output directory."""
    return f"{split}/data-{index:05d}-of-{num_shards:05d}{_SUFFIX[compression]}"


def _masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_frame(record: bytes) -> bytes:
    """One TFRecord: length, masked CRC32C of the length, data, masked CRC32C of the data."""
    length = struct.pack("<Q", len(record))
    return b"".join((length, struct.pack("<I", _masked_crc(length)), record,
                     struct.pack("<I", _masked_crc(record))))


# -- planning --------------------------------------------------------------------


def _coarsen(acc: list, bits: int) -> None:
    if bits >= acc[0]:
        return
    shift = acc[0] - bits
    merged: dict = {}
    for bucket, count in acc[1].items():
        merged[bucket >> shift] = merged.get(bucket >> shift, 0) + count
    acc[0], acc[1] = bits, merged


class _BucketHistogram(beam.CombineFn):
    """(order key, size) -> (bits, sorted ((bucket, count), ...), examples, bytes).

    The precision it ends at depends only on the set of keys (a subset never
    needs coarser buckets than the whole), so the plan is deterministic however
    the runner splits the work.
    """

    def create_accumulator(self):
        return [_START_BITS, {}, 0, 0]

    def add_input(self, acc, element):
        order, size = element
        bucket = order >> (64 - acc[0])
        acc[1][bucket] = acc[1].get(bucket, 0) + 1
        acc[2] += 1
        acc[3] += size
        while len(acc[1]) > _MAX_BUCKETS:
            _coarsen(acc, acc[0] - 1)
        return acc

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        merged = [min(a[0] for a in accumulators), {}, 0, 0]
        for acc in accumulators:
            _coarsen(acc, merged[0])
            for bucket, count in acc[1].items():
                merged[1][bucket] = merged[1].get(bucket, 0) + count
            merged[2] += acc[2]
            merged[3] += acc[3]
        while len(merged[1]) > _MAX_BUCKETS:
            _coarsen(merged, merged[0] - 1)
        return merged

    def extract_output(self, acc):
        return acc[0], tuple(sorted(acc[1].items())), acc[2], acc[3]


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """Where each order key goes: shard j holds buckets from first_buckets[j] on."""

    bits: int
    first_buckets: tuple

    @property
    def num_shards(self) -> int:
        return len(self.first_buckets)

    def shard_of(self, order: int) -> int:
        return bisect.bisect_right(self.first_buckets, order >> (64 - self.bits)) - 1


def plan_shards(histogram: tuple, target_shard_bytes: int, num_shards: int = 0) -> ShardPlan:
    """Cuts a split's bucket histogram into shards of about equal example count.

    The count is `num_shards` when given, else enough shards of about
    `target_shard_bytes`; never more than the non-empty buckets (so never an
    empty shard, and so at most one shard per example).
    """
    bits, buckets, num_examples, num_bytes = histogram
    wanted = num_shards or max(1, math.ceil(num_bytes / target_shard_bytes))
    n = min(wanted, len(buckets))
    # Bucket i goes to shard f(i): non-decreasing, steps of at most one, from 0
    # to n-1, following the count-balanced ideal g(i) = start_i * n // total.
    first_buckets, shard, start = [0], 0, 0
    for i, (bucket, count) in enumerate(buckets):
        if i:
            ideal = max(start * n // num_examples, n - len(buckets) + i)
            if min(shard + 1, ideal) > shard:
                shard += 1
                first_buckets.append(bucket)
        start += count
    return ShardPlan(bits, tuple(first_buckets))


# -- writing ---------------------------------------------------------------------


def write_tfrecords(path: str, records: Iterable[bytes], compression: str) -> int:
    """Writes records as one TFRecord file through Beam's filesystems; returns bytes of data.

    GZIP is deflated by ISA-L (python-isal) at its default level: measured ~13x
    faster than zlib's default level at the same ratio on PCM payloads, where
    zlib was half the pipeline's time. The output is ordinary gzip (fixed
    header, no timestamp), so every reader takes it and reruns are identical.
    """
    compressor = (isal_zlib.compressobj(isal_zlib.ISAL_DEFAULT_COMPRESSION, isal_zlib.DEFLATED,
                                        _GZIP_WBITS) if compression == "gzip" else None)
    total, pending, pending_size = 0, [], 0
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        def flush():
            data = b"".join(pending)
            f.write(compressor.compress(data) if compressor else data)

        for record in records:
            frame = tfrecord_frame(record)
            pending.append(frame)
            pending_size += len(frame)
            total += len(record)
            if pending_size >= _WRITE_BUFFER:
                flush()
                pending, pending_size = [], 0
        flush()
        if compressor:
            f.write(compressor.flush())
    return total


class _WriteShardFn(beam.DoFn):
    """((split, shard, num_shards), [(order, bytes)]) -> shard metadata; writes a temp file."""

    def __init__(self, temp_dir: str, compression: str):
        self._temp_dir = temp_dir
        self._compression = compression

    def process(self, element):
        (split, index, num_shards), examples = element
        # Sorting by (order, bytes) fixes the order whatever the arrival order;
        # equal order keys only come from duplicate sample keys.
        examples = sorted(examples)
        name = shard_name(split, index, num_shards, self._compression)
        temp = FileSystems.join(self._temp_dir, name.replace("/", "-"))
        num_bytes = write_tfrecords(temp, (e for _, e in examples), self._compression)
        counter("shards_written").inc()
        yield {"split": split, "index": index, "num_shards": num_shards, "file": name,
               "temp": temp, "num_examples": len(examples), "num_bytes": num_bytes}


class WriteShards(beam.PTransform):
    """(split, order key, serialized example) -> one metadata dict per written shard.

    Shards go to `temp_dir`; `commit_shards` moves them into place. Shard count
    per split comes from `num_shards` or from `target_shard_bytes`.
    """

    def __init__(self, temp_dir: str, compression: str = "gzip",
                 target_shard_bytes: int = 128 << 20, num_shards: int = 0):
        super().__init__()
        if compression not in _SUFFIX:
            raise ValueError(f"compression {compression!r}: expected one of {sorted(_SUFFIX)}")
        self._temp_dir = temp_dir
        self._compression = compression
        self._target = target_shard_bytes
        self._num_shards = num_shards

    def expand(self, examples):
        target, num_shards = self._target, self._num_shards
        plans = (
            examples
            | "OrderKeysAndSizes" >> beam.Map(lambda e: (e[0], (e[1], len(e[2]))))
            | "HistogramPerSplit" >> beam.CombinePerKey(_BucketHistogram())
            | "PlanShards" >> beam.MapTuple(
                lambda split, hist: (split, plan_shards(hist, target, num_shards))))

        def assign(example, plans):
            split, order, serialized = example
            plan = plans[split]
            return (split, plan.shard_of(order), plan.num_shards), (order, serialized)

        return (
            examples
            | "AssignShard" >> beam.Map(assign, plans=beam.pvalue.AsDict(plans))
            | "GroupByShard" >> beam.GroupByKey()
            # ((split, shard, num_shards), iterable of (order, serialized))
            | "WriteShard" >> beam.ParDo(_WriteShardFn(self._temp_dir, self._compression)))


def _names(pattern: str) -> set:
    """Base names of the files matching `pattern` (one listing, also on gs://)."""
    return {FileSystems.split(m.path)[1]
            for m in FileSystems.match([pattern])[0].metadata_list}


def commit_shards(shards: list, output_dir: str, split_names=()) -> dict:
    """Renames temp shards into place; returns the manifest's per-split entries.

    Idempotent, so a runner may retry it after a failure partway (a GCS rename
    is a copy and a delete per file, and any request can fail): a shard whose
    temp file is gone and whose final file is there was moved by the earlier
    attempt. Afterwards, data files of an earlier run that this one did not
    overwrite are removed from every split directory (those of `shards` and
    of `split_names`), so each holds exactly what the manifest lists.
    """
    ordered = sorted(shards, key=lambda s: (s["split"], s["index"]))
    splits = sorted({s["split"] for s in ordered} | set(split_names))
    temps = set().union(*(_names(FileSystems.join(d, "*"))
                          for d in {FileSystems.split(s["temp"])[0] for s in ordered}))
    present = {split: _names(FileSystems.join(output_dir, split, "data-*")) for split in splits}
    pending, moved = [], []
    for s in ordered:
        (pending if FileSystems.split(s["temp"])[1] in temps else moved).append(s)
    lost = [s["file"] for s in moved if FileSystems.split(s["file"])[1] not in present[s["split"]]]
    if lost:
        raise IOError(f"shards {lost} are neither in the temp folder nor in {output_dir}")
    for split in sorted({s["split"] for s in pending}):
        ensure_dir(FileSystems.join(output_dir, split))
    if pending:
        FileSystems.rename([s["temp"] for s in pending],
                           [FileSystems.join(output_dir, s["file"]) for s in pending])
    written = {(s["split"], FileSystems.split(s["file"])[1]) for s in ordered}
    stale = [FileSystems.join(output_dir, split, name) for split in splits
             for name in sorted(present[split]) if (split, name) not in written]
    if stale:
        FileSystems.delete(stale)
    result = {}
    for s in ordered:
        entry = result.setdefault(s["split"], {"num_examples": 0, "num_bytes": 0, "shards": []})
        entry["num_examples"] += s["num_examples"]
        entry["num_bytes"] += s["num_bytes"]
        entry["shards"].append({"file": s["file"], "num_examples": s["num_examples"],
                                "num_bytes": s["num_bytes"]})
    return result

"""The global layout (`--shuffle global`): every shard a uniform, hash-ordered
sample of its split, at the cost of shuffling every example.

Every example carries a 64-bit order key (a stable hash). Per split, a combine
builds a histogram of order keys over hash buckets (32-bit buckets, coarsened
only when a split has more than 65,536 distinct ones), from which a shard plan
cuts the bucket range into `n` contiguous, non-empty runs of about equal count.
Examples are then grouped by (split, shard), sorted by order key and written
to temporary files that the final step moves into place: the same input gives
byte-identical shards on every run and runner, and no reader ever sees a
partial file.

The payload crosses one shuffle and a second materialisation (the plan's side
input is read against every example), which on the local runner holds the whole
split in memory; the default layout (transforms/writer/convert.py) writes where the
examples are built instead.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import uuid
from typing import Iterable, NamedTuple, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from transforms.format.shard_format import ShardFormat
from transforms.recipe.examples import Example
from transforms.recipe.units import SHARD_SIZE_BYTES
from transforms.runner.counters import counter
from transforms.writer.shard_files import ShardRecord, write_shard

__all__ = ["Histogram", "ShardPlan", "WriteShards", "plan_shards"]

_START_BITS = 32
_MAX_BUCKETS = 1 << 16


# -- planning --------------------------------------------------------------------


class Histogram(NamedTuple):
    """A split's order keys counted in buckets of their top `bits` bits."""

    bits: int
    buckets: tuple  # ((bucket, count), ...), sorted, no zero counts
    num_examples: int
    num_bytes: int


@dataclasses.dataclass
class _Counts:
    """_BucketHistogram's accumulator."""

    bits: int = _START_BITS
    counts: dict = dataclasses.field(default_factory=dict)
    num_examples: int = 0
    num_bytes: int = 0

    def add(self, bucket: int, count: int) -> None:
        self.counts[bucket] = self.counts.get(bucket, 0) + count

    def coarsen(self, bits: int) -> None:
        """Re-counts in `bits`-bit buckets (no-op if that is no coarser)."""
        if bits >= self.bits:
            return
        shift, counts = self.bits - bits, self.counts
        self.bits, self.counts = bits, {}
        for bucket, count in counts.items():
            self.add(bucket >> shift, count)

    def bound(self) -> None:
        while len(self.counts) > _MAX_BUCKETS:
            self.coarsen(self.bits - 1)


@beam.typehints.with_output_types(Histogram)
class _BucketHistogram(beam.CombineFn):
    """(order key, size) -> the split's Histogram.

    The precision it ends at depends only on the set of keys (a subset never
    needs coarser buckets than the whole), so the plan is deterministic however
    the runner splits the work.
    """

    def create_accumulator(self):
        return _Counts()

    def add_input(self, acc, element):
        order, size = element
        acc.add(order >> (64 - acc.bits), 1)
        acc.num_examples += 1
        acc.num_bytes += size
        acc.bound()
        return acc

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        merged = _Counts(bits=min(a.bits for a in accumulators))
        for acc in accumulators:
            acc.coarsen(merged.bits)
            for bucket, count in acc.counts.items():
                merged.add(bucket, count)
            merged.num_examples += acc.num_examples
            merged.num_bytes += acc.num_bytes
        merged.bound()
        return merged

    def extract_output(self, acc):
        return Histogram(acc.bits, tuple(sorted(acc.counts.items())), acc.num_examples,
                         acc.num_bytes)


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


def plan_shards(histogram: Histogram, shard_size_bytes: int, num_shards: int = 0) -> ShardPlan:
    """Cuts a split's bucket histogram into shards of about equal example count.

    The count is `num_shards` when given, else enough shards of about
    `shard_size_bytes`; never more than the non-empty buckets (so never an
    empty shard, and so at most one shard per example).
    """
    bits, buckets, num_examples, num_bytes = histogram
    wanted = num_shards or max(1, math.ceil(num_bytes / shard_size_bytes))
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


@beam.typehints.with_input_types(Tuple[Tuple[str, int], Iterable[Tuple[int, bytes]]])
@beam.typehints.with_output_types(ShardRecord)
class _WriteShardFn(beam.DoFn):
    """((split, shard), [(order, bytes)]) -> its ShardRecord; writes a temp file."""

    def __init__(self, temp_dir: str, shard_format: ShardFormat):
        self._temp_dir = temp_dir
        self._format = shard_format

    def setup(self):
        self._shards = counter("shards_written")

    def process(self, element):
        (split, index), examples = element
        # Sorting by (order, bytes) fixes the order whatever the arrival order;
        # equal order keys only come from duplicate sample keys.
        examples = sorted(examples)
        # Unique per attempt: a retried bundle never writes over another's file.
        name = f"{split}-{index:05d}-{uuid.uuid4().hex[:12]}{self._format.suffix}"
        temp = FileSystems.join(self._temp_dir, name)
        shard = write_shard(temp, (e for _, e in examples), self._format, split, (index,))
        self._shards.inc()
        yield shard


class WriteShards(beam.PTransform):
    """Examples (transforms/recipe/examples.py) -> a ShardRecord per written shard.

    Shards go to `temp_dir`; the final step names and moves them. Shard count
    per split comes from `num_shards` or from `shard_size_bytes`.
    """

    def __init__(self, temp_dir: str, shard_format: ShardFormat,
                 shard_size_bytes: int = SHARD_SIZE_BYTES, num_shards: int = 0):
        super().__init__()
        self._temp_dir = temp_dir
        self._format = shard_format
        self._target = shard_size_bytes
        self._num_shards = num_shards

    def expand(self, examples):
        target, num_shards = self._target, self._num_shards
        plans = (
            examples
            | "OrderKeysAndSizes" >> beam.Map(lambda e: (e.split, (e.order, len(e.serialized))))
            | "HistogramPerSplit" >> beam.CombinePerKey(_BucketHistogram())
            | "PlanShards" >> beam.MapTuple(
                lambda split, hist: (split, plan_shards(hist, target, num_shards))))

        def assign(example: Example, plans):
            shard = plans[example.split].shard_of(example.order)
            return (example.split, shard), (example.order, example.serialized)

        return (
            examples
            | "AssignShard" >> beam.Map(assign, plans=beam.pvalue.AsDict(plans))
            | "GroupByShard" >> beam.GroupByKey()
            # ((split, shard), iterable of (order, serialized))
            | "WriteShard" >> beam.ParDo(_WriteShardFn(self._temp_dir, self._format)))

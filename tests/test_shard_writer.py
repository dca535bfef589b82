"""Shard planning and TFRecord framing, read back with TensorFlow's own reader."""

import random

import pytest
import tensorflow as tf

from transforms.shard_writer import _BucketHistogram, plan_shards, shard_name, write_tfrecords


def _histogram(orders, sizes=None, chunks=1):
    """Runs the CombineFn the way a runner may: several accumulators, then a merge."""
    fn = _BucketHistogram()
    sizes = sizes or [100] * len(orders)
    accs = []
    for c in range(chunks):
        acc = fn.create_accumulator()
        for order, size in list(zip(orders, sizes))[c::chunks]:
            acc = fn.add_input(acc, (order, size))
        accs.append(acc)
    return fn.extract_output(fn.merge_accumulators(accs))


def _shard_counts(orders, plan):
    counts = [0] * plan.num_shards
    for order in orders:
        counts[plan.shard_of(order)] += 1
    return counts


@pytest.mark.parametrize("num_examples, num_shards", [(1, 1), (3, 8), (8, 8), (100, 7), (5000, 64)])
def test_plan_gives_exact_non_empty_balanced_shards(num_examples, num_shards):
    rng = random.Random(num_examples)
    orders = [rng.getrandbits(64) for _ in range(num_examples)]
    plan = plan_shards(_histogram(orders), target_shard_bytes=1, num_shards=num_shards)
    counts = _shard_counts(orders, plan)
    assert plan.num_shards == min(num_shards, num_examples)
    assert min(counts) >= 1 and sum(counts) == num_examples
    ideal = num_examples / plan.num_shards
    assert max(counts) <= ideal + 2 and min(counts) >= ideal - 2


def test_plan_sizes_shards_by_target_bytes():
    rng = random.Random(1)
    orders = [rng.getrandbits(64) for _ in range(1000)]
    plan = plan_shards(_histogram(orders, sizes=[1000] * 1000), target_shard_bytes=300_000)
    assert plan.num_shards == 4  # ceil(1,000,000 / 300,000)


def test_histogram_coarsens_deterministically_however_it_is_split():
    rng = random.Random(7)
    orders = [rng.getrandbits(64) for _ in range(70_000)]  # > 65,536 distinct buckets
    one = _histogram(orders, chunks=1)
    three = _histogram(orders, chunks=3)
    assert one == three
    assert one[0] < 32 and len(one[1]) <= 1 << 16 and one[2] == 70_000
    plan = plan_shards(one, 1, num_shards=10)
    counts = _shard_counts(orders, plan)
    assert min(counts) > 6900 and max(counts) < 7100


def test_tfrecords_read_back_with_tensorflow(tmp_path):
    records = [b"", b"x", bytes(range(256)) * 100]
    for compression, tf_compression in (("gzip", "GZIP"), ("none", "")):
        path = str(tmp_path / f"data-{compression}")
        assert write_tfrecords(path, records, compression) == sum(map(len, records))
        back = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=tf_compression)]
        assert back == records


def test_shard_name():
    assert shard_name("train", 3, 8, "gzip") == "train/data-00003-of-00008.tfrecord.gz"
    assert shard_name("eval", 0, 1, "none") == "eval/data-00000-of-00001.tfrecord"

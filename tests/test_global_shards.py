"""Shard writing: TFRecord framing, rolling shards, naming in order, the global
layout's plan; everything read back with TensorFlow's own reader."""

import os
import random

import google_crc32c
import pytest
import tensorflow as tf

from transforms.format.record_index import RecordIndexError, parse_index
from transforms.format.shard_format import ShardFormat
from transforms.writer.commit import name_shards
from transforms.writer.global_shards import _BucketHistogram, plan_shards
from transforms.writer.rolling_shards import RollingShards
from transforms.writer.shard_files import ShardRecord, shard_name, write_shard

PLAIN, GZIP = ShardFormat(), ShardFormat("tfrecord", "gzip")


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
    plan = plan_shards(_histogram(orders), shard_size_bytes=1, num_shards=num_shards)
    counts = _shard_counts(orders, plan)
    assert plan.num_shards == min(num_shards, num_examples)
    assert min(counts) >= 1 and sum(counts) == num_examples
    ideal = num_examples / plan.num_shards
    assert max(counts) <= ideal + 2 and min(counts) >= ideal - 2


def test_plan_sizes_shards_by_target_bytes():
    rng = random.Random(1)
    orders = [rng.getrandbits(64) for _ in range(1000)]
    plan = plan_shards(_histogram(orders, sizes=[1000] * 1000), shard_size_bytes=300_000)
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
    for shard_format, tf_compression in ((GZIP, "GZIP"), (PLAIN, "")):
        path = str(tmp_path / f"data-{shard_format.compression}")
        shard = write_shard(path, records, shard_format, "train", (0,))
        assert shard.num_bytes == sum(map(len, records)) and shard.num_examples == 3
        back = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=tf_compression)]
        assert back == records


def test_shard_name():
    assert shard_name("train", 3, 8, GZIP) == "train/data-00003-of-00008.tfrecord.gz"
    assert shard_name("eval", 0, 1, PLAIN) == "eval/data-00000-of-00001.tfrecord"
    assert (shard_name("eval", 0, 1, ShardFormat("array_record"))
            == "eval/data-00000-of-00001.array_record")
    # TFDS's SHARD_X_OF_Y: five digits, more when the count needs them.
    assert shard_name("train", 7, 123456, PLAIN) == "train/data-000007-of-123456.tfrecord"


def _records(path, compression="GZIP"):
    return [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression)]


def test_rolling_shards_roll_before_the_target_and_keep_order(tmp_path):
    shards = RollingShards(str(tmp_path), order=(7,), shard_format=GZIP, shard_size_bytes=1000)
    written = {"train": [], "test": []}
    for i in range(50):
        split = "test" if i % 5 == 0 else "train"
        record = bytes([i]) * (100 + i)       # 100..149 bytes
        shards.write(split, record)
        written[split].append(record)
    shards.write("eval", b"x" * 3000)         # larger than the target: a shard of its own
    records = shards.close()
    assert records == sorted(records)  # by split, then order
    by_split = {}
    for r in records:
        assert r.order[0] == 7 and r.num_examples > 0
        assert r.num_bytes <= 1000 or r.num_examples == 1
        back = _records(r.temp)
        assert len(back) == r.num_examples and sum(map(len, back)) == r.num_bytes
        by_split.setdefault(r.split, []).extend(back)
    assert by_split == {**written, "eval": [b"x" * 3000]}   # every example, in order
    train = [r for r in records if r.split == "train"]
    # Each shard closed only when the next example (at most 149 bytes) would not fit.
    assert len(train) > 1 and all(r.num_bytes > 1000 - 149 for r in train[:-1])


def test_rolling_shards_of_two_attempts_never_share_a_file(tmp_path):
    paths = set()
    for _ in range(2):
        shards = RollingShards(str(tmp_path), order=(0,), shard_format=PLAIN, shard_size_bytes=100)
        shards.write("train", b"x")
        paths.update(r.temp for r in shards.close())
    assert len(paths) == 2


def test_shards_are_named_by_their_order_not_their_arrival():
    def shard(split, *order):
        return ShardRecord(split, order, f"/tmp/{split}{order}", 1, 1, "00000000")

    named = name_shards([shard("train", 2, 0), shard("test", 0, 0), shard("train", 0, 1),
                         shard("train", 0, 0)], GZIP)
    assert [(n.shard.split, n.shard.order, n.file) for n in named] == [
        ("test", (0, 0), "test/data-00000-of-00001.tfrecord.gz"),
        ("train", (0, 0), "train/data-00000-of-00003.tfrecord.gz"),
        ("train", (0, 1), "train/data-00001-of-00003.tfrecord.gz"),
        ("train", (2, 0), "train/data-00002-of-00003.tfrecord.gz")]


def test_uncompressed_shards_get_a_record_index_and_checksums(tmp_path):
    records = [b"", b"x" * 5, bytes(range(256)) * 5000]   # the last one > the write buffer
    path = str(tmp_path / "data.tfrecord")
    writer = write_shard(path, records, PLAIN, "train", (0,))
    data = open(path, "rb").read()
    index = open(path + ".idx", "rb").read()
    sizes = [len(r) + 16 for r in records]
    assert index.decode() == "".join(f"{sum(sizes[:i])} {s}\n" for i, s in enumerate(sizes))
    assert writer.crc32c == f"{google_crc32c.value(data):08x}"
    assert writer.index_crc32c == f"{google_crc32c.value(index):08x}"
    table = parse_index(index, "data.tfrecord.idx")
    assert [data[o + 12:o + s - 4] for o, s in table] == records
    gz = str(tmp_path / "data.tfrecord.gz")
    writer = write_shard(gz, records, GZIP, "train", (0,))
    assert writer.index_crc32c is None and not os.path.exists(gz + ".idx")
    assert writer.crc32c == f"{google_crc32c.value(open(gz, 'rb').read()):08x}"


@pytest.mark.parametrize("text, problem", [
    (b"0 17\n17\n", "not a record index"),
    (b"0 17\n18 17\n", "do not follow one another"),
    (b"4 17\n", "do not follow one another"),
])
def test_a_bad_record_index_is_refused(text, problem):
    with pytest.raises(RecordIndexError, match=problem):
        parse_index(text, "x.idx")

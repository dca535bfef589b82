"""What --file_format array_record costs to write and gives to read, against TFRecord.

    python -m benchmarks.array_record_bench [--megabytes 256] [--record_kb 64] [--rounds 5]

The same records (float32 audio windows: a tone plus noise, `--record_kb`
each, `--megabytes` in all, in 128 MiB shards) written by each of our shard
writers (transforms/writer/shard_files.py), then read back three ways:

- **write**: CPU seconds to write them, and the bytes on disk;
- **stream**: every record in order (TFRecord: tf.data's TFRecordDataset;
  ArrayRecord: its reader's sequential read);
- **by index**: batches of 32 records at random positions, what a global
  shuffle reads (TFRecord: our RecordTable through the `.idx` files;
  ArrayRecord: our ArrayRecordTable, on ArrayRecord's random-access reader).

Rounds are interleaved, the disk synced and the files read once before each
timed read (a warm page cache: the format's cost, not the disk's); medians
of CPU and wall seconds, and the ArrayRecord / TFRecord ratio of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import tensorflow as tf
from array_record.python.array_record_module import ArrayRecordReader

from transforms.format.array_records import ArrayRecordTable
from transforms.format.record_index import RecordTable
from transforms.format.shard_format import ShardFormat
from transforms.writer.shard_files import write_shard

_SHARD_BYTES = 128 << 20
_BATCH = 32
_FORMATS = {"tfrecord": ShardFormat(), "array_record": ShardFormat("array_record")}


def _records(megabytes: int, record_kb: int) -> list:
    rng = np.random.default_rng(0)
    values = record_kb * 1024 // 4
    t = np.arange(values, dtype=np.float32) / 16000
    return [(0.3 * np.sin(2 * np.pi * (100 + i % 700) * t)
             + rng.normal(0, 0.01, values)).astype(np.float32).tobytes()
            for i in range(megabytes * 1024 // record_kb)]


def _timed(work) -> tuple:
    """(CPU seconds of the process, wall seconds) of `work()`."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


def _write(folder: str, records: list, fmt: ShardFormat) -> list:
    """The manifest-like shard entries of the records written as `fmt` into `folder`."""
    per_shard = max(1, _SHARD_BYTES // len(records[0]))
    entries = []
    for index, start in enumerate(range(0, len(records), per_shard)):
        name = f"data-{index:05d}{fmt.suffix}"
        shard = write_shard(os.path.join(folder, name), records[start:start + per_shard], fmt,
                            "train", (index,))
        entry = {"file": name, "num_examples": shard.num_examples}
        if shard.index_crc32c:
            entry["index"] = {"file": name + ".idx", "crc32c": shard.index_crc32c}
        entries.append(entry)
    return entries


def _warm(folder: str) -> None:
    os.sync()
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            while f.read(8 << 20):
                pass


def _stream(folder: str, entries: list, fmt: ShardFormat) -> int:
    paths = [os.path.join(folder, e["file"]) for e in entries]
    if fmt.array_record:
        return sum(len(ArrayRecordReader(p).read_all()) for p in paths)
    return sum(int(tf.shape(b)[0]) for b in tf.data.TFRecordDataset(paths).batch(256))


def _by_index(folder: str, entries: list, fmt: ShardFormat, batches: np.ndarray) -> int:
    if fmt.array_record:
        table = ArrayRecordTable(folder, entries)
    else:
        table = RecordTable(folder, entries, lambda path: open(path, "rb"))
    return sum(len(table.read(ids)) for ids in batches)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=256)
    parser.add_argument("--record_kb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    records = _records(args.megabytes, args.record_kb)
    batches = np.random.default_rng(1).integers(0, len(records), (len(records) // _BATCH, _BATCH))
    times: dict = {}
    sizes: dict = {}
    with tempfile.TemporaryDirectory() as root:
        for _ in range(args.rounds):
            for name, fmt in _FORMATS.items():
                folder = os.path.join(root, name)
                os.makedirs(folder, exist_ok=True)
                for old in os.listdir(folder):
                    os.remove(os.path.join(folder, old))
                entries: list = []
                times.setdefault((name, "write"), []).append(
                    _timed(lambda: entries.extend(_write(folder, records, fmt))))  # noqa: B023
                sizes[name] = sum(os.path.getsize(os.path.join(folder, f))
                                  for f in os.listdir(folder))
                _warm(folder)
                times.setdefault((name, "stream"), []).append(
                    _timed(lambda: _stream(folder, entries, fmt)))  # noqa: B023
                _warm(folder)
                times.setdefault((name, "by index"), []).append(
                    _timed(lambda: _by_index(folder, entries, fmt, batches)))  # noqa: B023
    megabytes = sum(map(len, records)) / 1e6
    print(f"{len(records):,} records of {args.record_kb} KiB ({megabytes:.0f} MB), "
          f"medians of {args.rounds} interleaved rounds")
    for name in _FORMATS:
        print(f"  {name:13s} {sizes[name]:>13,d} bytes on disk")
    for step in ("write", "stream", "by index"):
        for clock, what in ((0, "CPU"), (1, "wall")):
            tf_s, ar_s = (statistics.median(t[clock] for t in times[(name, step)])
                          for name in _FORMATS)
            print(f"  {step:9s} {what:4s} tfrecord {tf_s:6.2f} s   array_record {ar_s:6.2f} s"
                  f"   ratio {ar_s / tf_s:.2f}x")


if __name__ == "__main__":
    main()

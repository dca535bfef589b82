"""What --compression gzip costs a reader, against the default (none).

    python -m benchmarks.compression_bench [--dataset demo/dataset] [--repeat 5]

On the train shards of an uncompressed dataset (`make demo` writes one: JPEG
frames with float32 audio windows), in this one process: the shards as they
are, and their records rewritten by the writer with --compression gzip
(transforms/writer/tfrecord.py), each read by tf.data's TFRecordDataset on
one core, best of --repeat. Prints each one's bytes on disk and MB/s of
records read, and the ratios.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import timeit

import tensorflow as tf

from transforms.format import reader
from transforms.format.shard_format import ShardFormat
from transforms.writer.shard_files import write_shard


def _read_all(paths: list, compression: str) -> None:
    for _ in tf.data.TFRecordDataset(paths, compression_type=compression).batch(256):
        pass


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="demo/dataset")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    info = reader.load_info(args.dataset)
    plain = [os.path.join(args.dataset, f) for f in info.files("train")]
    records = info.split("train")["num_bytes"]
    with tempfile.TemporaryDirectory() as tmp:
        gzipped = [os.path.join(tmp, f"{i}.tfrecord.gz") for i in range(len(plain))]
        for path, gz in zip(plain, gzipped):
            write_shard(gz, (r.numpy() for r in tf.data.TFRecordDataset(path)),
                        ShardFormat("tfrecord", "gzip"), "train", (0,))
        results = {}
        for name, paths, compression in (("none", plain, ""), ("gzip", gzipped, "GZIP")):
            seconds = min(timeit.repeat(lambda: _read_all(paths, compression),  # noqa: B023
                                        number=1, repeat=args.repeat))
            results[name] = (sum(os.path.getsize(p) for p in paths), records / seconds / 1e6)
    for name, (size, speed) in results.items():
        print(f"{name:5s} {size:>12,d} bytes on disk   {speed:8.1f} MB/s of records read")
    (plain_size, plain_speed), (gz_size, gz_speed) = results["none"], results["gzip"]
    print(f"gzip: {1 - gz_size / plain_size:.0%} smaller, read {plain_speed / gz_speed:.1f}x "
          "slower")


if __name__ == "__main__":
    main()

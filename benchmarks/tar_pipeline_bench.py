"""Tar shards -> TFRecord: the pipeline on the DirectRunner vs a naive loop, side by side.

    python -m benchmarks.tar_pipeline_bench [--megabytes 320] [--workdir DIR]

Generates a corpus (pipelines.sample_corpus) of at least --megabytes, then in
this one process run times:

  naive   a single-process loop: tarfile -> tf.train.Example -> tf.io.TFRecordWriter
          (GZIP, one file per split, same split function as the pipeline);
  beam-1  pipelines.tar_to_tfrecord on the DirectRunner, one worker;
  beam-2  the same with --direct_num_workers 2 (worker processes).

All three write the same examples (payload bytes, int64 label, speaker bytes,
float gain), GZIP-compressed, and the run checks the example counts agree.
Reports examples/s, input MB/s and each pipeline's ratio to the naive loop.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tarfile
import tempfile
import time

import tensorflow as tf

from pipelines import tar_to_tfrecord
from pipelines.sample_corpus import write_corpus
from transforms.splits import SplitPlan

FEATURES = "payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes,json.gain:float"
SPLITS = "train=0.8,eval=0.1,test=0.1"
SPLIT_BY = "__key__:^([^_]+)"
PAYLOAD = 128 << 10


def naive_loop(files: list, output: str) -> int:
    """What a user would write without Beam; returns examples written."""
    plan = SplitPlan.from_flags(SPLITS, SPLIT_BY)
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    os.makedirs(output, exist_ok=True)
    writers = {name: tf.io.TFRecordWriter(os.path.join(output, f"{name}.tfrecord.gz"), options)
               for name in plan.names}
    count = 0

    def flush(key, members):
        meta = json.loads(members["json"])
        example = tf.train.Example(features=tf.train.Features(feature={
            "payload": tf.train.Feature(bytes_list=tf.train.BytesList(value=[members["bin"]])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(members["cls"])])),
            "speaker": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[meta["speaker"].encode()])),
            "json.gain": tf.train.Feature(float_list=tf.train.FloatList(value=[meta["gain"]])),
        }))
        writers[plan.split_of(plan.group_key({"__key__": key}))].write(
            example.SerializeToString())

    for path in files:
        with tarfile.open(path, "r|*") as tar:
            key, members = None, {}
            for member in tar:
                k, ext = member.name.split(".", 1)
                if k != key and members:
                    flush(key, members)
                    count += 1
                    members = {}
                key = k
                members[ext] = tar.extractfile(member).read()
            if members:
                flush(key, members)
                count += 1
    for w in writers.values():
        w.close()
    return count


def pipeline(files_glob: str, output: str, workers: int) -> int:
    info = tar_to_tfrecord.run([
        "--input", files_glob, "--output", output, "--features", FEATURES,
        "--split_by", SPLIT_BY, "--splits", SPLITS, "--direct_num_workers", str(workers)])
    return sum(s["num_examples"] for s in info["splits"].values())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=320)
    parser.add_argument("--workdir", default="")
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="datagen-bench-")
    corpus = os.path.join(workdir, "corpus")
    shards = 8
    per_shard = max(1, args.megabytes * 10**6 // (PAYLOAD * shards))
    files = write_corpus(corpus, shards=shards, samples_per_shard=per_shard,
                         payload_bytes=PAYLOAD, speakers=64)
    megabytes = sum(os.path.getsize(f) for f in files) / 1e6
    print(f"corpus: {len(files)} shards, {shards * per_shard} samples, {megabytes:.0f} MB "
          f"in {corpus}; {os.cpu_count()} cores")

    results = {}
    runs = [("naive", lambda out: naive_loop(files, out)),
            ("beam-1", lambda out: pipeline(f"{corpus}/*.tar", out, 1)),
            ("beam-2", lambda out: pipeline(f"{corpus}/*.tar", out, 2))]
    for name, fn in runs:
        out = os.path.join(workdir, name)
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        count = fn(out)
        seconds = time.perf_counter() - start
        written = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
        results[name] = (seconds, count, written / 1e6)
    counts = {c for _, c, _ in results.values()}
    assert len(counts) == 1, f"example counts differ: {results}"

    base = results["naive"][0]
    print(f"{'run':<8}{'seconds':>9}{'examples/s':>12}{'MB/s in':>9}{'MB out':>8}{'vs naive':>10}")
    for name, (seconds, count, written) in results.items():
        print(f"{name:<8}{seconds:>9.1f}{count / seconds:>12.0f}{megabytes / seconds:>9.1f}"
              f"{written:>8.0f}{base / seconds:>9.2f}x")
    if not args.workdir:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()

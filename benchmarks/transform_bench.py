"""tf.Transform preprocessing: the tar pipeline with a zscore + vocabulary transform vs without.

    python -m benchmarks.transform_bench [--samples 40000] [--payload_bytes 2048] [--workdir DIR]

Generates a corpus (pipelines.sample_corpus: payload bytes, int64 label,
speaker and gain in JSON), then in this one process runs, on the same data,
pipelines.tar_to_tfrecord on the DirectRunner (one worker):

  plain      the examples as built;
  transform  the same with --normalize gain=zscore --vocabulary speaker: the
             train split analyzed, every example transformed, transform_fn saved.

TensorFlow and tf.Transform are imported before anything is timed, so the
figure is the stage's cost, not an import. Both runs write the same number of
examples (checked). Reports seconds, examples/s and transform / plain; the
target is a ratio under 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import tensorflow_transform.beam  # noqa: F401 - imported here, outside the timed runs

from pipelines import tar_to_tfrecord
from transforms.testing.corpus import write_corpus

FEATURES = "payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes,gain=json.gain:float"
TRANSFORM = ["--normalize", "gain=zscore", "--vocabulary", "speaker"]
SHARDS = 8


def pipeline(files_glob: str, output: str, extra: list) -> int:
    info = tar_to_tfrecord.run([
        "--input", files_glob, "--output", output, "--features", FEATURES,
        "--split_by", "__key__:^([^_]+)", "--splits", "train=0.8,eval=0.1,test=0.1", *extra])
    return sum(s["num_examples"] for s in info["splits"].values())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=40_000)
    parser.add_argument("--payload_bytes", type=int, default=2048)
    parser.add_argument("--workdir", default="")
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="datagen-transform-bench-")
    corpus = os.path.join(workdir, "corpus")
    files = write_corpus(corpus, shards=SHARDS, samples_per_shard=args.samples // SHARDS,
                         payload_bytes=args.payload_bytes, speakers=64)
    megabytes = sum(os.path.getsize(f) for f in files) / 1e6
    print(f"corpus: {len(files)} shards, {SHARDS * (args.samples // SHARDS)} samples, "
          f"{megabytes:.0f} MB in {corpus}; {os.cpu_count()} cores")

    results = {}
    for name, extra in (("plain", []), ("transform", TRANSFORM)):
        out = os.path.join(workdir, name)
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        count = pipeline(f"{corpus}/*.tar", out, extra)
        results[name] = (time.perf_counter() - start, count)
    counts = {c for _, c in results.values()}
    assert len(counts) == 1, f"example counts differ: {results}"

    base = results["plain"][0]
    print(f"{'run':<10}{'seconds':>9}{'examples/s':>12}{'vs plain':>10}")
    for name, (seconds, count) in results.items():
        print(f"{name:<10}{seconds:>9.1f}{count / seconds:>12.0f}{seconds / base:>9.2f}x")
    ratio = results["transform"][0] / base
    print(f"transform / plain = {ratio:.2f}x (target < 2x: {'met' if ratio < 2 else 'missed'})")
    if not args.workdir:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()

"""The audio-windows job end to end on one core: input MB/s per core, for docs/scale.md.

    python -m benchmarks.audio_pipeline_bench [--workdir DIR] [--megabytes 250]

benchmarks/audio_bench.py times decoding and cutting alone, and
benchmarks/writer_bench.py the writer around a payload that needs no decoding;
this runs pipelines.tar_to_tfrecord with `--cut audio_windows` (1 s windows,
no overlap) on the DirectRunner with one worker (the in-process runner: one
core) over tar shards of FLAC files (generated, tone + noise), so the two can
be checked against the whole:

  music   44.1 kHz stereo FLAC -> 16 kHz mono float32 windows (resampled);
  speech  16 kHz mono FLAC     -> float32 windows, and int16 PCM windows,
          each written where built (the default) and with --shuffle global.

Reports input MB/s, the serialized examples' size relative to the input (what
the global layout's shuffle carries), and the GZIP shards' size on disk.
"""

from __future__ import annotations

import argparse
import io
import os
import tarfile
import tempfile
import time

import numpy as np
import soundfile as sf

from benchmarks.audio_bench import make_corpus
from pipelines import tar_to_tfrecord

SPEECH_RATE = 16000


def speech_corpus(megabytes: float) -> list:
    """16 kHz mono FLACs of 95 s, tone + noise, about `megabytes` in all."""
    rng = np.random.default_rng(1)
    t = np.arange(SPEECH_RATE * 95) / SPEECH_RATE
    files, total, i = [], 0, 0
    while total < megabytes * 1e6:
        x = 0.3 * np.sin(2 * np.pi * (200 + 10 * i) * t) + rng.normal(0, 0.05, len(t))
        out = io.BytesIO()
        sf.write(out, x.astype(np.float32), SPEECH_RATE, format="FLAC")
        files.append(out.getvalue())
        total += len(files[-1])
        i += 1
    return files


def write_shards(files: list, root: str, shards: int = 4) -> float:
    """Tar shards of `key.flac` + `key.cls`; returns their total MB."""
    os.makedirs(root)
    for shard in range(shards):
        with tarfile.open(os.path.join(root, f"shard-{shard}.tar"), "w") as tar:
            for i in range(shard, len(files), shards):
                for ext, data in (("flac", files[i]), ("cls", str(i % 7).encode())):
                    info = tarfile.TarInfo(f"spk{i % 20:02d}_{i:05d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return sum(os.path.getsize(os.path.join(root, f)) for f in os.listdir(root)) / 1e6


def run(corpus: str, output: str, dtype: str, shuffle: str) -> tuple:
    """(seconds, windows, examples MB, GZIP shards MB) of one job on one core."""
    start = time.perf_counter()
    info = tar_to_tfrecord.run([
        "--input", f"{corpus}/*.tar", "--output", output, "--cut", "audio_windows",
        "--audio_fields", "flac", "--window_s", "1", "--audio_dtype", dtype,
        "--features", "label=cls:int64", "--split_by", "__key__:^([^_]+)", "--allow_empty_splits",
        "--shuffle", shuffle, "--direct_num_workers", "1",
        "--compression", "gzip"])  # docs/scale.md's cost model prices GZIP shards
    seconds = time.perf_counter() - start
    splits = info["splits"].values()
    on_disk = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(output)
                  for f in fs if f.startswith("data-"))
    return (seconds, sum(s["num_examples"] for s in splits),
            sum(s["num_bytes"] for s in splits) / 1e6, on_disk / 1e6)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=250)
    parser.add_argument("--workdir", default="")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.workdir or None) as tmp:
        music_files = max(1, round(args.megabytes / 1.29))  # make_corpus: ~1.29 MB per 10 s file
        cases = [("music 44.1k stereo", make_corpus(music_files, 10.0), ["float32"], ["none"]),
                 ("speech 16k mono", speech_corpus(args.megabytes), ["float32", "int16"],
                  ["none", "global"])]
        print(f"{'corpus':20s} {'windows':8s} {'--shuffle':9s} {'MB in':>7s} {'seconds':>8s} "
              f"{'MB/s in':>8s} {'examples/in':>12s} {'gz/in':>6s}")
        for label, files, dtypes, layouts in cases:
            corpus = os.path.join(tmp, label.split()[0])
            megabytes = write_shards(files, corpus)
            for dtype in dtypes:
                for shuffle in layouts:
                    output = os.path.join(tmp, f"out-{dtype}-{shuffle}")
                    seconds, windows, examples, gz = run(corpus, output, dtype, shuffle)
                    print(f"{label:20s} {dtype:8s} {shuffle:9s} {megabytes:7.1f} {seconds:8.2f} "
                          f"{megabytes / seconds:8.1f} {examples / megabytes:12.2f} "
                          f"{gz / megabytes:6.2f}   ({windows} windows)")


if __name__ == "__main__":
    main()

"""The writer against the best plain loop one core can run, side by side, with memory.

    python -m benchmarks.writer_bench [--payload_mb 1600] [--speech_mb 1024]
                                      [--memory_mb 512,2048] [--workdir DIR]

Makes two corpora of tar shards, then in this one process run times each job
as a subprocess, start-up included, and samples the peak RSS of its whole
process tree (benchmarks/process_tree.py: the local runner's worker processes
count too):

  payload  pipelines.sample_corpus shards, 16 files of 128 KiB payloads:
           read, encode, write (uncompressed, the default), nothing to decode;
  speech   16 kHz mono FLAC (95 s each, tone + noise), 8 files, cut into 1 s
           float32 windows: decode, cut, encode, write.

Runs per corpus:

  loop     benchmarks/plain_loop.py: the pipeline's own functions over the
           same units in one process, no Beam - the baseline;
  loop x2  two such loops side by side, each converting every other unit:
           the most a 2-way split of this work gains on this machine, Beam or
           not (data movement shares memory bandwidth between the cores);
  beam-1   pipelines.tar_to_tfrecord on the local runner, one worker;
  beam-2   the same with --direct_num_workers 2 (worker processes).

Then memory against corpus size: beam-2 over payload corpora of each
--memory_mb size; peak RSS should not grow with the corpus.

Targets (issue #11, on 2 cores): beam-1 >= 0.9x the loop, beam-2 >= 1.6x, peak
RSS <= 1 GiB, and within 1.2x between the smallest and largest corpus.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile

from benchmarks.audio_pipeline_bench import speech_corpus, write_shards
from benchmarks.process_tree import measure
from transforms.testing.corpus import write_corpus

PAYLOAD = 128 << 10
PAYLOAD_FLAGS = ["--features", "payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes,"
                 "json.gain:float", "--split_by", "__key__:^([^_]+)", "--allow_empty_splits"]
SPEECH_FLAGS = ["--cut", "audio_windows", "--audio_fields", "flac", "--window_s", "1",
                "--features", "label=cls:int64", "--split_by", "__key__:^([^_]+)",
                "--allow_empty_splits"]
RUNS = {
    "loop": ["-m", "benchmarks.plain_loop"],
    "loop x2": None,  # two loops at once: _two_loops
    "beam-1": ["-m", "pipelines.tar_to_tfrecord", "--direct_num_workers", "1"],
    "beam-2": ["-m", "pipelines.tar_to_tfrecord", "--direct_num_workers", "2"],
}
TARGETS = {"beam-1": 0.9, "beam-2": 1.6}
MAX_RSS = 1 << 30
MAX_RSS_GROWTH = 1.2


def payload_corpus(root: str, megabytes: float, files: int = 16) -> float:
    per_file = max(1, int(megabytes * 10**6 // (PAYLOAD * files)))
    paths = write_corpus(root, shards=files, samples_per_shard=per_file, payload_bytes=PAYLOAD,
                         speakers=64)
    return sum(os.path.getsize(p) for p in paths) / 1e6


def _two_loops(args: list) -> list:
    """One shell running two plain loops at once, every other unit each; it fails
    if either does."""
    first, second = (shlex.join([sys.executable, "-m", "benchmarks.plain_loop",
                                 "--part", f"{i}/2", *args]) for i in range(2))
    return ["sh", "-c", f"{first} & {second}; b=$?; wait $!; a=$?; exit $((a | b))"]


def _run(name: str, corpus: str, flags: list, workdir: str):
    output = os.path.join(workdir, f"out-{name.replace(' ', '')}")
    shutil.rmtree(output, ignore_errors=True)
    # Every run starts with nothing left to write back (the corpus just made,
    # the last run's output): the disk's background work would be timed too.
    os.sync()
    args = ["--input", f"{corpus}/*.tar", "--output", output, *flags]
    command = _two_loops(args) if RUNS[name] is None else [sys.executable, *RUNS[name], *args]
    run = measure(command)
    shutil.rmtree(output, ignore_errors=True)
    return run


def compare(label: str, corpus: str, megabytes: float, flags: list, workdir: str) -> list:
    """Times every run over one corpus; prints the table; returns unmet targets."""
    print(f"\n{label}: {megabytes:.0f} MB in {len(os.listdir(corpus))} files, "
          f"{os.cpu_count()} cores")
    print(f"{'run':8s} {'seconds':>8s} {'MB/s in':>8s} {'x loop':>7s} {'peak RSS':>10s}")
    results = {name: _run(name, corpus, flags, workdir) for name in RUNS}
    base = results["loop"].seconds
    missed = []
    for name, run in results.items():
        ratio = base / run.seconds
        print(f"{name:8s} {run.seconds:8.1f} {megabytes / run.seconds:8.1f} {ratio:6.2f}x "
              f"{run.peak_rss / 2**20:6.0f} MiB")
        if ratio < TARGETS.get(name, 0):
            missed.append(f"{label} {name}: {ratio:.2f}x the loop < {TARGETS[name]}x")
        if run.peak_rss > MAX_RSS:
            missed.append(f"{label} {name}: peak RSS {run.peak_rss / 2**20:.0f} MiB > 1 GiB")
    return missed


def memory_growth(sizes: list, workdir: str) -> list:
    """beam-2's peak RSS over payload corpora of `sizes` MB; returns unmet targets."""
    print("\nmemory against corpus size (payload, beam-2)")
    peaks = []
    for megabytes in sizes:
        corpus = os.path.join(workdir, f"memory-{megabytes}")
        made = payload_corpus(corpus, megabytes)
        run = _run("beam-2", corpus, PAYLOAD_FLAGS, workdir)
        shutil.rmtree(corpus)
        peaks.append(run.peak_rss)
        print(f"{made:8.0f} MB  {run.seconds:6.1f} s  peak RSS {run.peak_rss / 2**20:6.0f} MiB")
    growth = peaks[-1] / peaks[0]
    print(f"largest / smallest corpus: peak RSS x{growth:.2f}")
    return [f"peak RSS grew x{growth:.2f} > x{MAX_RSS_GROWTH}"] if growth > MAX_RSS_GROWTH else []


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payload_mb", type=float, default=1600, help="0 skips it.")
    parser.add_argument("--speech_mb", type=float, default=1024, help="0 skips it.")
    parser.add_argument("--memory_mb", default="512,2048",
                        help="Payload corpus sizes for the memory check; empty skips it.")
    parser.add_argument("--workdir", default="", help="Keep corpora here (default: a temp dir).")
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="datagen-writer-bench-")
    missed = []
    try:
        if args.payload_mb:
            payload = os.path.join(workdir, "payload")
            made = payload_corpus(payload, args.payload_mb)
            missed += compare("payload tar", payload, made, PAYLOAD_FLAGS, workdir)
            shutil.rmtree(payload)
        if args.speech_mb:
            speech = os.path.join(workdir, "speech")
            made = write_shards(speech_corpus(args.speech_mb), speech, shards=8)
            missed += compare("16 kHz FLAC speech -> 1 s float32 windows", speech, made,
                              SPEECH_FLAGS, workdir)
            shutil.rmtree(speech)

        sizes = [float(s) for s in args.memory_mb.split(",") if s.strip()]
        if sizes:
            missed += memory_growth(sizes, workdir)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\ntargets: " + ("all met" if not missed else "MISSED: " + "; ".join(missed)))


if __name__ == "__main__":
    main()

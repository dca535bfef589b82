"""The writer against the leanest plain loop, side by side, with memory and start-up.

    python -m benchmarks.writer_bench [--payload_mb 1600] [--speech_mb 1024] [--repeats 3]
                                      [--memory_mb 512,2048] [--workdir DIR]

Makes two corpora of tar shards, then in this one process run times each run
as a subprocess, start-up included, interleaved and repeated (medians), each
after a sync and with the corpus in the page cache; for each it samples the
peak RSS of the whole process tree (benchmarks/process_tree.py: the local
runner's worker processes count too), when the first output file appeared,
and the tree's CPU time:

  payload  pipelines.sample_corpus shards, 16 files of 128 KiB payloads:
           read, encode, write (uncompressed, the default), nothing to decode;
  speech   16 kHz mono FLAC (95 s each, tone + noise), 8 files, cut into 1 s
           float32 windows: decode, cut, encode, write.

Runs per corpus:

  lean     benchmarks/lean_loop.py: tarfile, soundfile, windows, the encoder,
           one file per split - the baseline, writing the job's very records
           (checked once per corpus);
  lean x2  two lean loops side by side, each converting every other archive:
           the machine's real ceiling for two processes at that moment;
  loop     benchmarks/plain_loop.py: the project's own converter over the
           job's units in one process, no Beam (what Beam adds, alone);
  beam-1   pipelines.tar_to_tfrecord on the local runner, one worker;
  beam-2   the same with --direct_num_workers 2 (worker processes).

Then memory against corpus size: beam-2 over payload corpora of each
--memory_mb size; peak RSS should not grow with the corpus.

Targets (issue #26, on 2 cores): beam-1 >= 0.9x the lean loop and its rate
after the first output >= 0.95x the lean loop's; beam-2 >= 0.8x two lean
loops; first output within 2.5 s (beam-1) and 3.5 s (beam-2); peak RSS
<= 1 GiB, and within 1.2x between the smallest and largest corpus.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import sys
import tempfile

from benchmarks.audio_pipeline_bench import speech_corpus, write_shards
from benchmarks.lean_loop import records
from benchmarks.process_tree import measure, warm
from transforms.testing.corpus import write_corpus

PAYLOAD = 128 << 10
PAYLOAD_FLAGS = ["--features", "payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes,"
                 "json.gain:float", "--split_by", "__key__:^([^_]+)", "--allow_empty_splits"]
SPEECH_FLAGS = ["--cut", "audio_windows", "--audio_fields", "flac", "--window_s", "1",
                "--features", "label=cls:int64", "--split_by", "__key__:^([^_]+)",
                "--allow_empty_splits"]
# Each run's command after `python`, before its flags; None: two at once (`_twice`).
RUNS = {
    "lean": ["-m", "benchmarks.lean_loop"],
    "lean x2": None,
    "loop": ["-m", "benchmarks.plain_loop"],
    "beam-1": ["-m", "pipelines.tar_to_tfrecord", "--direct_num_workers", "1"],
    "beam-2": ["-m", "pipelines.tar_to_tfrecord", "--direct_num_workers", "2"],
}
# Run -> (its baseline, the least ratio to it): wall time, and rate after the first output.
TARGETS = {"beam-1": ("lean", 0.9), "beam-2": ("lean x2", 0.8)}
RATE_TARGETS = {"beam-1": ("lean", 0.95)}
FIRST_OUTPUT_S = {"beam-1": 2.5, "beam-2": 3.5}
MAX_RSS = 1 << 30
MAX_RSS_GROWTH = 1.2


def payload_corpus(root: str, megabytes: float, files: int = 16) -> float:
    per_file = max(1, int(megabytes * 10**6 // (PAYLOAD * files)))
    paths = write_corpus(root, shards=files, samples_per_shard=per_file, payload_bytes=PAYLOAD,
                         speakers=64)
    return sum(os.path.getsize(p) for p in paths) / 1e6


def _twice(command: list) -> list:
    """One shell running `command` twice at once, with --part 0/2 and 1/2; it fails
    if either does."""
    first, second = (shlex.join([*command, "--part", f"{i}/2"]) for i in range(2))
    return ["sh", "-c", f"{first} & {second}; b=$?; wait $!; a=$?; exit $((a | b))"]


def _command(name: str, kind: str, corpus: str, output: str, flags: list) -> list:
    inputs = ["--input", f"{corpus}/*.tar", "--output", output]
    if name.startswith("lean"):
        command = [sys.executable, *RUNS["lean"], kind, *inputs]
        return _twice(command) if name == "lean x2" else command
    return [sys.executable, *RUNS[name], *inputs, *flags]


def _run(name: str, kind: str, corpus: str, flags: list, workdir: str, keep: bool = False):
    output = os.path.join(workdir, f"out-{name.replace(' ', '')}")
    shutil.rmtree(output, ignore_errors=True)
    warm(corpus)
    run = measure(_command(name, kind, corpus, output, flags), watch=output)
    if not keep:
        shutil.rmtree(output, ignore_errors=True)
    return run, output


def _median(runs: list, field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def compare(label: str, kind: str, corpus: str, megabytes: float, flags: list, workdir: str,
            repeats: int) -> list:
    """Times every run `repeats` times, interleaved; checks once that the lean loop
    and the job wrote the same records; prints the medians; returns unmet targets."""
    print(f"\n{label}: {megabytes:.0f} MB in {len(os.listdir(corpus))} files, "
          f"{os.cpu_count()} cores, median of {repeats}")
    results: dict = {name: [] for name in RUNS}
    for repeat in range(repeats):
        outputs = {}
        for name in RUNS:
            run, outputs[name] = _run(name, kind, corpus, flags, workdir,
                                      keep=repeat == 0 and name in ("lean", "beam-1"))
            results[name].append(run)
        if repeat == 0:
            same = records(outputs["lean"]) == records(outputs["beam-1"])
            print(f"lean loop and job wrote the same records: {'yes' if same else 'NO'}")
            for name in ("lean", "beam-1"):
                shutil.rmtree(outputs[name])
    seconds = {name: _median(runs, "seconds") for name, runs in results.items()}
    first = {name: _median(runs, "first_output_s") for name, runs in results.items()}
    # MB/s once output flows: start-up (imports, planning, workers) left out.
    after = {name: megabytes / max(seconds[name] - first[name], 1e-3) for name in RUNS}
    print(f"{'run':8s} {'seconds':>8s} {'MB/s':>6s} {'x lean':>7s} {'x lean2':>8s} "
          f"{'1st out':>8s} {'MB/s after':>10s} {'CPU s':>6s} {'peak RSS':>9s}")
    for name, runs in results.items():
        print(f"{name:8s} {seconds[name]:8.1f} {megabytes / seconds[name]:6.1f} "
              f"{seconds['lean'] / seconds[name]:6.2f}x {seconds['lean x2'] / seconds[name]:7.2f}x "
              f"{first[name]:7.1f}s {after[name]:10.1f} {_median(runs, 'cpu_seconds'):6.1f} "
              f"{_median(runs, 'peak_rss') / 2**20:5.0f} MiB")
    missed = [] if same else [f"{label}: the lean loop and the job wrote different records"]
    for name, (base, least) in TARGETS.items():
        if seconds[base] / seconds[name] < least:
            missed.append(f"{label} {name}: {seconds[base] / seconds[name]:.2f}x {base} < {least}x")
    for name, (base, least) in RATE_TARGETS.items():
        if after[name] / after[base] < least:
            missed.append(f"{label} {name}: rate after the first output "
                          f"{after[name] / after[base]:.2f}x {base}'s < {least}x")
    for name, most in FIRST_OUTPUT_S.items():
        if first[name] > most:
            missed.append(f"{label} {name}: first output after {first[name]:.1f} s > {most} s")
    for name, runs in results.items():
        if _median(runs, "peak_rss") > MAX_RSS:
            missed.append(f"{label} {name}: peak RSS > 1 GiB")
    return missed


def memory_growth(sizes: list, workdir: str) -> list:
    """beam-2's peak RSS over payload corpora of `sizes` MB; returns unmet targets."""
    print("\nmemory against corpus size (payload, beam-2)")
    peaks = []
    for megabytes in sizes:
        corpus = os.path.join(workdir, f"memory-{megabytes}")
        made = payload_corpus(corpus, megabytes)
        run, _ = _run("beam-2", "payload", corpus, PAYLOAD_FLAGS, workdir)
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
    parser.add_argument("--repeats", type=int, default=3, help="Runs of each, interleaved.")
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
            missed += compare("payload tar", "payload", payload, made, PAYLOAD_FLAGS, workdir,
                              args.repeats)
            shutil.rmtree(payload)
        if args.speech_mb:
            speech = os.path.join(workdir, "speech")
            made = write_shards(speech_corpus(args.speech_mb), speech, shards=8)
            missed += compare("16 kHz FLAC speech -> 1 s float32 windows", "speech", speech,
                              made, SPEECH_FLAGS, workdir, args.repeats)
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

"""Cutting windows inside segments against cutting whole files, on the same audio.

    python -m benchmarks.segments_bench [--recordings 8] [--minutes 10] [--repeats 3]

Writes `--recordings` FLAC recordings of `--minutes` in which speakers take
turns of 2-6 s (transforms/testing/corpus.py `write_meetings`: KEY.flac and
KEY.rttm in one tar), then times pipelines.tar_to_tfrecord with one worker,
interleaved and repeated (medians), each run after a sync and with the corpus
in the page cache:

  whole     --cut audio_windows over each whole recording;
  segments  the same windows laid inside each RTTM turn (--segments_field
            rttm): every turn its own sample, its audio read by a seek.

The turns tile each recording, so both decode the same audio; the segments
job makes a few more windows (each turn's last one is padded) and does the
per-segment work (a sample, a split and an outcome a turn). Reports seconds,
input MB/s, examples and the ratio of the two.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

from benchmarks.process_tree import interleaved
from transforms.testing.corpus import write_meetings

FLAGS = ["--cut", "audio_windows", "--audio_fields", "flac", "--window_s", "1",
         "--features", "none", "--allow_empty_splits", "--direct_num_workers", "1"]
RUNS = {"whole": [], "segments": ["--segments_field", "rttm"]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recordings", type=int, default=8)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="datagen-segments-bench-")
    try:
        corpus = os.path.join(workdir, "corpus")
        write_meetings(corpus, args.recordings, speakers=24, seconds=args.minutes * 60)
        tar = os.path.join(corpus, "meetings.tar")
        megabytes = os.path.getsize(tar) / 1e6
        output = os.path.join(workdir, "out")
        runs = interleaved(
            {name: [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", tar,
                    "--output", output, *FLAGS, *flags] for name, flags in RUNS.items()},
            corpus, output, args.repeats)
        examples = {name: next(line for line in measured[-1].output.splitlines()
                               if line.startswith("datagen:"))
                    for name, measured in runs.items()}
        print(f"{args.recordings} recordings of {args.minutes:g} min, {megabytes:.0f} MB of "
              f"FLAC, 1 worker, median of {args.repeats}")
        median = {name: statistics.median(r.seconds for r in measured)
                  for name, measured in runs.items()}
        for name in RUNS:
            print(f"{name:9s} {median[name]:6.1f} s {megabytes / median[name]:6.1f} MB/s  "
                  f"{examples[name]}")
        print(f"segments / whole: {median['whole'] / median['segments']:.2f}x the rate")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

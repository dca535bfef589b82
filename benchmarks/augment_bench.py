"""What an augmented example costs against an original, side by side.

    python -m benchmarks.augment_bench [--speech_mb 512] [--repeats 3] [--workdir DIR]

writer_bench's speech corpus (16 kHz mono FLAC, 95 s files, 8 tar shards)
through the windows job on one core, interleaved and repeated (medians),
each run after a sync with the corpus in the page cache, with the peak
memory of its whole process tree:

  plain   1 s windows, no augmentation;
  gain    the same and one copy of every sample, gained (--gain_db -6,6);
  speed   the same and one copy of every sample, speed-perturbed (1.1);
  noise   the same and one copy of every sample with noise at 0-15 dB SNR,
          from a corpus of four 30 s recordings (a tar of FLACs made here),
          each decoded whole once and cached;
  noise_long  the same from a corpus too big to stay decoded (over 256 MiB:
          twelve recordings of 400 to 700 s; MUSAN is 9.7 GB), each over
          four times a sample's 95 s: only each copy's excerpt is decoded;
  reverb  the same and one copy of every sample reverberated, by one of four
          synthetic RIRs of 0.3 to 0.8 s (exponentially decaying noise).

An augmented example's cost is the time a run adds to plain's over the
augmented examples it adds; an original's is plain's time over its examples.
Targets (issue #39): an augmented example <= 1.5x an original, and <= 1.2x
for gain or noise.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import statistics
import sys
import tarfile
import tempfile

import numpy as np
import soundfile as sf

from benchmarks.audio_pipeline_bench import speech_corpus, write_shards
from benchmarks.process_tree import interleaved
from benchmarks.writer_bench import SPEECH_FLAGS

EVERY_SPLIT = ["--augment_copies", "1", "--augment_splits", "train,eval,test"]
RUNS = {
    "plain": [],
    "gain": [*EVERY_SPLIT, "--gain_db", "-6,6"],
    "speed": [*EVERY_SPLIT, "--speed_perturb", "1.1"],
    "noise": [*EVERY_SPLIT, "--noise_input", "{noise}", "--snr_db", "0,15"],
    "noise_long": [*EVERY_SPLIT, "--noise_input", "{long_noise}", "--snr_db", "0,15"],
    "reverb": [*EVERY_SPLIT, "--rir_input", "{rirs}"],
}
TARGETS = {"gain": 1.2, "speed": 1.5, "noise": 1.2, "noise_long": 1.2, "reverb": 1.5}


def _tar_of_flacs(path: str, recordings: dict) -> str:
    """A tar of 16 kHz FLACs, {name: samples}."""
    with tarfile.open(path, "w") as tar:
        for name, samples in recordings.items():
            flac = io.BytesIO()
            sf.write(flac, samples.astype(np.float32), 16000, format="FLAC")
            member = tarfile.TarInfo(f"{name}.flac")
            member.size = len(flac.getvalue())
            tar.addfile(member, io.BytesIO(flac.getvalue()))
    return path


def noise_corpus(path: str, seconds: tuple = (30, 30, 30, 30)) -> str:
    """A noise recording of each of `seconds`: the noise corpus."""
    rng = np.random.default_rng(0)
    return _tar_of_flacs(path, {f"noise{i}": 0.05 * rng.standard_normal(16000 * length)
                                for i, length in enumerate(seconds)})


def rir_corpus(path: str) -> str:
    """Four RIRs of 0.3 to 0.8 s: a direct path, then noise decaying 60 dB by the end."""
    rng = np.random.default_rng(1)
    rirs = {}
    for i, rt60 in enumerate((0.3, 0.45, 0.6, 0.8)):
        t = np.arange(int(16000 * rt60)) / 16000
        rirs[f"rir{i}"] = 0.05 * rng.standard_normal(len(t)) * 10 ** (-3 * t / rt60)
        rirs[f"rir{i}"][32] = 0.8
    return _tar_of_flacs(path, rirs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech_mb", type=float, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default="")
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="augment-bench-")
    corpus = os.path.join(workdir, "speech")
    shutil.rmtree(corpus, ignore_errors=True)
    megabytes = write_shards(speech_corpus(args.speech_mb), corpus, shards=8)
    corpora = {"noise": noise_corpus(os.path.join(workdir, "noise.tar")),
               "long_noise": noise_corpus(os.path.join(workdir, "long_noise.tar"),
                                          (400, 500, 600, 700) * 3),
               "rirs": rir_corpus(os.path.join(workdir, "rirs.tar"))}
    print(f"speech: {megabytes:.0f} MB in 8 files, one core a run, median of {args.repeats}")
    output = os.path.join(workdir, "out")
    runs = interleaved({name: [sys.executable, "-m", "pipelines.tar_to_tfrecord",
                               "--direct_num_workers", "1", "--input", f"{corpus}/*.tar",
                               "--output", output, *SPEECH_FLAGS,
                               *(flag.format(**corpora) for flag in flags)]
                        for name, flags in RUNS.items()}, corpus, output, args.repeats)
    median = {name: statistics.median(r.seconds for r in measured)
              for name, measured in runs.items()}
    peak_mib = {name: max(r.peak_rss for r in measured) / (1 << 20)
                for name, measured in runs.items()}
    # The job's summary line counts the examples (its progress lines count them so far);
    # the originals are plain's in every run.
    totals = {name: int(re.search(r"^datagen: \d+ samples read, (\d+) examples written",
                                  measured[-1].output, re.M).group(1))
              for name, measured in runs.items()}
    examples = {name: (total, total - totals["plain"]) for name, total in totals.items()}
    original = median["plain"] / totals["plain"]
    missed = []
    for name, (total, augmented) in examples.items():
        line = (f"{name:10s} {median[name]:7.1f} s  {peak_mib[name]:4.0f} MiB peak  {total:6d} "
                f"examples ({augmented} augmented)")
        if augmented:
            cost = (median[name] - median["plain"]) / augmented / original
            line += f"  an augmented example: {cost:.2f}x an original (target <= {TARGETS[name]}x)"
            if cost > TARGETS[name]:
                missed.append(f"{name} {cost:.2f}x > {TARGETS[name]}x")
        print(line)
    print("targets: " + ("met" if not missed else "MISSED: " + "; ".join(missed)))
    shutil.rmtree(output, ignore_errors=True)
    if not args.workdir:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()

"""The speech team's first step, ours against Hugging Face `datasets`', side by side.

    python -m benchmarks.peers.datasets_bench [--utterances 384] [--repeats 3] [--workdir DIR]

The corpus is Lhotse's benchmark's (benchmarks/peers/lhotse_bench.py:
espeak-ng and sox speech, 16 kHz mono FLAC, with transcripts and speakers):
ours reads its 8 tar shards, `datasets` its files. `datasets` 3.x (whose
Audio feature decodes with soundfile), librosa and kaldi-native-fbank are
installed in a venv of their own under the work folder, never in the
project's. Then, in this one process, every run is a process tree of its
own, the runs taking turns and repeated (medians), each after a sync with
the corpus in the page cache:

  ours N      pipelines.tar_to_tfrecord --cut utterances --audio_features
              fbank --num_mel_bins 80, transcripts and speakers, split by
              speaker, N = 1 and 2 workers;
  datasets N  benchmarks/peers/datasets_side.py: the files as an Audio
              dataset, Dataset.map(num_proc=N) computing kaldi-native-fbank's
              80-bin fbank (Kaldi's, as ours: tests/test_speech.py holds
              ours to it), stored float32, then save_to_disk.

For each: the CPU seconds of the whole process tree, wall seconds, peak RSS
and PSS of the tree (benchmarks/process_tree.py), and the bytes written
(`datasets`: its map cache and the saved dataset). Target (issue #57): our
CPU seconds and wall time no more than `datasets`' with 1 worker and with 2.
`make bench-peers` runs this; `make test` never does.
"""

from __future__ import annotations

import os
import shutil
import sys

from benchmarks.peers.lhotse_bench import OURS, spoken_corpus
from benchmarks.peers.peer_runs import bytes_in, measured_medians, peer_arguments, peer_python

SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "datasets_side.py")
PEER_PACKAGES = ["datasets>=3.6,<4", "librosa", "soundfile", "kaldi-native-fbank"]


def main(argv=None) -> None:
    args, workdir = peer_arguments(__doc__, 384, argv)
    files, tars = spoken_corpus(os.path.join(workdir, "corpus"), args.utterances)
    python = peer_python(workdir, "datasets-venv", PEER_PACKAGES)
    output = os.path.join(workdir, "out")
    ours = [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", f"{tars}/*.tar",
            "--output", output, *OURS]
    peers = {f"ours, {n} worker{'s' * (n > 1)}": f"datasets, num_proc={n}" for n in (1, 2)}
    runs = {}
    for n, (name, peer) in enumerate(peers.items(), 1):
        runs[name] = [*ours, "--direct_num_workers", str(n)]
        runs[peer] = [python, SIDE, "features", files, output, str(n)]
    disk, median = measured_medians(runs, os.path.join(workdir, "corpus"), output,
                                    args.repeats)
    print(f"{args.utterances} utterances, {bytes_in(files) / 1e6:.0f} MB of FLAC; "
          f"{os.cpu_count()} cores; medians of {args.repeats} interleaved runs")
    print(f"{'run':<22}{'CPU s':>8}{'ours/theirs':>13}{'wall s':>8}{'wall x':>8}{'RSS MiB':>9}"
          f"{'PSS MiB':>9}{'disk MB':>9}")
    for name, m in median.items():
        theirs = median.get(peers.get(name, ""))
        cpu, wall = ((f"{m['cpu_seconds'] / theirs['cpu_seconds']:.2f}x",
                      f"{m['seconds'] / theirs['seconds']:.2f}x") if theirs else ("", ""))
        print(f"{name:<22}{m['cpu_seconds']:8.1f}{cpu:>13}{m['seconds']:8.1f}{wall:>8}"
              f"{m['peak_rss'] / 2**20:9.0f}{m['peak_pss'] / 2**20:9.0f}"
              f"{disk[name] / 1e6:9.0f}")
    for ours_run, peer_run in peers.items():
        ours_m, theirs = median[ours_run], median[peer_run]
        verdict = ("met" if ours_m["cpu_seconds"] <= theirs["cpu_seconds"]
                   and ours_m["seconds"] <= theirs["seconds"] else "MISSED")
        print(f"target, {ours_run} against {peer_run}: no more CPU, no more wall: {verdict}")
    if not args.workdir:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()

"""The speech team's first step, ours against Lhotse's, side by side on one machine.

    python -m benchmarks.peers.lhotse_bench [--utterances 600] [--repeats 3] [--workdir DIR]

Makes a spoken corpus: espeak-ng speaks one to five Harvard sentences an
utterance in four voices (transforms/testing/spoken.py), sox varies each
one's pitch and tempo (24 speakers: a voice and a pitch), 16 kHz mono FLAC.
Our job reads it as 8 tar shards (key.flac, key.txt, key.json with the
speaker); Lhotse as the files with its manifests (a RecordingSet and a
SupervisionSet, written once by benchmarks/peers/lhotse_side.py, untimed,
as a recipe's prepare step would).

Lhotse and torch are installed in a venv of their own under the work folder
(the first run takes a few minutes), never in the project's. Then, in this
one process, every run is a process tree of its own, the runs taking turns
and repeated (medians), each after a sync with the corpus in the page cache:

  ours N           pipelines.tar_to_tfrecord --cut utterances --audio_features
                   fbank --num_mel_bins 80 with the transcripts and speakers,
                   split by speaker, N = 1 and 2 workers;
  lhotse lilcom N  icefall's compute_fbank_*.py: one torch thread,
                   CutSet.from_manifests, Fbank(80 bins, no dither),
                   compute_and_store_features(num_jobs=N) into lilcom chunks
                   (lossy), N = 1 and 2;
  lhotse hdf5 2    the same into HDF5 float32 (lossless), 2 jobs;
  ours float16     ours, 1 worker, with --feature_dtype float16 (half the
                   features' bytes; within 2^-11 of each value);
  ours from Lhotse's manifests
                   pipelines.manifest_to_tfrecord on the RecordingSet and
                   SupervisionSet Lhotse reads, the same job otherwise.

For each: the CPU seconds of the whole process tree (the steadier figure on
a noisy machine), wall seconds, peak RSS and PSS of the tree
(benchmarks/process_tree.py), and the bytes written. Last, the features
agree: ours against Lhotse's Fbank set to Kaldi's options (snip_edges, bins
up to Nyquist) on a few utterances, above Lhotse's energy floor.

Targets (issue #46): our CPU seconds <= Lhotse lilcom's with 1 worker and
with 2, and our wall time <= Lhotse's. `make bench-peers` runs this; `make
test` never does.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import soundfile

from benchmarks.peers.peer_runs import bytes_in, measured_medians, peer_arguments, peer_python
from transforms.media.features import AudioFeatures, compute_features
from transforms.testing.spoken import sentences, speak

SHARDS = 8
SPEAKERS = 24            # four espeak-ng voices, six pitches each
SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lhotse_side.py")
# urllib3: Lhotse 1.33 imports it without declaring it.
PEER_PACKAGES = ["lhotse", "torch", "lilcom", "h5py", "urllib3"]
OURS = ["--cut", "utterances", "--audio_fields", "flac", "--audio_features", "fbank",
        "--num_mel_bins", "80", "--features", "text=txt:string,speaker=json.speaker:string",
        "--text_field", "text", "--split_by", "json.speaker"]
# The same job reading the corpus as Lhotse does: its manifests, a supervision a row.
FROM_MANIFESTS = ["--cut", "utterances", "--audio_fields", "audio", "--audio_features",
                  "fbank", "--num_mel_bins", "80", "--features", "text:string,speaker:string",
                  "--text_field", "text", "--split_by", "speaker"]


def _utterance(files: str, index: int) -> None:
    """Utterance `index`: its FLAC, its transcript and its speaker."""
    key = f"utt{index:05d}"
    speaker = index % SPEAKERS
    text = " ".join(sentences(30)[(index + k) % 30] for k in range(1 + index % 5))
    plain = os.path.join(files, key + ".plain.flac")
    speak(text, plain, voice=speaker % 4)
    pitch = (speaker // 4 - 2.5) * 80               # cents: the speaker's own pitch
    tempo = 0.85 + (index * 7919 % 31) / 100        # 0.85 to 1.15: each utterance its pace
    subprocess.run(["sox", plain, os.path.join(files, key + ".flac"), "pitch", str(pitch),
                    "tempo", str(tempo)], check=True, capture_output=True)
    os.remove(plain)
    with open(os.path.join(files, key + ".txt"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(files, key + ".json"), "w", encoding="utf-8") as f:
        json.dump({"speaker": f"s{speaker:02d}"}, f)


def spoken_corpus(root: str, utterances: int) -> tuple[str, str]:
    """(the files' folder, the tar shards' folder) of a corpus of `utterances`."""
    files, tars = os.path.join(root, "files"), os.path.join(root, "tars")
    if os.path.isdir(tars) and len(os.listdir(files)) == 3 * utterances:
        return files, tars
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(files)
    os.makedirs(tars)
    # espeak-ng and sox are processes of their own: threads keep both cores busy.
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(lambda i: _utterance(files, i), range(utterances)))
    keys = sorted(name[:-len(".flac")] for name in os.listdir(files) if name.endswith(".flac"))
    for shard in range(SHARDS):
        with tarfile.open(os.path.join(tars, f"speech-{shard}.tar"), "w") as tar:
            for key in keys[shard::SHARDS]:
                for ext in ("flac", "txt", "json"):
                    tar.add(os.path.join(files, f"{key}.{ext}"), arcname=f"{key}.{ext}")
    return files, tars


def agreement(python: str, files: str, workdir: str, count: int = 8) -> tuple[float, float]:
    """(the largest difference, the 99.9th percentile) between our fbank and
    Lhotse's set to Kaldi's options, over `count` utterances, where Lhotse's
    value is above its energy floor."""
    differences = []
    for name in sorted(n for n in os.listdir(files) if n.endswith(".flac"))[:count]:
        path, theirs_npy = os.path.join(files, name), os.path.join(workdir, "lhotse-fbank.npy")
        subprocess.run([python, SIDE, "fbank", path, theirs_npy], check=True,
                       capture_output=True)
        theirs = np.load(theirs_npy)
        audio, rate = soundfile.read(path, dtype="float32")
        ours = compute_features(audio, rate, AudioFeatures("fbank", num_mel_bins=80))
        assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
        above_floor = theirs > np.log(1e-10) + 1
        differences.append(np.abs(ours - theirs)[above_floor])
    every = np.concatenate(differences)
    return float(every.max()), float(np.percentile(every, 99.9))


def main(argv=None) -> None:
    args, workdir = peer_arguments(__doc__, 600, argv)
    files, tars = spoken_corpus(os.path.join(workdir, "corpus"), args.utterances)
    python = peer_python(workdir, "lhotse-venv", PEER_PACKAGES)
    manifests = os.path.join(workdir, "manifests")
    subprocess.run([python, SIDE, "manifests", files, manifests], check=True)
    output = os.path.join(workdir, "out")
    ours = [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", f"{tars}/*.tar",
            "--output", output, *OURS]
    runs = {
        "ours, 1 worker": [*ours, "--direct_num_workers", "1"],
        "lhotse lilcom, 1 job": [python, SIDE, "features", output, manifests, "1", "lilcom"],
        "ours, 2 workers": [*ours, "--direct_num_workers", "2"],
        "lhotse lilcom, 2 jobs": [python, SIDE, "features", output, manifests, "2", "lilcom"],
        "lhotse hdf5, 2 jobs": [python, SIDE, "features", output, manifests, "2", "hdf5"],
        "ours, float16, 1 worker": [*ours, "--direct_num_workers", "1", "--feature_dtype",
                                    "float16"],
        "ours from Lhotse's manifests": [
            sys.executable, "-m", "pipelines.manifest_to_tfrecord", "--input",
            os.path.join(manifests, "recordings.jsonl.gz"), "--media_root", files,
            "--segment_columns", "start,end", "--output", output, "--direct_num_workers", "1",
            *FROM_MANIFESTS],
    }
    disk, median = measured_medians(runs, os.path.join(workdir, "corpus"), output,
                                    args.repeats)
    megabytes = bytes_in(files) / 1e6
    hours = sum(soundfile.info(os.path.join(files, n)).duration for n in os.listdir(files)
                if n.endswith(".flac")) / 3600
    print(f"{args.utterances} utterances, {megabytes:.0f} MB of FLAC, {hours:.2f} h; "
          f"{os.cpu_count()} cores; medians of {args.repeats} interleaved runs")
    print(f"{'run':<30}{'CPU s':>8}{'ours/lhotse':>13}{'wall s':>8}{'RSS MiB':>9}"
          f"{'PSS MiB':>9}{'disk MB':>9}")
    peers = {"ours, 1 worker": "lhotse lilcom, 1 job", "ours, 2 workers": "lhotse lilcom, 2 jobs"}
    for name, m in median.items():
        ratio = (f"{m['cpu_seconds'] / median[peers[name]]['cpu_seconds']:.2f}x"
                 if name in peers else "")
        print(f"{name:<30}{m['cpu_seconds']:8.1f}{ratio:>13}{m['seconds']:8.1f}"
              f"{m['peak_rss'] / 2**20:9.0f}{m['peak_pss'] / 2**20:9.0f}"
              f"{disk[name] / 1e6:9.0f}")
    largest, percentile = agreement(python, files, workdir)
    print(f"fbank against Lhotse's set to Kaldi's options, above its floor: at most "
          f"{largest:.1e}, 99.9% within {percentile:.1e}")
    for ours_run, lhotse_run in peers.items():
        ours_m, theirs = median[ours_run], median[lhotse_run]
        verdict = ("met" if ours_m["cpu_seconds"] <= theirs["cpu_seconds"]
                   and ours_m["seconds"] <= theirs["seconds"] else "MISSED")
        print(f"target, {ours_run} against {lhotse_run}: no more CPU, no more wall: "
              f"{verdict}")
    if not args.workdir:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()

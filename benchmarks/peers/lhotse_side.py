"""Lhotse's side of benchmarks/peers/lhotse_bench.py, run by the Python of the
venv that benchmark makes (Lhotse and torch), never by the project's: it
imports nothing of ours.

    python lhotse_side.py manifests FILES_DIR OUT_DIR
    python lhotse_side.py features OUT_DIR MANIFEST_DIR JOBS lilcom|hdf5
    python lhotse_side.py fbank FLAC OUT_NPY

- manifests: a RecordingSet of every FLAC in FILES_DIR and a SupervisionSet
  of their whole-file supervisions (text from key.txt, speaker from
  key.json), as a recipe's prepare step writes them (not timed);
- features: what icefall's compute_fbank_*.py does with them, timed by the
  benchmark: one torch thread, CutSet.from_manifests, 80-bin Fbank with no
  dither, compute_and_store_features with JOBS processes into lilcom chunks
  (lossy) or HDF5 float32 (lossless);
- fbank: one recording's Fbank set to Kaldi's options (snip_edges, the bins
  up to Nyquist, the audio on the 16-bit scale), for the features' agreement.
"""

from __future__ import annotations

import json
import os
import sys

import torch

torch.set_num_threads(1)
torch.set_num_interop_threads(1)

from lhotse import (  # noqa: E402 - after torch's threads are set, as icefall does
    CutSet,
    Fbank,
    FbankConfig,
    LilcomChunkyWriter,
    NumpyHdf5Writer,
    Recording,
    RecordingSet,
    SupervisionSegment,
    SupervisionSet,
    load_manifest,
)

_STORAGE = {"lilcom": LilcomChunkyWriter, "hdf5": NumpyHdf5Writer}


def manifests(files: str, out: str) -> None:
    recordings, supervisions = [], []
    for name in sorted(os.listdir(files)):
        if not name.endswith(".flac"):
            continue
        key = name[:-len(".flac")]
        recording = Recording.from_file(os.path.join(files, name), recording_id=key)
        with open(os.path.join(files, key + ".txt"), encoding="utf-8") as f:
            text = f.read()
        with open(os.path.join(files, key + ".json"), encoding="utf-8") as f:
            speaker = json.load(f)["speaker"]
        recordings.append(recording)
        supervisions.append(SupervisionSegment(id=key, recording_id=key, start=0.0,
                                               duration=recording.duration, channel=0,
                                               text=text, speaker=speaker))
    os.makedirs(out, exist_ok=True)
    RecordingSet.from_recordings(recordings).to_file(os.path.join(out, "recordings.jsonl.gz"))
    SupervisionSet.from_segments(supervisions).to_file(
        os.path.join(out, "supervisions.jsonl.gz"))


def features(out: str, manifest_dir: str, jobs: int, storage: str) -> None:
    cuts = CutSet.from_manifests(
        recordings=load_manifest(os.path.join(manifest_dir, "recordings.jsonl.gz")),
        supervisions=load_manifest(os.path.join(manifest_dir, "supervisions.jsonl.gz")))
    extractor = Fbank(FbankConfig(num_mel_bins=80, dither=0.0))
    os.makedirs(out, exist_ok=True)
    cuts = cuts.compute_and_store_features(extractor=extractor,
                                           storage_path=os.path.join(out, "feats"),
                                           num_jobs=jobs, storage_type=_STORAGE[storage])
    cuts.to_file(os.path.join(out, "cuts.jsonl.gz"))


def fbank(flac: str, out: str) -> None:
    import numpy as np

    recording = Recording.from_file(flac)
    kaldi = Fbank(FbankConfig(num_mel_bins=80, dither=0.0, snip_edges=True, high_freq=0.0))
    # Kaldi reads 16-bit audio as its integers; Lhotse's floats are in [-1, 1].
    audio = recording.load_audio() * 32768
    np.save(out, kaldi.extract(audio, recording.sampling_rate))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "manifests":
        manifests(*args)
    elif command == "features":
        features(args[0], args[1], int(args[2]), args[3])
    else:
        fbank(*args)

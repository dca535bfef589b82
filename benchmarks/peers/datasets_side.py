"""Hugging Face `datasets`' side of benchmarks/peers/datasets_bench.py, run by
the Python of the venv that benchmark makes (`datasets` 3.x, whose Audio
feature decodes with soundfile, and kaldi-native-fbank), never by the
project's: it imports nothing of ours.

    python datasets_side.py features FILES_DIR OUT_DIR PROCS

What an HF user writes for the job: the FLACs of FILES_DIR as a `datasets`
Audio dataset with their transcripts (key.txt) and speakers (key.json),
`Dataset.map(..., num_proc=PROCS)` computing each utterance's 80-bin Kaldi
fbank with kaldi-native-fbank (no dither, the audio on the 16-bit scale, as
ours and Kaldi's `compute-fbank-feats`), the features stored float32
(`Array2D`), then `save_to_disk(OUT_DIR)`. The dataset's own cache (the
Arrow files `map` writes) goes under OUT_DIR too, so its bytes count.
"""

from __future__ import annotations

import json
import os
import sys

import datasets
import kaldi_native_fbank as knf
import numpy as np

BINS = 80


def _fbank(example: dict) -> dict:
    audio = example["audio"]
    opts = knf.FbankOptions()
    opts.frame_opts.dither = 0.0
    opts.mel_opts.num_bins = BINS
    computer = knf.OnlineFbank(opts)
    computer.accept_waveform(audio["sampling_rate"], audio["array"] * 32768)
    computer.input_finished()
    frames = computer.num_frames_ready
    return {"fbank": np.array([computer.get_frame(i) for i in range(frames)], np.float32)}


def features(files: str, out: str, procs: int) -> None:
    keys = sorted(name[:-len(".flac")] for name in os.listdir(files) if name.endswith(".flac"))
    texts, speakers = [], []
    for key in keys:
        with open(os.path.join(files, key + ".txt"), encoding="utf-8") as f:
            texts.append(f.read())
        with open(os.path.join(files, key + ".json"), encoding="utf-8") as f:
            speakers.append(json.load(f)["speaker"])
    corpus = datasets.Dataset.from_dict({
        "audio": [os.path.join(files, key + ".flac") for key in keys], "text": texts,
        "speaker": speakers}).cast_column("audio", datasets.Audio())
    schema = datasets.Features({"text": datasets.Value("string"),
                                "speaker": datasets.Value("string"),
                                "fbank": datasets.Array2D((None, BINS), "float32")})
    cache = os.path.join(out, "cache")
    os.makedirs(cache)
    computed = corpus.map(_fbank, num_proc=procs, remove_columns=["audio"], features=schema,
                          cache_file_name=os.path.join(cache, "fbank.arrow"))
    computed.save_to_disk(os.path.join(out, "dataset"))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command != "features":
        raise SystemExit(f"unknown command {command!r}")
    features(args[0], args[1], int(args[2]))

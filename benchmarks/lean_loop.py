"""The leanest plain loop that writes the records a job writes: the honest baseline.

    python -m benchmarks.lean_loop speech --input 'DIR/*.tar' --output OUT [--part I/N]
    python -m benchmarks.lean_loop fbank --input 'DIR/*.tar' --output OUT [--part I/N]
    python -m benchmarks.lean_loop payload --input 'DIR/*.tar' --output OUT [--part I/N]

What an engineer would write in an afternoon, tuned, for the two corpora of
benchmarks/writer_bench.py, and nothing more:

- `tarfile` streams each archive (every other one with --part 1/2), members
  grouped by key (WebDataset's rule: the name up to its first dot);
- speech: soundfile decodes the FLAC (to mono float32 at its own 16 kHz), cut
  into 1 s windows, the last one zero-padded, as one 2-D view of the audio; fbank: the same windows'
  80-bin Kaldi filterbanks instead of the audio, by the project's numpy
  function, the fastest way to these values there is (3.7x
  kaldi-native-fbank's speed: transforms/media/features.py);
  payload: the payload's bytes, the label and the JSON's speaker and gain;
- the tf.train.Example bytes: the project's numpy encoder, a recording's
  examples in one call (`encode_columns`), the fastest way to make these
  bytes there is (benchmarks/encoder_bench.py), so the baseline is not
  slowed by a slower serializer (nor by slower features);
- one TFRecord file per split: length, masked CRC32C, data, masked CRC32C.

No Beam, no recipe, no dead letters, no record indexes, no manifest. Each
sample goes to its job's split (the stable hash of its speaker), so the
records are the job's own: `records` reads a folder's records back, for
writer_bench to check that both wrote the same ones.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import os
import re
import struct
import tarfile
from typing import Iterator

import numpy as np
import soundfile

from transforms.format.encoder import ExampleEncoder
from transforms.format.record_index import masked_crc32c
from transforms.media.features import AudioFeatures, compute_features
from transforms.recipe.splits import DEFAULT_SPLITS, SplitPlan

__all__ = ["convert", "records"]

WINDOW = 16000  # 1 s at 16 kHz
_SPEAKER = re.compile(r"^([^_]+)")
_SPLITS = SplitPlan.from_flags(DEFAULT_SPLITS, "__key__")
# The features each corpus's job writes (writer_bench's flags), as (name, kind).
_FEATURES = {
    "speech": [("audio", "float"), ("source_key", "bytes"), ("start_time", "float"),
               ("end_time", "float"), ("label", "int64")],
    "fbank": [("fbank", "float"), ("source_key", "bytes"), ("start_time", "float"),
              ("end_time", "float"), ("label", "int64")],
    "payload": [("payload", "bytes"), ("label", "int64"), ("speaker", "bytes"),
                ("json.gain", "float")],
}
_FBANK = AudioFeatures("fbank", num_mel_bins=80)


def _samples(path: str) -> Iterator[tuple[str, dict]]:
    """(key, {extension: bytes}) of each sample of one archive, streamed."""
    key, members = None, {}
    with tarfile.open(path, "r|*") as tar:
        for member in tar:
            if not member.isfile():
                continue
            name = os.path.basename(member.name)
            stem, _, extension = name.partition(".")
            if stem != key and members:
                yield key, members
                members = {}
            key = stem
            members[extension] = tar.extractfile(member).read()
    if members:
        yield key, members


def _speech_windows(key: str, members: dict) -> tuple[dict, int]:
    """A recording's 1 s windows as columns (ExampleEncoder.encode_columns),
    and how many: the audio zero-padded to whole windows, one 2-D view of it."""
    audio, _ = soundfile.read(io.BytesIO(members["flac"]), dtype="float32")
    if audio.ndim == 2:
        audio = audio.mean(axis=1, dtype=np.float32)
    count = -(-len(audio) // WINDOW)
    if len(audio) < count * WINDOW:
        audio = np.concatenate([audio, np.zeros(count * WINDOW - len(audio), np.float32)])
    starts = np.arange(count, dtype=np.float64)
    return {"audio": audio.reshape(count, WINDOW), "source_key": [key] * count,
            "start_time": starts[:, None], "end_time": starts[:, None] + 1,
            "label": [int(members["cls"])] * count}, count


def _fbank_windows(key: str, members: dict) -> tuple[dict, int]:
    columns, count = _speech_windows(key, members)
    columns["fbank"] = np.stack([compute_features(window, 16000, _FBANK).ravel()
                                 for window in columns.pop("audio")])
    return columns, count


def _payload_example(_key: str, members: dict) -> tuple[dict, int]:
    meta = json.loads(members["json"])
    return {"payload": [members["bin"]], "label": [int(members["cls"])],
            "speaker": [meta["speaker"]], "json.gain": [meta["gain"]]}, 1


_EXAMPLES = {"speech": _speech_windows, "fbank": _fbank_windows, "payload": _payload_example}


def convert(corpus: str, pattern: str, output: str, part: int = 0, parts: int = 1) -> int:
    """Writes the examples of the archives matching `pattern` (every `parts`-th,
    from `part`) into `output/<split>-<part>.tfrecord`; returns how many."""
    encoder = ExampleEncoder(_FEATURES[corpus])
    examples_of = _EXAMPLES[corpus]
    os.makedirs(output, exist_ok=True)
    files: dict = {}
    written = 0
    try:
        for path in sorted(glob.glob(pattern))[part::parts]:
            for key, members in _samples(path):
                split = _SPLITS.split_of(_SPEAKER.match(key).group(1))
                if split not in files:
                    files[split] = open(os.path.join(output, f"{split}-{part}.tfrecord"), "wb")
                out = files[split]
                columns, count = examples_of(key, members)
                for data in encoder.encode_columns(columns, count):
                    length = struct.pack("<Q", len(data))
                    out.write(length + struct.pack("<I", masked_crc32c(length)) + data
                              + struct.pack("<I", masked_crc32c(data)))
                    written += 1
    finally:
        for f in files.values():
            f.close()
    return written


def records(folder: str) -> list:
    """Every record of every .tfrecord file under `folder`, sorted."""
    found = []
    for root, _, names in os.walk(folder):
        for name in names:
            if name.endswith(".tfrecord"):
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
                at = 0
                while at < len(data):
                    (length,) = struct.unpack_from("<Q", data, at)
                    found.append(data[at + 12:at + 12 + length])
                    at += 12 + length + 4
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", choices=sorted(_FEATURES))
    parser.add_argument("--input", required=True, help="the corpus's tar files, a glob")
    parser.add_argument("--output", required=True)
    parser.add_argument("--part", default="0/1", help="I/N: the archives I modulo N")
    args = parser.parse_args()
    part, parts = (int(n) for n in args.part.split("/"))
    print(f"lean loop: {convert(args.corpus, args.input, args.output, part, parts)} "
          "examples written")


if __name__ == "__main__":
    main()

"""The built-in sample corpus: tar shards (or a CSV listing and its FLAC files)
of synthetic speakers, for the demo, the tests and the benchmarks.
`python -m pipelines.sample_corpus` writes one from the command line; what is in
it is that module's docstring.
"""

from __future__ import annotations

import io
import json
import os
import tarfile

import numpy as np

from transforms.testing import synthetic_media

__all__ = ["write_corpus", "write_listing"]

# The split column of a listing, by speaker: a split field's values match the
# --splits names case-insensitively, and VALIDATION names eval.
_LISTING_SPLITS = ("TRAIN",) * 6 + ("VALIDATION", "test")

_RATE = 16_000


def _payload(rng: np.random.Generator, speaker: int, num_bytes: int) -> bytes:
    n = num_bytes // 2
    t = np.arange(n) / _RATE
    tone = 0.3 * np.sin(2 * np.pi * (110 + 15 * speaker) * t)
    noise = rng.normal(0, 0.05, n)
    return ((tone + noise).clip(-1, 1) * 32767).astype("<i2").tobytes()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
    tar.addfile(info, io.BytesIO(data))


def _payload_members(speaker: int, rng, payload_bytes: int, bad: bool) -> list:
    return [("bin", _payload(rng, speaker, payload_bytes)),
            ("cls", b"unknown" if bad else str(speaker).encode())]


def _av_members(index: int, speaker: int, seconds: float, bad: bool) -> list:
    audio = synthetic_media.voice(synthetic_media.speaker_pitch(speaker), seconds, seed=index)
    colour = synthetic_media.speaker_colour(speaker)
    if index % 2:
        video = synthetic_media.video_bytes(colour, seconds, audio=audio)
        members = [("mp4", video)]
    else:
        video = synthetic_media.video_bytes(colour, seconds)
        members = [("flac", synthetic_media.flac_bytes(audio, 16_000)), ("mp4", video)]
    if bad:
        members = [(ext, data[: len(data) // 3] if ext == "mp4" else data) for ext, data in members]
    return members + [("cls", str(speaker).encode())]


def write_corpus(output: str, shards: int = 4, samples_per_shard: int = 64,
                 payload_bytes: int = 16_384, speakers: int = 8, bad_samples: int = 0,
                 kind: str = "payload", seconds: float = 2.0) -> list:
    """Writes `shards` tar files under `output`; returns their paths."""
    os.makedirs(output, exist_ok=True)
    rng = np.random.default_rng(0)
    paths, index = [], 0
    for shard in range(shards):
        path = os.path.join(output, f"corpus-{shard:05d}.tar")
        with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
            for _ in range(samples_per_shard):
                speaker = index % speakers
                key = f"spk{speaker:02d}_{index:05d}"
                bad = index < bad_samples
                members = (_payload_members(speaker, rng, payload_bytes, bad)
                           if kind == "payload" else _av_members(index, speaker, seconds, bad))
                duration = payload_bytes / 2 / _RATE if kind == "payload" else seconds
                meta = {"speaker": f"spk{speaker:02d}", "duration_s": duration,
                        "gain": round(float(rng.uniform(0.5, 1.0)), 3)}
                for ext, data in members + [("json", json.dumps(meta, sort_keys=True).encode())]:
                    _add(tar, f"{key}.{ext}", data)
                index += 1
        paths.append(path)
    return paths


def write_listing(output: str, samples: int = 32, speakers: int = 8,
                  seconds: float = 1.0) -> str:
    """`samples` FLAC files under `output/media/` and `output/clips.csv` naming them
    (relative paths); returns the CSV's path."""
    os.makedirs(os.path.join(output, "media"), exist_ok=True)
    rows = ["audio,label,speaker,split"]
    for index in range(samples):
        speaker = index % speakers
        name = f"media/spk{speaker:02d}_{index:05d}.flac"
        audio = synthetic_media.voice(synthetic_media.speaker_pitch(speaker), seconds, seed=index)
        with open(os.path.join(output, name), "wb") as f:
            f.write(synthetic_media.flac_bytes(audio, _RATE))
        rows.append(f"{name},{speaker},spk{speaker:02d},"
                    f"{_LISTING_SPLITS[speaker % len(_LISTING_SPLITS)]}")
    path = os.path.join(output, "clips.csv")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")
    return path

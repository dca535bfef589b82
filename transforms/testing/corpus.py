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

__all__ = ["write_corpus", "write_listing", "write_meetings"]

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
        video = synthetic_media.video_bytes(colour, seconds, audio=audio, start=index)
        members = [("mp4", video)]
    else:
        video = synthetic_media.video_bytes(colour, seconds, start=index)
        members = [("flac", synthetic_media.flac_bytes(audio, 16_000)), ("mp4", video)]
    if bad:
        members = [(ext, data[: len(data) // 3] if ext == "mp4" else data) for ext, data in members]
    return members + [("cls", str(speaker).encode())]


# A voice from this pitch up is in the high register (the av corpus's json.register 1).
_HIGH_HZ = 175.0


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
                if kind == "av":  # a label voices share across speakers: low or high pitch
                    meta["register"] = int(synthetic_media.speaker_pitch(speaker) >= _HIGH_HZ)
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


def _turns(rng: np.random.Generator, seconds: float, speakers: int) -> list:
    """(speaker, start, duration) turns of 2-6 s tiling `seconds`, no speaker twice in a row."""
    turns, start, speaker = [], 0.0, -1
    while start < seconds - 1e-9:
        speaker = (speaker + 1 + int(rng.integers(speakers - 1))) % speakers
        duration = min(round(float(rng.uniform(2.0, 6.0)), 2), round(seconds - start, 2))
        turns.append((speaker, round(start, 2), duration))
        start += duration
    return turns


def write_meetings(output: str, recordings: int = 4, speakers: int = 6,
                   seconds: float = 60.0) -> str:
    """`recordings` long FLAC recordings of speaker turns, in one tar (KEY.flac,
    KEY.rttm: who speaks when; KEY.json: the meeting's room) and as files under
    `output/media/` with `output/segments.jsonl`, a NeMo-style listing of one row
    per turn (audio_filepath, offset, duration, speaker, text); returns the
    listing's path."""
    os.makedirs(os.path.join(output, "media"), exist_ok=True)
    rng = np.random.default_rng(7)
    rows = []
    with tarfile.open(os.path.join(output, "meetings.tar"), "w",
                      format=tarfile.GNU_FORMAT) as tar:
        for index in range(recordings):
            key = f"meeting{index:02d}"
            turns = _turns(rng, seconds, speakers)
            audio = np.concatenate([
                synthetic_media.voice(synthetic_media.speaker_pitch(speaker), duration,
                                      seed=index * 1000 + i)
                for i, (speaker, _, duration) in enumerate(turns)])
            flac = synthetic_media.flac_bytes(audio, _RATE)
            rttm = "".join(f"SPEAKER {key} 1 {start:.2f} {duration:.2f} <NA> <NA> "
                           f"spk{speaker:02d} <NA> <NA>\n" for speaker, start, duration in turns)
            _add(tar, f"{key}.flac", flac)
            _add(tar, f"{key}.json", json.dumps({"room": f"room{index % 2}"}).encode())
            _add(tar, f"{key}.rttm", rttm.encode())
            with open(os.path.join(output, "media", f"{key}.flac"), "wb") as f:
                f.write(flac)
            rows += [json.dumps({"audio_filepath": f"media/{key}.flac", "offset": start,
                                 "duration": duration, "speaker": f"spk{speaker:02d}",
                                 "text": f"turn {i} of {key}"})
                     for i, (speaker, start, duration) in enumerate(turns)]
    path = os.path.join(output, "segments.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")
    return path

"""A built-in sample corpus: tar shards of samples for the demo, tests and benchmarks.

    python -m pipelines.sample_corpus --output demo/corpus --shards 4 --samples_per_shard 64

Each sample `spkNN_IIIII` has a binary payload (`.bin`: int16 PCM of a tone
whose pitch depends on the speaker, plus noise), a class label (`.cls`: the
speaker index) and a JSON member (`.json`: speaker, duration, gain). With
`--bad_samples K`, K samples carry an unparseable label, to show dead letters.
The corpus is a pure function of the flags: same flags, same bytes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tarfile

import numpy as np

__all__ = ["write_corpus", "run"]

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


def write_corpus(output: str, shards: int = 4, samples_per_shard: int = 64,
                 payload_bytes: int = 16_384, speakers: int = 8, bad_samples: int = 0) -> list:
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
                label = b"unknown" if index < bad_samples else str(speaker).encode()
                meta = {"speaker": f"spk{speaker:02d}", "duration_s": payload_bytes / 2 / _RATE,
                        "gain": round(float(rng.uniform(0.5, 1.0)), 3)}
                _add(tar, f"{key}.bin", _payload(rng, speaker, payload_bytes))
                _add(tar, f"{key}.cls", label)
                _add(tar, f"{key}.json", json.dumps(meta, sort_keys=True).encode())
                index += 1
        paths.append(path)
    return paths


def run(argv=None) -> list:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="Directory for the tar shards.")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--samples_per_shard", type=int, default=64)
    parser.add_argument("--payload_bytes", type=int, default=16_384)
    parser.add_argument("--speakers", type=int, default=8)
    parser.add_argument("--bad_samples", type=int, default=0)
    args = parser.parse_args(argv)
    paths = write_corpus(args.output, args.shards, args.samples_per_shard,
                         args.payload_bytes, args.speakers, args.bad_samples)
    total = sum(os.path.getsize(p) for p in paths)
    print(f"wrote {len(paths)} shards, {args.shards * args.samples_per_shard} samples, "
          f"{total / 1e6:.1f} MB to {args.output}")
    return paths


if __name__ == "__main__":
    run(sys.argv[1:])

"""Noise-like recordings and melodies made by sox, none a copy of another:
what a near-duplicate check must not pair (rain, wind and engines are
coloured noise; a room's mains hum and a held chord are a few steady tones;
plucked melodies share an instrument and a scale). sox seeds each noise
afresh, so every file is an independent draw. The near-duplicate tests and
benchmark (tests/test_duplicates.py, benchmarks/duplicates_bench.py)
measure false pairs on these.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Sequence

__all__ = ["NOISE_LIKE", "melody", "noise_like"]

# By kind, the sox synth arguments after the duration.
NOISE_LIKE = {
    "brown": ("brownnoise", "vol", "0.5"),
    "pink": ("pinknoise", "vol", "0.5"),
    "white": ("whitenoise", "vol", "0.5"),
    # 50 Hz mains and its harmonic over a faint hiss.
    "hum": ("sine", "50", "sine", "100", "whitenoise", "remix", "1v0.5,2v0.3,3v0.003"),
    # An A major chord, held.
    "chord": ("sine", "440", "sine", "554", "sine", "659", "remix", "-", "vol", "0.3"),
}


def noise_like(target: str, kind: str, seconds: float = 4) -> None:
    """`seconds` of NOISE_LIKE[kind] as 16 kHz mono FLAC at `target`."""
    subprocess.run(["sox", "-V1", "-n", "-r", "16000", "-c", "1", "-b", "16", target,
                    "synth", str(seconds), *NOISE_LIKE[kind]], check=True, capture_output=True)


def melody(target: str, notes: Sequence[float], seconds: float = 0.35) -> None:
    """`notes` (Hz) plucked one after another by sox, each `seconds` long, as
    16 kHz mono FLAC at `target`."""
    with tempfile.TemporaryDirectory() as folder:
        parts = [os.path.join(folder, f"{n}.wav") for n in range(len(notes))]
        for part, hz in zip(parts, notes):
            subprocess.run(["sox", "-n", "-r", "16000", "-b", "16", part, "synth", str(seconds),
                            "pluck", str(hz)], check=True, capture_output=True)
        subprocess.run(["sox", *parts, target], check=True, capture_output=True)

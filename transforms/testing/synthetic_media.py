"""Synthetic speakers: speech-like audio and drawn video, encoded with real codecs.

Used by the demo corpus, the tests and the benchmarks. Each speaker has a pitch
(its voice) and a colour (its face); everything is a pure function of its
arguments, so corpora are reproducible byte for byte.
"""

from __future__ import annotations

import io
from fractions import Fraction

import av
import numpy as np
import soundfile as sf

from transforms.media.same_recording import encoded_levels

__all__ = ["speaker_pitch", "speaker_colour", "voice", "flac_bytes", "video_bytes",
           "band_profile"]

_PALETTE = np.array([(220, 40, 40), (40, 180, 60), (50, 80, 220), (230, 200, 40),
                     (200, 60, 200), (40, 200, 200), (240, 130, 30), (130, 130, 130)], np.uint8)


def speaker_pitch(speaker: int) -> float:
    """The speaker's fundamental frequency in Hz (100 to 250)."""
    return 100.0 + (speaker * 37) % 150


def speaker_colour(speaker: int) -> np.ndarray:
    """The speaker's RGB colour."""
    return _PALETTE[speaker % len(_PALETTE)]


def voice(pitch: float, seconds: float, rate: int = 16_000, seed: int = 0) -> np.ndarray:
    """Voiced, syllable-like float32 audio: harmonics of `pitch`, 4 Hz envelope, noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * rate)) / rate
    f0 = pitch * (1 + 0.02 * np.sin(2 * np.pi * 5 * t))          # vibrato
    phase = 2 * np.pi * np.cumsum(f0) / rate
    harmonics = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.5 * (1 - np.cos(2 * np.pi * 4 * t)) ** 2         # syllables
    signal = 0.25 * envelope * harmonics + 0.01 * rng.standard_normal(len(t))
    return signal.astype(np.float32)


def flac_bytes(samples: np.ndarray, rate: int) -> bytes:
    """FLAC (16-bit) of a float32 signal, written by libsndfile."""
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def _frame(colour: np.ndarray, index: int, size: tuple) -> np.ndarray:
    """A frame of the speaker's colour with a white square moving across it."""
    height, width = size
    image = np.empty((height, width, 3), np.uint8)
    image[:] = colour
    side = height // 4
    x = (index * 3) % (width - side)
    image[height // 2 - side // 2: height // 2 + side // 2, x:x + side] = 255
    return image


def video_bytes(colour: np.ndarray, seconds: float, fps: int = 10, size: tuple = (120, 160),
                audio: np.ndarray | None = None, audio_rate: int = 16_000,
                start: int = 0) -> bytes:
    """An MP4: H.264 frames of `colour` with a moving square, which sets out
    `start` steps along its way (videos of one colour differ by it), and AAC
    audio if given."""
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as container:
        video = container.add_stream("libx264", rate=fps)
        video.height, video.width = size
        video.pix_fmt = "yuv420p"
        video.options = {"preset": "veryfast", "crf": "23"}
        sound = None
        if audio is not None:
            sound = container.add_stream("aac", rate=audio_rate)
            sound.layout = "mono"
        for i in range(round(seconds * fps)):
            frame = av.VideoFrame.from_ndarray(_frame(colour, start + i, size), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            container.mux(video.encode(frame))
        container.mux(video.encode())
        if sound is not None:
            chunk = 1024
            for start in range(0, len(audio), chunk):
                block = audio[start:start + chunk].reshape(1, -1)
                frame = av.AudioFrame.from_ndarray(block, format="flt", layout="mono")
                frame.sample_rate, frame.pts = audio_rate, start
                container.mux(sound.encode(frame))
            container.mux(sound.encode())
    return buf.getvalue()


def band_profile(rng: np.random.Generator, seconds: float = 3.0) -> str:
    """A recording's encoded band-level profile (transforms/media/same_recording.py)
    of random levels: the same text for copies of one recording, another for
    every other, as `near` digests made without audio need."""
    frames = int(seconds / 0.032)
    return encoded_levels(rng.integers(0, 16, (frames, 16), dtype=np.uint8))

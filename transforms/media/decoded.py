"""Decoded media as plain values: what decoders produce and cutters consume.

Beam-free. `Audio` is a mono (or one chosen channel) signal at a known rate;
`Frame` is one video frame at a known time. Cutters never see encoded bytes,
and decoders never know how their output will be cut.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from typing import IO, Iterator

import numpy as np

from transforms.format.sample import StoredBytes

# How far a segment's span may reach past its media's end and be cut there:
# annotations round their times (RTTM to the millisecond); further is an error.
SPAN_SLACK_S = 0.001
# int16 audio is float32 audio times this (transforms/media/audio.py).
INT16_FULL_SCALE = 32767

__all__ = ["Audio", "Frame", "INT16_FULL_SCALE", "MediaError", "NoSamples", "full_scale_floats",
           "media_file", "staged"]


def full_scale_floats(samples: np.ndarray) -> np.ndarray:
    """Audio samples as float32 at full scale 1: int16 scaled back as the
    decoder scaled it, float32 as they are."""
    if samples.dtype == np.int16:
        return samples.astype(np.float32) / INT16_FULL_SCALE
    return np.asarray(samples, np.float32)


@contextlib.contextmanager
def media_file(data: bytes | StoredBytes) -> Iterator[IO[bytes]]:
    """A seekable binary file of a field's bytes, in memory or left stored (read
    as it goes, so a recording is never held whole): a new one each time, so
    two demuxers can read one field side by side. Closed after; a decoder's
    error caused by the storage failing a read is raised as that storage error
    (the decoders see only a short read), so the read is retried, not taken
    for bad data."""
    with (data.open() if isinstance(data, StoredBytes) else io.BytesIO(data)) as file:
        try:
            yield file
        except Exception:
            failure = getattr(file, "read_failure", None)
            if failure is not None:
                raise failure from None
            raise


class MediaError(ValueError):
    """Media that cannot be decoded or used (corrupt, truncated, wrong format,
    unsupported codec, no audio track, too short). The message says why; the
    pipeline turns it into a dead letter naming the sample, `member` (the
    field) and `stage`."""

    def __init__(self, message: str, *, stage: str = "decode", member: str | None = None):
        super().__init__(message)
        self.stage = stage
        self.member = member

    def tagged(self, stage: str, member: str) -> "MediaError":
        """The error tagged with the stage and field it came from; the innermost tag wins."""
        if self.member is not None:
            return self
        return type(self)(str(self), stage=stage, member=member)


class NoSamples(MediaError):
    """A well-formed recording of no length (a WAV header and no samples)."""


def staged(stage: str, member: str, fn, *args, **kwargs):
    """Calls a decoder, tagging its MediaError with the stage and the field it read."""
    try:
        return fn(*args, **kwargs)
    except MediaError as e:
        raise e.tagged(stage, member) from e


@dataclasses.dataclass(frozen=True)
class Audio:
    """A 1-D signal: float32 in [-1, 1] or int16, `sample_rate` samples per second.

    `start` is the time of the first sample in seconds (non-zero for a block of
    a longer stream); `source_rate` and `source_channels` describe the input
    before resampling and mix-down.
    """

    samples: np.ndarray
    sample_rate: int
    start: float = 0.0
    source_rate: int | None = None
    source_channels: int | None = None

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sample_rate

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclasses.dataclass(frozen=True)
class Frame:
    """One video frame at `time` seconds: an HxWx3 uint8 RGB image, or its JPEG bytes."""

    time: float
    image: np.ndarray | None = None
    jpeg: bytes | None = None
    height: int = 0
    width: int = 0

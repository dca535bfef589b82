"""What is heard of audio as it streams: its peak and its active power.

Beam-free. The active part of a signal is its 20 ms frames whose power is
within 40 dB of its loudest frame's; its active power is their mean power.
The frames run on across blocks, so the figure does not depend on how a
decoder, a resampler or a convolution cut the stream. An augmented copy's
noise is scaled to an SNR against it (transforms/media/augment.py).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from transforms.media.decoded import Audio, full_scale_floats
from transforms.media.recorded import RecordedAudio

__all__ = ["ActivePower", "Heard", "NOTHING_HEARD", "active_power"]

_FRAME_S = 0.02
_ACTIVE_DB = 40.0


class Heard(NamedTuple):
    """What was measured of a sample's audio (`ActivePower`): the original's
    by its cut, or a copy's perturbed speech by a first pass, which
    `recorded` keeps."""

    peak: float = 0.0       # full scale 1
    power: float = 0.0      # of its active part
    samples: int = 0        # at the cut's rate
    speed: float = 1.0      # the speed perturbation of the audio heard
    recorded: RecordedAudio | None = None


NOTHING_HEARD = Heard()


class ActivePower:
    """A tap measuring the audio a cut decodes: its peak, and the power of its
    active part (see the module docstring)."""

    def __init__(self):
        self._peak, self._samples = 0.0, 0
        self._frames: list = []   # each 20 ms frame's mean power
        # The samples after the last whole frame: frames run on across blocks,
        # whose lengths (a resampler's, a convolution's) need not be whole frames.
        self._rest = np.empty(0, np.float32)

    def __call__(self, block: Audio) -> None:
        samples = full_scale_floats(block.samples)
        self._samples += len(samples)
        if len(samples):
            self._peak = max(self._peak, float(samples.max()), -float(samples.min()))
        if len(self._rest):
            samples = np.concatenate([self._rest, samples])
        size = max(1, round(_FRAME_S * block.sample_rate))
        whole = len(samples) // size * size
        self._rest = samples[whole:]
        if whole:
            # float32 sums of 320 squares: 3e-7 from float64's, at a fifth of the time.
            frames = samples[:whole].reshape(-1, size)
            self._frames.append(np.einsum("ij,ij->i", frames, frames) / size)

    def heard(self, speed: float = 1.0, recorded: RecordedAudio | None = None) -> Heard:
        """What it heard, of audio perturbed by `speed` (and kept in `recorded`)."""
        powers = np.concatenate(self._frames) if self._frames else np.empty(0)
        return Heard(self._peak, active_power(powers), self._samples, speed, recorded)


def active_power(frame_powers: np.ndarray) -> float:
    """The mean of the frame powers within 40 dB of the largest (0 for silence)."""
    if not len(frame_powers) or not frame_powers.max() > 0:
        return 0.0
    active = frame_powers[frame_powers >= frame_powers.max() * 10 ** (-_ACTIVE_DB / 10)]
    return float(active.mean())

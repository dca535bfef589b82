"""Reverberation as the audio streams: convolution with a room impulse response.

Beam-free. The RIR is given at the audio's rate (transforms/media/augment.py
scales it to unit energy). The convolution is done by FFT overlap-add, block
by block, so memory stays flat however long the recording. It is aligned on
the RIR's direct path and keeps its input's length: the output's sample n is
the full convolution's sample n + d, d the index of the RIR's largest
magnitude, so reverberated speech stays in step with its transcript and
segments.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Reverb"]


class Reverb:
    """Convolution with `rir` as the audio streams: called with each block's
    float32 samples, `last` on the final call, it returns the output samples
    that are ready, aligned and as long as the input in all (module
    docstring)."""

    def __init__(self, rir: np.ndarray):
        self._delay = int(np.argmax(np.abs(rir)))
        # Four times the RIR: measured fastest with numpy's FFT (fewer blocks, each not
        # much dearer), 10-15% faster than twice.
        self._fft_size = 1 << max(12, (4 * len(rir) - 1).bit_length())
        self._block = self._fft_size - len(rir) + 1
        self._spectrum = np.fft.rfft(rir.astype(np.float32), self._fft_size)
        self._tail = np.zeros(len(rir) - 1, np.float32)
        self._pending = np.empty(0, np.float32)
        self._received = self._produced = 0   # input samples; full-convolution samples made

    def __call__(self, samples: np.ndarray, last: bool) -> np.ndarray:
        self._received += len(samples)
        pending = np.concatenate([self._pending, samples]) if len(self._pending) else samples
        made = []
        while len(pending) >= self._block or (last and len(pending)):
            chunk, pending = pending[:self._block], pending[self._block:]
            spectrum = np.fft.rfft(chunk, self._fft_size)
            spectrum *= self._spectrum
            full = np.fft.irfft(spectrum, self._fft_size)[:len(chunk) + len(self._tail)]
            full[:len(self._tail)] += self._tail
            made.append(full[:len(chunk)])
            self._tail = full[len(chunk):]
        if last:
            made.append(self._tail)
        self._pending = pending
        return self._aligned(np.concatenate(made) if made else np.empty(0, np.float32), last)

    def _aligned(self, full: np.ndarray, last: bool) -> np.ndarray:
        """The part of the full convolution's next samples `full` that the
        output keeps: from the direct path on, no more than the input's length."""
        start = self._produced
        self._produced += len(full)
        end = self._delay + self._received if last else self._produced
        return full[max(0, self._delay - start):max(0, end - start)].astype(np.float32,
                                                                            copy=False)

"""Audio recorded as it streams, to be replayed rather than made again.

Beam-free. A reverberated copy's speech is heard by a first pass (its peak
and active power decide its gain and noise) and replayed by the second:
the convolution is most of such a copy's cost (transforms/media/augment.py).
"""

from __future__ import annotations

import tempfile
from typing import Iterator

import numpy as np

from transforms.media.decoded import Audio

__all__ = ["RecordedAudio"]


class RecordedAudio:
    """A copy's perturbed speech as a first pass made it, kept to be replayed
    rather than made again (the convolution is most of a reverberated copy's
    cost): its blocks in memory up to 16 MiB, then all of it in a local
    temporary file, so memory stays flat. A tap while recording; `blocks()`
    replays it."""

    _IN_MEMORY = 16 << 20

    def __init__(self, dtype: str):
        self.dtype = np.dtype(dtype)   # of the decoded audio, which the copy is written in
        self._blocks: list = []        # Audio, until they pass _IN_MEMORY
        self._held = 0
        self._file = None
        self._origin = self._rate = None

    def __call__(self, block: Audio) -> None:
        if self._origin is None:
            self._origin, self._rate = block.start, block.sample_rate
        samples = np.ascontiguousarray(block.samples, np.float32)
        if self._file is None:
            self._blocks.append(Audio(samples, block.sample_rate, block.start))
            self._held += samples.nbytes
            if self._held <= self._IN_MEMORY:
                return
            self._file = tempfile.TemporaryFile()
            samples = np.concatenate([b.samples for b in self._blocks])
            self._blocks = []
        self._file.write(samples.data)

    def blocks(self, block_seconds: float = 10.0) -> Iterator[Audio]:
        """The recorded audio, in blocks on its timeline."""
        if self._file is None:
            yield from self._blocks
            return
        self._file.seek(0)
        size, emitted = 4 * round(block_seconds * self._rate), 0
        while chunk := self._file.read(size):
            samples = np.frombuffer(chunk, np.float32)
            yield Audio(samples, self._rate, self._origin + emitted / self._rate)
            emitted += len(samples)

    @property
    def on_disk(self) -> bool:
        return self._file is not None

    def close(self) -> None:
        self._blocks = []
        if self._file is not None:
            self._file.close()

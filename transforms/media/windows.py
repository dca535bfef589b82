"""Cutting decoded audio into fixed-length windows, exact to the sample.

Beam-free and pure. A window of `window_s` seconds is L = round(window_s * rate)
samples and the hop is H = round(hop_s * rate) samples; window i covers samples
[i*H, i*H + L) of the source, so boundaries never drift with floating point.
Times are `audio.start + sample_index / rate`. `round` is Python's (half to even).

`audio_windows` takes a stream of consecutive blocks (`stream_audio`'s output,
or `[decode_audio(...)]`) and keeps only the samples that a coming window still
needs, so an hour-long recording is cut in O(window + block) memory. Seeded
random crops are the exception: they need the total length first, so they
collect the stream. `AudioTimeline` serves windows centred on times that only
move forward (a video's frames) from such a stream, in the same memory; its
windows are `window_at`'s on the whole signal.

Window sample arrays are read-only and may share memory with each other (with
overlapping hops) and with the input blocks; copy one before changing it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Iterable, Iterator

import numpy as np

from transforms.format.arguments import check_choice, check_number
from transforms.format.stable_hash import stable_hash64
from transforms.media.decoded import INT16_FULL_SCALE, Audio, MediaError

__all__ = ["AudioTimeline", "OutsideAudio", "WindowOptions", "Window", "audio_windows",
           "window_at"]

_REMAINDERS = ("pad", "drop")
_CROP_SALT = b"datagen-crop"
# int16 full scale, matching transforms.media.audio's float -> int16 convention.


@dataclasses.dataclass(frozen=True)
class WindowOptions:
    """How to cut a source into windows.

    window_s, hop_s: window length and hop in seconds (hop None = window_s, no overlap).
    remainder: "pad" zero-pads the partial window at the end, "drop" drops it.
    max_windows: at most this many windows per source (0 = no limit); the
        stream is not read further once reached.
    random_crops: > 0 replaces the regular grid by this many crops at starts
        drawn from a stable hash of (seed, key, crop number): the same crops on
        every run and process, in time order.
    min_rms_db: drop windows whose RMS in dBFS (full scale 1.0 for float, 32767
        for int16) is below this; each drop is counted in stats["windows_silent"].

    >>> import apache_beam as beam, transforms as dg
    >>> from apache_beam.testing.util import assert_that, equal_to
    >>> from transforms.testing.synthetic_media import flac_bytes, voice
    >>> sample = {"__key__": "a", "flac": flac_bytes(voice(220, 2.0), 16000)}
    >>> cut = dg.CutOptions(mode="audio_windows", audio_fields=("flac",),
    ...                     windows=dg.WindowOptions(window_s=1.0, hop_s=0.5, remainder="drop"))
    >>> with dg.make_pipeline() as p:   # 2 s in 1 s windows every 0.5 s: 3 windows
    ...     cut_up = p | beam.Create([sample]) | dg.CutSamples(cut)
    ...     starts = cut_up.examples | beam.Map(lambda e: e["start_time"])
    ...     _ = assert_that(starts, equal_to([0.0, 0.5, 1.0]))
    """

    window_s: float = 1.0
    hop_s: float | None = None
    remainder: str = "pad"
    max_windows: int = 0
    random_crops: int = 0
    seed: int = 0
    min_rms_db: float | None = None

    def __post_init__(self):
        check_number("window_s", self.window_s, above=0)
        check_number("hop_s", self.hop_s, above=0, optional=True)
        check_choice("remainder", self.remainder, _REMAINDERS)
        for name in ("max_windows", "random_crops"):
            check_number(name, getattr(self, name), integer=True, least=0)
        check_number("seed", self.seed, integer=True)
        check_number("min_rms_db", self.min_rms_db, optional=True)


@dataclasses.dataclass(frozen=True, eq=False)
class Window:
    """`samples` (exactly round(window_s * rate) of them, zero-padded where the
    source ran out) spanning [start, end) seconds; end includes any padding."""

    start: float
    end: float
    samples: np.ndarray


def audio_windows(blocks: Iterable[Audio], options: WindowOptions, *, key: str,
                  stats: dict | None = None) -> Iterator[Window]:
    """The windows of one source, in time order.

    `blocks` are consecutive pieces of one signal (same rate and dtype, each
    starting where the last ended). `key` names the source (it seeds random
    crops). Pad mode: if the end of the audio is not in any full window, the
    next window on the grid is yielded zero-padded (it holds that whole tail);
    later grid positions, holding even less audio, are not. So there is at most
    one padded window per source, never one that is all padding, and none whose
    audio is all in earlier windows (with overlap, the last full window often
    reaches the end). Audio shorter than one window gives one padded window,
    or, with "drop", a MediaError, as does audio with no samples.
    """
    stream = iter(blocks)
    first = next(stream, None)
    if first is None:
        raise MediaError(f"no audio to cut into windows for {key!r}")
    rate = first.sample_rate
    length = _samples(options.window_s, rate, "window_s")
    hop = _samples(options.hop_s or options.window_s, rate, "hop_s")
    stream = _checked(itertools.chain([first], stream), rate, first.samples.dtype, first.start)
    if options.random_crops:
        windows = _crops(stream, first.start, rate, length, options, key)
    else:
        windows = _grid(stream, first.start, rate, length, hop, options.remainder)
    full_scale = INT16_FULL_SCALE if first.samples.dtype == np.int16 else 1.0
    produced = 0
    for window, real in windows:
        if options.min_rms_db is not None and _rms_db(real, full_scale) < options.min_rms_db:
            if stats is not None:
                stats["windows_silent"] = stats.get("windows_silent", 0) + 1
            continue
        yield window
        produced += 1
        if produced == options.max_windows:
            return


class OutsideAudio(MediaError):
    """A window asked for where the audio has no sample at all."""


def window_at(audio: Audio, center_s: float, window_s: float) -> Window:
    """The window of `window_s` seconds centred on `center_s`, zero-padded past either edge.

    `center_s` is on the audio's timeline (`audio.start` is the time of sample
    0). The window starts at sample round((center_s - audio.start) * rate) - L // 2.
    Raises OutsideAudio if the window does not overlap the audio at all (padding
    alone is not an example).
    """
    rate = audio.sample_rate
    length = _samples(window_s, rate, "window_s")
    start = round((center_s - audio.start) * rate) - length // 2
    return _centred(audio.samples, 0, len(audio.samples), audio.start, rate, start, length,
                    center_s, window_s)


def _centred(samples: np.ndarray, offset: int, total: int | None, base: float, rate: int,
             start: int, length: int, center_s: float, window_s: float) -> Window:
    """Samples [start, start + length) of a signal whose samples from index
    `offset` on are `samples`, `total` long (None: it goes on past them)."""
    end = start + length
    lo, hi = max(start, 0), end if total is None else min(end, total)
    if lo >= hi:
        until = "" if total is None else f"-{base + total / rate:.3f}"
        raise OutsideAudio(f"a {window_s:.2f} s window centred at {center_s:.3f} s lies outside "
                           f"the audio ({base:.3f}{until} s)")
    if lo == start and hi == end:
        window = samples[lo - offset:hi - offset]
    else:
        window = np.zeros(length, samples.dtype)
        window[lo - start:hi - start] = samples[lo - offset:hi - offset]
    return Window(base + start / rate, base + end / rate, _readonly(window))


class AudioTimeline:
    """`window_at` over a stream of consecutive blocks, for centres that move
    forward (a video's frames, in time order): it decodes only as far as a
    window reaches and keeps a window's length before the last one, so a long
    video's frames take their audio windows without the audio decoded whole.

    `start` and `sample_rate` are the first block's. `finish()` reads the rest
    of the stream, so an error in it (a cut file) is raised as a whole decode
    would raise it.
    """

    def __init__(self, blocks: Iterable[Audio]):
        self._blocks = iter(blocks)
        first = next(self._blocks, None)
        if first is None:
            raise MediaError("no audio samples")
        self.start, self.sample_rate = first.start, first.sample_rate
        self._dtype = first.samples.dtype
        self._stream = _checked(itertools.chain([first], self._blocks), self.sample_rate,
                                self._dtype, self.start)
        self._held = np.empty(0, self._dtype)
        self._offset = 0        # signal index of _held[0]
        self._ended = False

    def window_at(self, center_s: float, window_s: float) -> Window:
        """As `window_at(audio, center_s, window_s)` on the whole signal, for a
        centre at most a window before the last one's (MediaError further back)."""
        rate = self.sample_rate
        length = _samples(window_s, rate, "window_s")
        start = round((center_s - self.start) * rate) - length // 2
        if max(start, 0) < self._offset:
            raise MediaError(f"an audio window at {center_s:.3f} s is asked for after one "
                             f"more than a window later: times must not go back")
        while not self._ended and self._offset + len(self._held) < start + length:
            self._take(next(self._stream, None))
        # A window's length of the past is kept, for times slightly out of order.
        drop = min(max(start - length, 0), self._offset + len(self._held)) - self._offset
        if drop > 0:
            self._held, self._offset = self._held[drop:], self._offset + drop
        total = self._offset + len(self._held) if self._ended else None
        return _centred(self._held, self._offset, total, self.start, rate, start, length,
                        center_s, window_s)

    def _take(self, samples: np.ndarray | None) -> None:
        if samples is None:
            self._ended = True
        else:
            # A new array (never written in place): windows already given stay valid.
            self._held = np.concatenate([self._held, samples]) if len(self._held) else samples

    def finish(self) -> None:
        """Reads the stream to its end, keeping nothing."""
        self._held = self._held[:0]
        for _ in self._stream:
            pass
        self._ended = True


def _samples(seconds: float, rate: int, what: str) -> int:
    count = round(seconds * rate)
    if count < 1:
        raise ValueError(f"{what}={seconds} s is less than one sample at {rate} Hz")
    return count


def _checked(blocks: Iterable[Audio], rate: int, dtype: np.dtype, start: float
             ) -> Iterator[np.ndarray]:
    """The blocks' samples, after checking that they continue one signal."""
    offset = 0
    for block in blocks:
        expected = start + offset / rate
        if (block.sample_rate != rate or block.samples.dtype != dtype
                or abs(block.start - expected) > 0.5 / rate):
            raise ValueError(f"audio blocks do not continue one signal: a {block.sample_rate} Hz "
                             f"{block.samples.dtype} block at {block.start:.6f} s after "
                             f"{rate} Hz {dtype} up to {expected:.6f} s")
        offset += len(block.samples)
        yield block.samples


def _grid(stream: Iterator[np.ndarray], base: float, rate: int, length: int, hop: int,
          remainder: str) -> Iterator[tuple[Window, np.ndarray]]:
    """(window, its real samples) on the regular grid, keeping only a window's worth."""
    buffer = _readonly(np.empty(0, np.float32))
    buffer_start = 0       # source index of buffer[0]
    total = 0              # source samples seen
    next_start = 0         # source index of the next window's first sample
    covered = 0            # source index just past the last full window
    for samples in stream:
        # A new array each time (never written in place), so the read-only
        # windows already yielded as views of the old one stay valid.
        buffer = _readonly(np.concatenate([buffer, samples]) if len(buffer) else samples)
        total += len(samples)
        while next_start + length <= total:
            at = next_start - buffer_start
            window = buffer[at:at + length]
            yield _window(base, rate, next_start, length, window), window
            covered = next_start + length
            next_start += hop
        # Keep from the next window's start on (nothing, when the hop skips past the end).
        drop = min(next_start, total) - buffer_start
        buffer, buffer_start = buffer[drop:], buffer_start + drop
    if total < length and (remainder == "drop" or total == 0):
        raise MediaError(f"audio of {total / rate:.2f} s is shorter than one "
                         f"{length / rate:.2f} s window")
    if remainder == "pad" and covered < total and next_start < total:
        real = buffer[next_start - buffer_start:]
        yield _window(base, rate, next_start, length, _padded(real, length)), real


def _crops(stream: Iterator[np.ndarray], base: float, rate: int, length: int,
           options: WindowOptions, key: str) -> Iterator[tuple[Window, np.ndarray]]:
    """(window, its real samples) at seeded random starts, uniform over the audio.

    Starts come from blake2b (transforms.format.stable_hash.stable_hash64) rather than a
    numpy Generator, whose streams numpy does not promise to keep across
    versions. Crops are independent draws, so two can coincide on short audio.
    Audio shorter than a window gives one padded crop at 0 (pad) or MediaError.
    """
    parts = list(stream)
    audio = _readonly(np.concatenate(parts) if len(parts) > 1 else parts[0])
    total = len(audio)
    if total < length:
        if options.remainder == "drop" or total == 0:
            raise MediaError(f"audio of {total / rate:.2f} s is shorter than one "
                             f"{length / rate:.2f} s window")
        yield _window(base, rate, 0, length, _padded(audio, length)), audio
        return
    positions = total - length + 1
    starts = sorted(stable_hash64(f"{options.seed}\0{key}\0{i}", _CROP_SALT) % positions
                    for i in range(options.random_crops))
    for start in starts:
        window = audio[start:start + length]
        yield _window(base, rate, start, length, window), window


def _window(base: float, rate: int, start: int, length: int, samples: np.ndarray) -> Window:
    return Window(base + start / rate, base + (start + length) / rate, samples)


def _padded(real: np.ndarray, length: int) -> np.ndarray:
    padded = np.zeros(length, real.dtype)
    padded[:len(real)] = real
    return _readonly(padded)


def _readonly(array: np.ndarray) -> np.ndarray:
    """A read-only view: windows share memory, so none may be changed in place."""
    view = array.view()
    view.flags.writeable = False
    return view


def _rms_db(samples: np.ndarray, full_scale: float) -> float:
    """RMS level in dB relative to `full_scale` (-inf for digital silence)."""
    x = samples.astype(np.float64) if samples.dtype == np.int16 else samples
    mean_square = float(np.dot(x, x)) / len(x)
    return 10 * math.log10(mean_square) - 20 * math.log10(full_scale) if mean_square else -math.inf

"""Speech pieces: the speech a voice activity detector finds in a recording, cut to size.

Beam-free and pure (`--cut speech`, transforms/media/cutting.py). A recording's
audio arrives block by block; the detector (transforms/media/vad.py) gives a
probability a frame, and `SpeechSpans` turns those into pieces, as Silero's
own `get_speech_timestamps` does, but streaming:

- a piece starts at a frame whose probability reaches `threshold`, and goes
  on through frames above `threshold - 0.15` (Silero's hysteresis);
- it ends where a pause (frames below that) has lasted `pause_s`: shorter
  pauses stay inside it, so pieces are utterances, not words;
- a piece that would outgrow `max_s` (its margins included) is split at its
  longest pause (one that leaves the first part at least `min_s`, if there
  is one), or, with no pause in it, cut where it reaches `max_s`;
- each piece is widened by `pad_s` on both sides (not past the recording's
  ends, and inside a pause it was split at by at most half that pause); a
  piece then shorter than `min_s` is dropped and counted.

`pad_s` is at most half of `pause_s`, so pieces never overlap. Only the audio
of the piece being found is held (at most `max_s` and a margin), so memory
is flat in the recording's length; each piece is given as soon as it ends.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator, NamedTuple

import numpy as np

from transforms.format.arguments import ArgumentError, check_choice, check_number
from transforms.media.decoded import Audio
from transforms.media.vad import DETECTORS, detector

__all__ = ["SPEECH_PROBABILITY", "SPEECH_TOO_SHORT", "SpeechOptions", "SpeechPiece", "SpeechSpans",
           "speech_pieces", "speech_ratio"]

SPEECH_PROBABILITY = "speech_probability"
# The cut's count of the pieces it dropped for their length.
SPEECH_TOO_SHORT = "speech_pieces_too_short"
_HYSTERESIS = 0.15   # Silero's: a piece goes on above threshold - 0.15
# A piece's longest length when none is asked (Whisper's 30 s window).
DEFAULT_MAX_S = 30.0


@dataclasses.dataclass(frozen=True)
class SpeechOptions:
    """How speech is found and cut (`--cut speech`).

    >>> import transforms as dg
    >>> cut = dg.CutOptions(mode="speech", audio_fields=("flac",), max_duration_s=20,
    ...                     speech=dg.SpeechOptions(detector="silero", pause_s=0.5))
    >>> [f.name for f in cut.features][-4:]
    ['source_key', 'start_time', 'end_time', 'speech_probability']
    """

    detector: str = "silero"
    # A frame is speech from this probability on.
    threshold: float = 0.5
    # Pieces go on across pauses shorter than this.
    pause_s: float = 0.3
    # Each piece's margin of audio before and after its speech.
    pad_s: float = 0.1

    def __post_init__(self):
        check_choice("speech.detector", self.detector, DETECTORS)
        check_number("speech.threshold", self.threshold, above=0)
        if self.threshold > 1:
            raise ArgumentError("speech.threshold", f"{self.threshold}: a probability, at most 1")
        check_number("speech.pause_s", self.pause_s, above=0)
        check_number("speech.pad_s", self.pad_s, least=0)
        if self.pad_s > self.pause_s / 2:
            raise ArgumentError("speech.pad_s", f"{self.pad_s} is more than half of "
                                f"{{speech.pause_s}} {self.pause_s}: pieces would overlap")


class SpeechPiece(NamedTuple):
    """A piece of speech: its audio, its time on the recording's timeline, the
    detector's mean probability over its frames (the margins left out), and
    the share of its audio in frames it calls speech."""

    samples: np.ndarray
    start: float
    end: float
    probability: float
    speech_ratio: float


class Span(NamedTuple):
    """A piece in samples from the recording's first: speech [first, last),
    with at most `lead` and `tail` samples of margin before and after."""

    first: int
    last: int
    lead: int
    tail: int
    probability: float
    speech: int       # samples in frames at or above the threshold


class SpeechSpans:
    """Frame probabilities in, speech spans out (the rules of the module's
    docstring), frame by frame: `push` each frame's probability, `finish`
    at the recording's end with its length in samples."""

    def __init__(self, options: SpeechOptions, frame: int, rate: int, max_s: float,
                 min_s: float = 0.0):
        self._options, self._frame = options, frame
        self._pad = round(options.pad_s * rate)
        self._pause = round(options.pause_s * rate)
        self._max = round(max_s * rate)
        self._min = round(min_s * rate)
        self._frames = 0             # frames pushed
        self._open = False
        self._first = self._lead = 0
        self._silence_from = None    # where the current run of quiet frames began
        self._pauses: list = []      # (from, to) of the open piece's closed pauses
        self._probabilities: list = []   # the open piece's frames' (from its first)

    def push(self, probability: float) -> list:
        """The spans this frame ends (none, or one or more split pieces)."""
        start = self._frames * self._frame
        self._frames += 1
        end = start + self._frame
        threshold = self._options.threshold
        if not self._open:
            if probability < threshold:
                return []
            self._open, self._first, self._lead = True, start, min(self._pad, start)
            self._pauses, self._probabilities = [], []
        self._probabilities.append(probability)
        if probability >= threshold:
            if self._silence_from is not None:
                self._pauses.append((self._silence_from, start))
                self._silence_from = None
        elif probability < threshold - _HYSTERESIS:
            if self._silence_from is None:
                self._silence_from = start
            if end - self._silence_from >= self._pause:
                return [self._close(self._silence_from, self._pad)]
        if self._silence_from is not None:
            return []
        spans = []
        while end - self._first + self._lead + self._pad > self._max:
            spans.append(self._split(start))
        return spans

    @property
    def held_from(self) -> int:
        """The first sample a span still to come may take (its margin included)."""
        if self._open:
            return self._first - self._lead
        return self._frames * self._frame - self._pad

    def finish(self, length: int) -> list:
        """The open piece's span, ended at its last speech (or the recording's end)."""
        if not self._open:
            return []
        last = length if self._silence_from is None else self._silence_from
        return [self._close(min(last, length), self._pad)]

    def _close(self, last: int, tail: int) -> Span:
        span = self._span(last, tail)
        self._open, self._silence_from = False, None
        return span

    def _span(self, last: int, tail: int) -> Span:
        frames = self._probabilities[:max(1, -(-(last - self._first) // self._frame))]
        speech = sum(p >= self._options.threshold for p in frames) * self._frame
        return Span(self._first, last, self._lead, tail, float(np.mean(frames)),
                    min(speech, last - self._first))

    def _split(self, here: int) -> Span:
        """The open piece up to its longest pause (else up to `here`); the rest
        goes on as the open piece."""
        pause = self._longest_pause()
        if pause is None:
            cut, gap = here, (here, here)
        else:
            cut, gap = pause[0], pause
        half = min(self._pad, (gap[1] - gap[0]) // 2)
        span = self._span(cut, half)
        del self._probabilities[:(gap[1] - self._first) // self._frame]
        self._first, self._lead = gap[1], half
        self._pauses = [p for p in self._pauses if p[0] >= gap[1]]
        return span

    def _longest_pause(self) -> tuple | None:
        def length(pause):
            return pause[1] - pause[0]
        roomy = [p for p in self._pauses
                 if p[0] - self._first + self._lead + min(self._pad, length(p) // 2) >= self._min]
        candidates = roomy or self._pauses
        return max(reversed(candidates), key=length) if candidates else None


class _Held:
    """The audio from some sample on, held as the blocks it came in."""

    def __init__(self):
        self._blocks: list = []     # (first sample, samples)
        self._end = 0

    def add(self, samples: np.ndarray) -> None:
        self._blocks.append((self._end, samples))
        self._end += len(samples)

    def take(self, first: int, last: int) -> np.ndarray:
        parts = [s[max(0, first - at):last - at] for at, s in self._blocks
                 if at < last and at + len(s) > first]
        return np.concatenate(parts) if len(parts) != 1 else parts[0].copy()

    def drop_before(self, sample: int) -> None:
        while self._blocks and self._blocks[0][0] + len(self._blocks[0][1]) <= sample:
            del self._blocks[0]


def speech_pieces(blocks: Iterable[Audio], options: SpeechOptions, max_s: float,
                  min_s: float = 0.0, stats: dict | None = None) -> Iterator[SpeechPiece]:
    """The speech pieces of a recording's audio blocks, each given as soon as it
    ends; those shorter than `min_s` with their margins are dropped and counted
    in stats[SPEECH_TOO_SHORT]."""
    stats = stats if stats is not None else {}
    held, spans, found = _Held(), None, None
    origin = rate = 0
    length = 0

    def at_audio_rate(sample: int) -> int:
        """A sample on the detector's timeline, on the audio's."""
        return sample if found.rate == rate else round(sample * rate / found.rate)

    def pieces(ended: list) -> Iterator[SpeechPiece]:
        for span in ended:
            first = at_audio_rate(span.first - span.lead)
            last = min(at_audio_rate(span.last + span.tail), length)
            if last - first < round(min_s * rate):
                stats[SPEECH_TOO_SHORT] = stats.get(SPEECH_TOO_SHORT, 0) + 1
                continue
            # (At most 1: a resampled timeline's rounding could tip it over.)
            ratio = min(at_audio_rate(span.speech) / (last - first), 1.0)
            yield SpeechPiece(held.take(first, last), origin + first / rate,
                              origin + last / rate, span.probability, ratio)

    for block in blocks:
        if found is None:
            origin, rate = block.start, block.sample_rate
            found = detector(options.detector, rate)
            spans = SpeechSpans(options, found.frame_samples, found.rate, max_s, min_s)
        held.add(block.samples)
        length += len(block.samples)
        for probability in found.probabilities(block.samples):
            yield from pieces(spans.push(probability))
        held.drop_before(at_audio_rate(spans.held_from))
    if found is None:
        return
    for probability in found.finish():
        yield from pieces(spans.push(probability))
    yield from pieces(spans.finish(round(length * found.rate / rate)))


def speech_ratio(audio: np.ndarray, rate: int, options: SpeechOptions) -> float:
    """The share of `audio`'s frames the detector calls speech (at or above
    the threshold): of an example the speech cut did not make."""
    found = detector(options.detector, rate)
    probabilities = np.concatenate([found.probabilities(audio), found.finish()])
    return float(np.mean(probabilities >= options.threshold)) if len(probabilities) else 0.0

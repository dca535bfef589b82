"""Audio decoding: one mono (or chosen-channel) signal at a target rate.

Beam-free. `decode_audio` decodes a whole member; `stream_audio` yields it in
blocks of about `block_seconds`, reading the source incrementally so that memory
is a few blocks, whatever the duration, and the encoded bytes unless the
member is left stored (a `StoredBytes`, read as it is decoded).

Decoders, by the member's extension (the part after the last "." of `name`, or
the whole name for a bare field name like "flac"):

* wav, flac, ogg, oga, mp3: libsndfile through soundfile;
* mp4, m4a, mov, mkv, webm, aac, opus: FFmpeg through PyAV (the first audio
  stream; other streams are demuxed and skipped, never decoded);
* anything else: libsndfile, then FFmpeg if libsndfile does not recognise it.

A known extension must match the content (a WAV file named `.flac`, an mp4 named
`.wav` are errors): a mislabelled member usually means a packaging bug upstream.

Processing order: channel mix-down or pick first (so only one channel is
resampled), then soxr resampling (quality "HQ"; `ResampleStream` when streaming,
so block boundaries are seamless and the blocks concatenate to the one-shot
result), then the output dtype. Float output is clipped to [-1, 1] (resampling
ringing and lossy codecs can overshoot slightly); int16 output is
`rint(float * 32767)`, so it spans [-32767, 32767] and a PCM16 source read back
without resampling may differ from its stored integers by 1 (libsndfile scales
PCM16 by 1/32768 on the way in).

Every problem with the bytes raises `MediaError` naming the member and the
reason; invalid options raise `ValueError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
import os
from typing import Callable, Iterator

import av
import numpy as np
import soundfile as sf
import soxr

from transforms.format.arguments import (
    ArgumentError,
    ArgumentTypeError,
    check_choice,
    check_number,
)
from transforms.format.sample import StoredBytes
from transforms.media.decoded import (
    INT16_FULL_SCALE,
    SPAN_SLACK_S,
    Audio,
    MediaError,
    NoSamples,
    media_file,
)

__all__ = ["AudioOptions", "decode_audio", "decoded_frames", "probe_audio", "stream_audio"]

_DTYPES = ("float32", "int16")

# Extension -> the soundfile formats it may hold.
_SOUNDFILE_FORMATS = {
    "wav": {"WAV", "WAVEX", "RF64"},
    "flac": {"FLAC"},
    "ogg": {"OGG"},
    "oga": {"OGG"},
    "mp3": {"MP3"},
}
# Extension -> FFmpeg demuxer names it may hold (`container.format.name` lists
# every name of the demuxer that opened it, e.g. "mov,mp4,m4a,3gp,3g2,mj2").
_MP4 = {"mov", "mp4", "m4a"}
_AV_FORMATS = {
    "mp4": _MP4,
    "m4a": _MP4,
    "mov": _MP4,
    "mkv": {"matroska"},
    "webm": {"webm"},
    "aac": {"aac"},
    "opus": {"ogg"},
}

# Without a Xing/LAME header libsndfile estimates an MP3's length from its size
# and bitrate (seen 0.75% off), so only a larger shortfall means truncation.
_MP3_LENGTH_TOLERANCE = 0.02
# libsndfile reports an unknown length (e.g. a streamed FLAC) as a huge count.
_UNKNOWN_FRAMES = 2 ** 62
# Source frames per read when decoding a whole member (8 MiB of stereo float32).
_WHOLE_READ_FRAMES = 1 << 20


@dataclasses.dataclass(frozen=True)
class AudioOptions:
    """What to decode to.

    sample_rate: resample to this rate; None keeps the source rate.
    channel: "mono" mixes down (mean of the channels); an int picks that channel (0-based).
    dtype: "float32" in [-1, 1], or "int16" (see the module docstring for the scale).

    >>> import transforms as dg
    >>> cut = dg.CutOptions(mode="audio_windows", audio_fields=("wav",),
    ...                     audio=dg.AudioOptions(sample_rate=8000, dtype="int16"))
    >>> audio = cut.features[0]
    >>> audio.dtype, audio.shape, audio.sample_rate   # a second of 8 kHz int16
    ('int16', (8000,), 8000)
    """

    sample_rate: int | None = 16000
    channel: str | int = "mono"
    dtype: str = "float32"

    def __post_init__(self):
        check_number("sample_rate", self.sample_rate, integer=True, above=0, optional=True)
        if self.channel != "mono" and (isinstance(self.channel, bool) or not isinstance(
                self.channel, int) or self.channel < 0):
            raise ArgumentError("channel", f"must be 'mono' or a channel index >= 0, got "
                                           f"{self.channel!r}")
        check_choice("dtype", self.dtype, _DTYPES)


def decode_audio(data: bytes | StoredBytes, options: AudioOptions, *, name: str = "") -> Audio:
    """The whole member as one `Audio` (transforms/media/decoded.py), as the cut
    decodes it; raises MediaError for bad bytes.

    >>> import transforms as dg
    >>> from transforms.testing.synthetic_media import flac_bytes, voice
    >>> audio = dg.decode_audio(flac_bytes(voice(220, 2.0, 44100), 44100), dg.AudioOptions())
    >>> audio.sample_rate, audio.samples.shape, audio.source_rate   # resampled to 16 kHz
    (16000, (32000,), 44100)
    """
    if not isinstance(data, (bytes, bytearray, memoryview, StoredBytes)):
        hint = "; read the file first: its .read_bytes()" if isinstance(data, os.PathLike) else ""
        raise ArgumentTypeError("data", f"must be a file's encoded bytes, got "
                                        f"{type(data).__name__}{hint}")
    if not isinstance(options, AudioOptions):
        raise ArgumentTypeError("options", f"must be an AudioOptions, got {options!r}")
    with _open(data, name) as source:
        _check_channel(source, options.channel, name)
        parts = [_select(block, options.channel)
                 for block in source.blocks(_WHOLE_READ_FRAMES)]
    if not parts:
        raise NoSamples(f"no audio samples in {name!r}")
    samples = parts[0] if len(parts) == 1 else np.concatenate(parts)
    rate = options.sample_rate or source.rate
    if rate != source.rate:
        samples = soxr.resample(samples, source.rate, rate, quality="HQ")
    return Audio(_finish(samples, options.dtype), rate, start=source.start,
                 source_rate=source.rate, source_channels=source.channels)


def probe_audio(data: bytes | StoredBytes, *, name: str = "") -> tuple[int, int]:
    """(samples per channel, sample rate) of the member, as stored: from the
    header where libsndfile reads one, else counted by decoding (FFmpeg's
    headers may not say, or say wrong). MediaError for bad bytes, NoSamples
    for a recording of no length."""
    with _open(data, name) as source:
        frames = source.frames
        if frames is None:
            frames = sum(len(block) for block in source.blocks(_WHOLE_READ_FRAMES))
    if not frames:
        raise NoSamples(f"no audio samples in {name!r}")
    return frames, source.rate


def decoded_frames(data: bytes | StoredBytes, *, name: str = "") -> int:
    """Samples per channel of the member, counted by decoding every one, a block
    at a time (what a header says is not taken); MediaError where it does not
    decode, NoSamples for a recording of no length."""
    with _open(data, name) as source:
        frames = sum(len(block) for block in source.blocks(_WHOLE_READ_FRAMES))
    if not frames:
        raise NoSamples(f"no audio samples in {name!r}")
    return frames


def stream_audio(data: bytes | StoredBytes, options: AudioOptions, *, name: str = "",
                 block_seconds: float = 10.0,
                 span: tuple[float, float] | None = None) -> Iterator[Audio]:
    """Consecutive blocks of round(block_seconds * rate) samples (the last one shorter).

    Each block's `start` is the time of its first sample. The blocks concatenate
    to `decode_audio`'s samples. A MediaError can come after some blocks were
    yielded (a file corrupt half-way), so a caller that must be all-or-nothing
    per member collects before emitting.

    With `span` (start, end), seconds on the member's timeline, only that part:
    from the source sample nearest `start` (reached by a seek where libsndfile
    reads the member) to the one nearest `end`, resampled from there. A span
    that is not one (end not after start, start below 0) or that reaches more
    than SPAN_SLACK_S past the member's end is a MediaError, raised before
    any block where the header gives the length.
    """
    if not block_seconds > 0:
        raise ValueError(f"block_seconds must be positive, got {block_seconds!r}")
    with _open(data, name) as source:
        _check_channel(source, options.channel, name)
        rate = options.sample_rate or source.rate
        block = max(1, round(block_seconds * rate))
        resampler = (soxr.ResampleStream(source.rate, rate, 1, dtype="float32", quality="HQ")
                     if rate != source.rate else None)
        pending = np.empty(0, np.float32)
        emitted = 0
        read_size = math.ceil(block_seconds * source.rate)
        if span is None:
            origin, raw_blocks = source.start, source.blocks(read_size)
        else:
            first, last = _span_frames(source, span, name)
            origin = source.start + first / source.rate
            raw_blocks = _span_blocks(source, read_size, first, last, span, name)
        # A None sentinel marks the end, when the resampler is flushed.
        for raw in itertools.chain(raw_blocks, [None]):
            if raw is None:
                if resampler is None:
                    break
                out = resampler.resample_chunk(np.empty(0, np.float32), last=True)
            else:
                mono = _select(raw, options.channel)
                out = mono if resampler is None else resampler.resample_chunk(mono, last=False)
            pending = np.concatenate([pending, out]) if len(pending) else out
            while len(pending) >= block:
                yield _block(pending[:block], origin + emitted / rate, rate, source,
                             options.dtype)
                emitted += block
                pending = pending[block:]
        if len(pending):
            yield _block(pending, origin + emitted / rate, rate, source, options.dtype)
            emitted += len(pending)
    if not emitted:
        raise NoSamples(f"no audio samples in {name!r}")


def _block(samples: np.ndarray, start: float, rate: int, source: "_Source",
           dtype: str) -> Audio:
    return Audio(_finish(samples, dtype), rate, start=start,
                 source_rate=source.rate, source_channels=source.channels)


def _span_frames(source: "_Source", span: tuple[float, float], name: str) -> tuple[int, int]:
    """The source frames [first, last) of a span; MediaError for one that is
    not a span, or that the header says reaches past the member's end."""
    start, end = span
    if not 0 <= start < end:
        raise MediaError(f"segment [{start:g}, {end:g}) s of {name!r}: its end must come after "
                         "its start, and its start at or after 0", stage="segment", member=name)
    first = max(0, round((start - source.start) * source.rate))
    last = round((end - source.start) * source.rate)
    if source.frames is not None and 0 < source.frames < _UNKNOWN_FRAMES:
        length = source.start + source.frames / source.rate
        if end > length + SPAN_SLACK_S:
            raise MediaError(_past_end(span, name, length), stage="segment", member=name)
        last = min(last, source.frames)
    return first, last


def _past_end(span: tuple[float, float], name: str, length: float) -> str:
    return (f"segment [{span[0]:g}, {span[1]:g}) s reaches past the end of {name!r} "
            f"({length:.3f} s)")


def _span_blocks(source: "_Source", size: int, first: int, last: int,
                 span: tuple[float, float], name: str) -> Iterator[np.ndarray]:
    """Source frames [first, last) in blocks of about `size`; MediaError when
    the member ends before `last` (more than SPAN_SLACK_S before)."""
    remaining = last - first
    if remaining <= 0:   # shorter than half a source sample: none to read
        return
    # A short span is one read of its own length, not a block's.
    for block in source.blocks(min(size, remaining), first):
        if len(block) >= remaining:
            yield block[:remaining]
            return
        remaining -= len(block)
        yield block
    if remaining > SPAN_SLACK_S * source.rate:
        raise MediaError(_past_end(span, name, source.start + (last - remaining) / source.rate),
                         stage="segment", member=name)


def _finish(samples: np.ndarray, dtype: str) -> np.ndarray:
    """Clipped float32, or int16 as rint(float * 32767); always a new array."""
    clipped = np.clip(samples, -1.0, 1.0, dtype=np.float32)
    if dtype == "int16":
        clipped *= INT16_FULL_SCALE
        return np.rint(clipped, out=clipped).astype(np.int16)
    return clipped


def _check_channel(source: "_Source", channel: str | int, name: str) -> None:
    if channel != "mono" and channel >= source.channels:
        raise MediaError(f"channel {channel} requested but {name!r} has "
                         f"{source.channels} channel{'s' if source.channels != 1 else ''}")


def _select(block: np.ndarray, channel: str | int) -> np.ndarray:
    """One contiguous float32 channel from a (frames, channels) block."""
    if channel != "mono":
        return np.ascontiguousarray(block[:, channel])
    channels = block.shape[1]
    if channels == 1:
        return np.ascontiguousarray(block[:, 0])
    # Column by column: numpy's mean(axis=1) over a 2-wide inner axis is far
    # slower (docs/performance.md).
    mixed = block[:, 0].copy()
    for c in range(1, channels):
        mixed += block[:, c]
    mixed *= np.float32(1 / channels)
    return mixed


# -- sources: decoded (frames, channels) float32 blocks at the source rate --------

@dataclasses.dataclass(frozen=True)
class _Source:
    rate: int
    channels: int
    start: float
    # blocks(frames, first=0) -> blocks of about `frames` frames, each at least
    # one frame, from the source frame `first` on.
    blocks: Callable[..., Iterator[np.ndarray]]
    frames: int | None = None  # as its header declares them, where it does


def _extension(name: str) -> str:
    """'spk1_0001.FLAC' -> 'flac'; a bare field name ('flac', 'cf:flac') is its own extension."""
    if "." in name:
        return name.rsplit(".", 1)[1].lower()
    return name.rsplit(":", 1)[-1].lower()


@contextlib.contextmanager
def _open(data: bytes | StoredBytes, name: str) -> Iterator[_Source]:
    if not len(data):
        raise MediaError(f"empty member {name!r}")
    ext = _extension(name)
    if ext in _SOUNDFILE_FORMATS:
        opener = _soundfile_source
    elif ext in _AV_FORMATS:
        opener = _av_source
    else:
        opener = _soundfile_or_av_source
    with opener(data, name, ext) as source:
        yield source


@contextlib.contextmanager
def _soundfile_or_av_source(data: bytes | StoredBytes, name: str, ext: str) -> Iterator[_Source]:
    """An unknown extension: libsndfile if it recognises the bytes, else FFmpeg."""
    with contextlib.ExitStack() as stack:
        try:
            source = stack.enter_context(_soundfile_source(data, name, ext))
        except MediaError:
            source = stack.enter_context(_av_source(data, name, ext))
        yield source


_DECODE_ERRORS = (sf.SoundFileError, av.FFmpegError, RuntimeError, EOFError,
                  ValueError, OSError)


@contextlib.contextmanager
def _decode_errors(what: str) -> Iterator[None]:
    """Turns the decoders' exceptions into MediaError("<what>: <reason>")."""
    try:
        yield
    except MediaError:
        raise
    except _DECODE_ERRORS as e:
        raise MediaError(f"{what}: {_reason(e)}") from e


def _reason(e: BaseException) -> str:
    # The libraries' str() includes the file object's address; the bare
    # reason keeps dead-letter messages identical between runs.
    if isinstance(e, sf.LibsndfileError):
        return e.error_string.strip()
    if isinstance(e, av.FFmpegError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


def _what(name: str, ext: str) -> str:
    if ext in _SOUNDFILE_FORMATS or ext in _AV_FORMATS:
        return f"cannot decode {name!r} as {ext.upper()}"
    return f"cannot decode {name!r}"


@contextlib.contextmanager
def _soundfile_source(data: bytes | StoredBytes, name: str, ext: str) -> Iterator[_Source]:
    what = _what(name, ext)
    with media_file(data) as stored, contextlib.ExitStack() as stack:
        with _decode_errors(what):
            file = stack.enter_context(sf.SoundFile(stored))
        expected = _SOUNDFILE_FORMATS.get(ext)
        if expected is not None and file.format not in expected:
            raise MediaError(f"member {name!r} holds {file.format} data, not {ext.upper()}")
        if file.frames >= _UNKNOWN_FRAMES:
            # A file whose header leaves its length unknown (a FLAC written to a
            # pipe): libsndfile seeks after every read, and fails to. FFmpeg reads it.
            stack.close()
            with _av_source(data, name, ext) as source:
                yield source
            return
        yield _Source(file.samplerate, file.channels, 0.0,
                      functools.partial(_soundfile_blocks, file, what), file.frames)


def _soundfile_blocks(file: sf.SoundFile, what: str, frames: int,
                      first: int = 0) -> Iterator[np.ndarray]:
    declared = file.frames
    read = first
    with _decode_errors(what):
        if first:
            file.seek(first)
        while True:
            block = file.read(frames, dtype="float32", always_2d=True)
            if not len(block):
                break
            read += len(block)
            yield block
    # A cut FLAC usually fails with "lost sync" above, but one cut at a frame
    # boundary just ends early; compare with the length its header declares.
    shortfall = declared - read
    if 0 < declared < _UNKNOWN_FRAMES and shortfall > 0 and (
            file.format != "MP3" or shortfall > _MP3_LENGTH_TOLERANCE * declared):
        raise MediaError(f"{what}: truncated, decoded {read} of {declared} frames")


@contextlib.contextmanager
def _av_source(data: bytes | StoredBytes, name: str, ext: str) -> Iterator[_Source]:
    what = _what(name, ext)
    with media_file(data) as file, contextlib.ExitStack() as stack:
        with _decode_errors(what):
            container = stack.enter_context(av.open(file, metadata_errors="ignore"))
        formats = set(container.format.name.split(","))
        expected = _AV_FORMATS.get(ext)
        if expected is not None and not formats & expected:
            raise MediaError(f"member {name!r} holds {container.format.name} data, "
                             f"not {ext.upper()}")
        if not container.streams:
            raise MediaError(f"{what}: no streams found (truncated or corrupt)")
        if not container.streams.audio:
            raise MediaError(f"no audio track in {name!r}")
        stream = container.streams.audio[0]
        if stream.codec_context is None:
            raise MediaError(f"unsupported audio codec in {name!r}: FFmpeg has no decoder "
                             "for it (or the header is truncated)")
        frames = _av_frames(container, stream, what)
        first = next(frames, None)
        if first is None:
            raise NoSamples(f"no audio samples in {name!r}")
        rate, channels = first.sample_rate, first.layout.nb_channels
        # Counted from the container's start time, as transforms.media.video counts
        # Frame.time, so audio and frames of one file share a clock (an audio
        # track can start after the video, e.g. behind an edit list).
        origin = container.start_time / av.time_base if container.start_time is not None else 0.0
        start = float(first.time) - origin if first.time is not None else 0.0

        def blocks(size: int, skip: int = 0) -> Iterator[np.ndarray]:
            frames_from = itertools.chain([first], frames)
            if skip and first.time is not None:
                frames_from, skip = _sought(container, stream, what, first.time, rate, skip)
            return _av_blocks(frames_from, rate, channels, name, size, skip)

        yield _Source(rate, channels, start, blocks)


# How far before a segment's start the audio of a video is sought: a decoder
# that starts at a packet needs the ones before it (AAC overlaps frames) to
# give the samples a decode from the start gives.
_PREROLL_S = 0.5


def _sought(container, stream, what: str, first_time: float, rate: int,
            skip: int) -> tuple[Iterator[av.AudioFrame], int]:
    """The track's frames from a packet at least _PREROLL_S before its sample
    `skip` (counted from its first, at `first_time`), and how many of their
    samples come before that one. Where the seek cannot be placed (a frame
    without a time, or landing past the sample), the track from its start."""
    target = first_time + skip / rate - _PREROLL_S
    with _decode_errors(what):
        container.seek(int(max(target, first_time) / stream.time_base), stream=stream,
                       backward=True)
    frames = _av_frames(container, stream, what, whole=False)
    landed = next(frames, None)
    if landed is not None and landed.time is not None:
        before = skip - round((float(landed.time) - first_time) * rate)
        if before >= 0:
            return itertools.chain([landed], frames), before
    with _decode_errors(what):
        container.seek(int(first_time / stream.time_base), stream=stream, backward=True)
    return _av_frames(container, stream, what), skip


def _av_frames(container, stream, what: str, whole: bool = True) -> Iterator[av.AudioFrame]:
    """The stream's non-empty decoded frames.

    demux() ends with an empty packet that flushes the decoder. A cut mp4 can
    demux cleanly but short, so the packets of a `whole` track (decoded from
    its start) are counted against the sample table's count (`stream.frames`;
    0 where the container has none, as Matroska).
    """
    packets = 0
    with _decode_errors(what):
        for packet in container.demux(stream):
            packets += packet.size > 0
            for frame in packet.decode():
                if frame.samples:
                    yield frame
    if whole and packets < stream.frames:
        raise MediaError(f"{what}: truncated, {packets} of {stream.frames} packets")


def _av_blocks(frames: Iterator[av.AudioFrame], rate: int, channels: int, name: str,
               size: int, first: int = 0) -> Iterator[np.ndarray]:
    """Decoded frames (1024 samples for AAC) grouped into blocks of at least
    `size` frames, from the `first` one on (those before are decoded and dropped)."""
    parts, count = [], 0
    for frame in frames:
        if frame.sample_rate != rate or frame.layout.nb_channels != channels:
            raise MediaError(f"audio format of {name!r} changes mid-stream: {rate} Hz "
                             f"x{channels} -> {frame.sample_rate} Hz x{frame.layout.nb_channels}")
        array = _frame_array(frame, channels)
        if first:
            dropped = min(first, len(array))
            array, first = array[dropped:], first - dropped
            if not len(array):
                continue
        parts.append(array)
        count += len(array)
        if count >= size:
            yield np.concatenate(parts)
            parts, count = [], 0
    if parts:
        yield np.concatenate(parts)


# Integer sample formats -> (offset, scale) to float: (x - offset) * scale.
_INT_TO_FLOAT = {
    np.dtype(np.uint8): (128, 1 / 128),
    np.dtype(np.int16): (0, 1 / 2 ** 15),
    np.dtype(np.int32): (0, 1 / 2 ** 31),
    np.dtype(np.int64): (0, 1 / 2 ** 63),
}


def _frame_array(frame: av.AudioFrame, channels: int) -> np.ndarray:
    """A (frames, channels) float32 array from any FFmpeg sample format.

    to_ndarray() gives planar formats (fltp, s16p, ...) as (channels, frames)
    and packed ones (flt, s16, ...) as (1, frames * channels), interleaved.
    """
    array = frame.to_ndarray()
    array = array.T if frame.format.is_planar else array.reshape(-1, channels)
    if array.dtype in _INT_TO_FLOAT:
        offset, scale = _INT_TO_FLOAT[array.dtype]
        array = array.astype(np.float32)
        if offset:
            array -= offset
        array *= np.float32(scale)
        return array
    return array.astype(np.float32, copy=False)

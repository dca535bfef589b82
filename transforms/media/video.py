"""Video frames from in-memory bytes: sampled at chosen times, resized, RGB or JPEG.

Beam-free. `iter_frames` decodes a video file's bytes (any container and codec
the bundled FFmpeg reads: mp4/H.264, webm/VP9, mkv, ...) with PyAV and yields
`transforms.media.decoded.Frame`s; `iter_image_sequence` does the same for a sample
whose frames are stored as numbered images (WebDataset style), and
`image_sequence_members` finds those images in a Sample. `probe_video` reads
the container's metadata without decoding.

    from transforms.media.video import FrameOptions, iter_frames

    options = FrameOptions(fps=1.0, size=(224, 224), resize="crop")
    for frame in iter_frames(sample["mp4"], options, name=sample["__key__"]):
        frame.time, frame.jpeg            # seconds, JPEG bytes of a 224x224 RGB image

Sampling (the same rules for videos and image sequences):

- Which times: `timestamps` if non-empty (sorted, duplicates dropped), else
  `num_frames` > 0 times `i * D / num_frames` for i in 0..num_frames-1 (D the
  duration, so this is fps sampling at num_frames / D), else every `1 / fps`
  seconds from 0 (0, 1/fps, 2/fps, ... while a frame is on screen at that
  time), else (`fps=None`) every frame.
- Which frame for a time: the frame whose timestamp is *nearest* to it, ties
  to the earlier frame (the one on screen at that instant). Nearest rather than
  first-at-or-after, so a timestamp rounded a hair below the target (container
  time bases are rarely exact) does not skip to the next frame.
- Each target time gives at most one frame and each frame is yielded at most
  once, in time order: targets closer together than the frame interval (fps
  above the source rate, timestamps 10 ms apart) share a frame, yielded once.
  A target at or after the last frame's end yields nothing; an explicit
  timestamp there is a MediaError.
- `Frame.time` is the chosen frame's own presentation time in seconds,
  counted from the container's start time (FFmpeg's convention, so 0 is the
  start of the file even when the video stream starts later, and audio decoded
  from the same file shares the clock). A frame without a timestamp (raw H.264
  streams) follows the previous one by its duration.

Decoding streams frame by frame and keeps at most two decoded frames (the
nearest-frame candidate and the current one), so memory does not grow with
the video's length. When a sampling time is ahead of the decoder, a second
demuxer on the same bytes tells where a seek would land (the keyframe at or
before that time); the decoder seeks only if that keyframe lies after the last
decoded frame, i.e. only when seeking skips work. Decoding stops as soon as the
last target time is served. `num_frames` needs D before decoding: the video
stream's declared duration (mp4 track duration, Matroska/WebM track DURATION
tag), else the container's, else a demux-only pass over the packets.

Output: with `size=(height, width)` the frame is scaled by FFmpeg's swscale
(bilinear, keeping the aspect ratio of the stored pixels) to fit inside
("pad": then centred on black) or to cover ("crop": then centre-cropped) the
target, so the output is exactly that size; `size=None` keeps the stored size.
`image_format="raw"` fills `Frame.image` (HxWx3 uint8 RGB), "jpeg" fills
`Frame.jpeg` (Pillow, `jpeg_quality`); both set `Frame.height`/`Frame.width`.
`threads` sets FFmpeg's decoder threads (0 = one per core, chosen by FFmpeg;
1 = unthreaded) and the scaler's.

Errors: bad input raises MediaError (from the generator, on iteration) naming
`name` and the reason: empty bytes, not a readable container, no video stream,
no decoder for the codec, an explicit timestamp at or past the end (checked
against the declared duration before decoding when there is one, else when
the stream ends), and corruption.
Corruption raises as soon as it is detected, even after frames were yielded,
and the message says how many frames were decoded: an FFmpeg decode error, a
frame the decoder marks corrupt, or a stream that ends more than half a second
before the video stream's declared duration (a truncated Matroska/WebM file
decodes cleanly up to the cut, so only the declared duration reveals it; this
check needs a duration declared by the video stream itself, because a
container's duration may cover a longer audio track). Invalid options raise
ValueError when FrameOptions is built.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import math
import re
from typing import Iterator, Mapping, Sequence

import av
import numpy as np
from PIL import Image

from transforms.media.decoded import Frame, MediaError

__all__ = [
    "FrameOptions",
    "iter_frames",
    "iter_image_sequence",
    "image_sequence_members",
    "probe_video",
]

# How far short of its declared duration a decoded stream may end before we
# call it truncated: more than a frame or two of rounding, less than any cut
# worth reporting.
_TRUNCATION_SLACK = 0.5

# An image-sequence field: an optional prefix ending in a separator, a frame
# number, an image extension ("0001.jpg", "frames.0001.png", "frames/12.jpeg").
_SEQUENCE_FIELD = re.compile(r"^(.*[./_-])?(\d+)\.(?:jpe?g|png)$", re.IGNORECASE)

# What PyAV raises on bad data; its EOFError subclasses FFmpegError.
_AV_ERRORS = (av.FFmpegError,)
# What Pillow raises on bad image data (UnidentifiedImageError is an OSError).
_IMAGE_ERRORS = (OSError, ValueError, EOFError, Image.DecompressionBombError)


@dataclasses.dataclass(frozen=True)
class FrameOptions:
    """Which frames to take and how to output them (see the module docstring)."""

    fps: float | None = 1.0         # sample at this rate; None: every frame ...
    num_frames: int = 0             # ... or N frames uniformly over the duration (when > 0)
    timestamps: tuple = ()          # ... or at these times in seconds (when non-empty)
    size: tuple | None = None       # (height, width) output size; None keeps the source size
    resize: str = "pad"             # "pad": fit and letterbox with black; "crop": fill, centre-crop
    image_format: str = "jpeg"      # "jpeg" -> Frame.jpeg; "raw" -> Frame.image (HxWx3 uint8 RGB)
    jpeg_quality: int = 90
    threads: int = 0                # decoder and scaler threads: 0 = FFmpeg's choice, 1 = none

    def __post_init__(self):
        # Normalised so equal options compare and hash equal whatever was passed.
        object.__setattr__(self, "timestamps", tuple(float(t) for t in self.timestamps))
        if self.size is not None:
            object.__setattr__(self, "size", tuple(int(s) for s in self.size))
        if self.fps is not None and not (math.isfinite(self.fps) and self.fps > 0):
            raise ValueError(f"fps must be positive or None, got {self.fps}")
        if self.num_frames < 0:
            raise ValueError(f"num_frames must be >= 0, got {self.num_frames}")
        if any(not (math.isfinite(t) and t >= 0) for t in self.timestamps):
            raise ValueError(f"timestamps must be finite and >= 0, got {self.timestamps}")
        if self.size is not None and (len(self.size) != 2 or min(self.size) < 1):
            raise ValueError(f"size must be (height, width) of positive ints, got {self.size}")
        if self.resize not in ("pad", "crop"):
            raise ValueError(f"resize must be 'pad' or 'crop', got {self.resize!r}")
        if self.image_format not in ("jpeg", "raw"):
            raise ValueError(f"image_format must be 'jpeg' or 'raw', got {self.image_format!r}")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality must be in 1..100, got {self.jpeg_quality}")
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0, got {self.threads}")


class _Picker:
    """Matches increasing target times to a stream of (time, item) pairs, streamed.

    `feed` takes items in time order and returns the (time, item) pairs chosen
    so far; it holds only the previous pair, the candidate for targets between
    it and the current one. Nearest wins, ties to the earlier; no pair is
    returned twice.
    """

    def __init__(self, targets: Iterator[float]):
        self._targets = targets
        self.target = next(targets, None)
        self._prev = None          # the pair fed last
        self._chosen = None        # the pair returned last

    def feed(self, time: float, item) -> list:
        current = (time, item)
        chosen = []
        while self.target is not None and time >= self.target:
            prev = self._prev
            pick = prev if prev is not None and self.target - prev[0] <= time - self.target else current
            if pick is not self._chosen:
                chosen.append(pick)
                self._chosen = pick
            self.target = next(self._targets, None)
        self._prev = current
        return chosen

    def finish(self, end: float) -> list:
        """At the end of the items, the last one being on screen until `end`:
        that pair if a pending target falls before `end`. Leaves `target` at
        the first target not served, or None."""
        chosen = []
        # `end` may carry float rounding from summed frame durations; a target
        # within a microsecond of it is already past the last frame.
        while self.target is not None and self._prev is not None and self.target < end - 1e-6:
            if self._prev is not self._chosen:
                chosen.append(self._prev)
                self._chosen = self._prev
            self.target = next(self._targets, None)
        return chosen


def _targets(options: FrameOptions, duration) -> Iterator[float] | None:
    """The sampling times in increasing order, None for every frame.

    `duration` is a callable giving D; it is called only for num_frames."""
    if options.timestamps:
        return iter(sorted(set(options.timestamps)))
    if options.num_frames > 0:
        d = duration()
        return (i * d / options.num_frames for i in range(options.num_frames))
    if options.fps is not None:
        return (k / options.fps for k in itertools.count())
    return None


def _scaled_size(height: int, width: int, options: FrameOptions) -> tuple[int, int]:
    """The size to scale to before padding or cropping to exactly options.size."""
    out_h, out_w = options.size
    fit = min if options.resize == "pad" else max
    scale = fit(out_h / height, out_w / width)
    h, w = max(1, round(height * scale)), max(1, round(width * scale))
    if options.resize == "pad":           # rounding must not overflow the box ...
        return min(h, out_h), min(w, out_w)
    return max(h, out_h), max(w, out_w)   # ... nor leave a gap when cropping


def _to_frame(frame: av.VideoFrame, time: float, options: FrameOptions) -> Frame:
    """One decoded frame to an output Frame: RGB, resized, raw or JPEG."""
    height, width = frame.height, frame.width
    if options.size is not None:
        height, width = _scaled_size(frame.height, frame.width, options)
    # The colour range comes from the frame: swscale assumes limited range
    # unless told, which would wash out full-range ("JPEG") video.
    rgb = frame.reformat(width=width, height=height, format="rgb24",
                         src_color_range=frame.color_range,
                         threads=options.threads).to_ndarray()
    if options.size is not None:
        out_h, out_w = options.size
        if options.resize == "pad":
            canvas = np.zeros((out_h, out_w, 3), np.uint8)
            top, left = (out_h - height) // 2, (out_w - width) // 2
            canvas[top:top + height, left:left + width] = rgb
            rgb = canvas
        else:
            top, left = (height - out_h) // 2, (width - out_w) // 2
            rgb = rgb[top:top + out_h, left:left + out_w]
    # PyAV's array is a view of the frame's buffer, whose rows are padded for
    # alignment; consumers (tobytes, the encoders) want plain C order.
    rgb = np.ascontiguousarray(rgb)
    h, w = rgb.shape[:2]
    if options.image_format == "raw":
        return Frame(time=time, image=rgb, height=h, width=w)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=options.jpeg_quality)
    return Frame(time=time, jpeg=buf.getvalue(), height=h, width=w)


def _label(name: str) -> str:
    return f"{name}: " if name else ""


def _open(data: bytes, label: str):
    """(container, video stream, container start time in seconds)."""
    if not data:
        raise MediaError(f"{label}empty input")
    try:
        container = av.open(io.BytesIO(data))
    except _AV_ERRORS as e:
        raise MediaError(f"{label}not a readable video file (corrupt, truncated or "
                         f"not a video): {e}") from e
    # Cover art in audio files is a one-picture "video" stream; it is not video.
    streams = [s for s in container.streams.video
               if not s.disposition & av.stream.Disposition.attached_pic]
    if not streams:
        container.close()
        raise MediaError(f"{label}no video stream ({container.format.name}: "
                         f"{', '.join(s.type for s in container.streams) or 'no streams'})")
    stream = streams[0]
    if stream.codec_context is None:
        container.close()
        raise MediaError(f"{label}no decoder for the video codec in this FFmpeg build "
                         f"({container.format.name})")
    start = container.start_time / av.time_base if container.start_time is not None else 0.0
    return container, stream, start


def _declared_end(container, stream, start: float) -> tuple[float | None, bool]:
    """The video's declared end in seconds from the container start, and
    whether the video stream itself declares it (vs the whole container)."""
    offset = float(stream.start_time * stream.time_base) - start if stream.start_time is not None else 0.0
    if stream.duration is not None:
        return offset + float(stream.duration * stream.time_base), True
    tag = stream.metadata.get("DURATION")   # Matroska/WebM track tag, HH:MM:SS.fffffffff
    if tag:
        try:
            h, m, s = tag.split(":")
            return offset + int(h) * 3600 + int(m) * 60 + float(s), True
        except ValueError:
            pass
    if container.duration is not None:
        return container.duration / av.time_base, False
    return None, False


def _demuxed_end(data: bytes, stream_index: int, start: float) -> float:
    """The video's end from a demux-only pass (no decoding): the latest packet
    presentation time plus duration."""
    end = 0.0
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams[stream_index]
        for packet in container.demux(stream):
            # As when decoding, a packet without a timestamp follows the previous one.
            time = float(packet.pts * stream.time_base) - start if packet.pts is not None else end
            end = max(end, time + float((packet.duration or 0) * stream.time_base))
    return end


def _pts(stream, time: float, start: float) -> int:
    """A time from the container start as a timestamp in the stream's time base."""
    return int((time + start) / stream.time_base)


class _Seeker:
    """Where a seek to a time would land, asked of a second demuxer on the same
    bytes (opened on first use) so the decoding one moves only when that skips work."""

    def __init__(self, data: bytes, stream_index: int, start: float):
        self._data = data
        self._stream_index = stream_index
        self._start = start
        self._container = None

    def landing(self, time: float) -> float | None:
        """Time of the keyframe a backward seek to `time` lands on (None: no seek)."""
        try:
            if self._container is None:
                self._container = av.open(io.BytesIO(self._data))
            stream = self._container.streams[self._stream_index]
            self._container.seek(_pts(stream, time, self._start), stream=stream, backward=True)
            for packet in self._container.demux(stream):
                if packet.pts is not None:
                    return float(packet.pts * stream.time_base) - self._start
        except _AV_ERRORS:
            return None
        return None

    def close(self) -> None:
        if self._container is not None:
            self._container.close()


def iter_frames(data: bytes, options: FrameOptions, *, name: str = "") -> Iterator[Frame]:
    """Frames sampled from the video in `data` (an encoded file's bytes).

    Streamed: decodes frame by frame, seeking ahead when that skips work.
    Sampling, timing, output and error rules are in the module docstring;
    errors are raised as MediaError while iterating, naming `name`.
    """
    label = _label(name)
    container, stream, start = _open(data, label)
    with container:
        stream.codec_context.thread_type = "AUTO"
        stream.codec_context.thread_count = options.threads
        declared, stream_declares = _declared_end(container, stream, start)
        if options.timestamps and declared is not None and max(options.timestamps) >= declared:
            raise MediaError(f"{label}timestamp {max(options.timestamps):g} s is past the "
                             f"end of the video ({declared:g} s)")
        targets = _targets(options, lambda: declared if declared is not None
                           else _demuxed_end(data, stream.index, start))
        if targets is None:
            picker = seeker = None
        else:
            picker, seeker = _Picker(targets), _Seeker(data, stream.index, start)
        try:
            yield from _sample(container, stream, start, options, picker, seeker, label,
                               declared if stream_declares else None)
        finally:
            if seeker is not None:
                seeker.close()


def _sample(container, stream, start, options, picker, seeker, label, declared_end):
    """The decoding loop of iter_frames (picker None: every frame)."""
    frames = container.decode(stream)
    decoded = yielded = 0
    time = end = 0.0                        # last frame's time and display end
    sought = None                           # the target last considered for a seek
    rate = stream.average_rate or stream.guessed_rate
    while picker is None or picker.target is not None:
        # A seek can only skip work for a target beyond the last frame decoded.
        if picker is not None and picker.target != sought and picker.target > end:
            sought = picker.target
            landing = seeker.landing(sought)
            if landing is not None and time < landing <= sought:
                container.seek(_pts(stream, sought, start), stream=stream, backward=True)
                frames = container.decode(stream)
        try:
            frame = next(frames, None)
        except _AV_ERRORS as e:
            raise MediaError(f"{label}corrupt video data after {decoded} frames decoded "
                             f"({yielded} yielded): {e}") from e
        if frame is None:
            break
        if frame.is_corrupt:
            raise MediaError(f"{label}corrupt video frame after {decoded} frames decoded "
                             f"({yielded} yielded)")
        decoded += 1
        time = frame.time - start if frame.pts is not None else end
        if frame.duration:
            end = time + float(frame.duration * frame.time_base)
        else:
            end = time + (1 / float(rate) if rate else 0.0)
        for t, f in [(time, frame)] if picker is None else picker.feed(time, frame):
            yielded += 1
            yield _to_frame(f, t, options)
    if picker is not None and picker.target is None:
        return                              # every target served before the end
    if decoded == 0:
        raise MediaError(f"{label}no video frames could be decoded")
    if declared_end is not None and end < declared_end - _TRUNCATION_SLACK:
        raise MediaError(f"{label}truncated: the video stream ends at {end:.3f} s but "
                         f"declares {declared_end:.3f} s ({decoded} frames decoded, "
                         f"{yielded} yielded)")
    if picker is not None:
        for t, f in picker.finish(end):
            yield _to_frame(f, t, options)
        if options.timestamps and picker.target is not None:
            raise MediaError(f"{label}timestamp {picker.target:g} s is past the end of "
                             f"the video ({end:.3f} s)")


def iter_image_sequence(images: Sequence[tuple[str, bytes]], options: FrameOptions, *,
                        fps: float) -> Iterator[Frame]:
    """Frames sampled from a sequence of encoded images (JPEG, PNG, ...).

    `images` are (name, bytes) pairs in frame order (`image_sequence_members`
    gives them sorted); image i is the frame at time i / fps and on screen
    until (i + 1) / fps, so the sequence lasts len(images) / fps seconds.
    Sampling, resizing and output follow the same rules as `iter_frames`
    (fps, num_frames and timestamps are in seconds of the sequence, so
    `options.fps == fps` takes every image). Only chosen images are decoded,
    with Pillow, converted to RGB (an alpha channel is dropped). A member that
    does not decode is a MediaError naming it; an empty sequence is too.
    """
    if not (math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be positive, got {fps}")
    if not images:
        raise MediaError("empty image sequence")
    duration = len(images) / fps
    if options.timestamps and max(options.timestamps) >= duration:
        raise MediaError(f"timestamp {max(options.timestamps):g} s is past the end of the "
                         f"image sequence ({len(images)} images at {fps:g} fps = {duration:g} s)")
    for time, (member, data) in _sequence_choices(images, options, fps, duration):
        try:
            with Image.open(io.BytesIO(data)) as image:
                rgb = np.asarray(image.convert("RGB"))
        except _IMAGE_ERRORS as e:
            raise MediaError(f"image sequence member {member!r}: cannot decode: {e}") from e
        yield _to_frame(av.VideoFrame.from_ndarray(rgb, format="rgb24"), time, options)


def _sequence_choices(images, options: FrameOptions, fps: float, duration: float) -> Iterator:
    """The (time, member) pairs iter_image_sequence decodes."""
    targets = _targets(options, lambda: duration)
    if targets is None:
        yield from ((i / fps, member) for i, member in enumerate(images))
        return
    picker = _Picker(targets)
    for i, member in enumerate(images):
        yield from picker.feed(i / fps, member)
    yield from picker.finish(duration)


def image_sequence_members(sample: Mapping[str, object]) -> list[tuple[str, bytes]]:
    """The (field, bytes) pairs of a Sample's numbered image fields, in frame order.

    A field is a frame if its name (case-insensitive) is an optional prefix
    ending in ".", "/", "_" or "-", then a decimal frame number, then ".jpg",
    ".jpeg" or ".png": "0001.jpg" (from tar members key.0001.jpg),
    "frames.0001.png", "frames/0001.png", "frame_12.jpeg". Other fields
    ("mp4", "json", "thumb.jpg", "cam2.jpg") are ignored; `__`-prefixed
    entries are never fields. Frames are sorted by the number's integer value
    ("2.jpg" before "10.jpg"); gaps in the numbering are allowed and do not
    count as time (iter_image_sequence times frames by position). Returns []
    when there are no frames. MediaError when the frames do not make one
    sequence: two prefixes ("a.1.jpg" and "b.1.jpg"), two fields with one
    number ("1.jpg" and "001.png"), or a frame whose value is not bytes.
    """
    key = sample.get("__key__", "")
    label = f"{key}: " if key else ""
    frames, prefixes = {}, set()
    for field, value in sample.items():
        match = None if field.startswith("__") else _SEQUENCE_FIELD.match(field)
        if match is None:
            continue
        prefix, number = (match.group(1) or "").lower(), int(match.group(2))
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise MediaError(f"{label}image sequence field {field!r} holds "
                             f"{type(value).__name__}, not bytes")
        if number in frames:
            raise MediaError(f"{label}image sequence fields {frames[number][0]!r} and "
                             f"{field!r} have the same frame number {number}")
        frames[number] = (field, bytes(value))
        prefixes.add(prefix)
    if len(prefixes) > 1:
        raise MediaError(f"{label}more than one image sequence (prefixes "
                         f"{', '.join(repr(p) for p in sorted(prefixes))}); select one first")
    return [frames[n] for n in sorted(frames)]


def probe_video(data: bytes, *, name: str = "") -> dict:
    """The video's metadata from the container headers, without decoding.

    Keys: `duration` (seconds, declared by the video stream or else the
    container; None if neither says), `fps` (average frame rate, or FFmpeg's
    guess; None if unknown), `width` and `height` (stored pixels), `has_audio`,
    `codec` (FFmpeg decoder name, e.g. "h264", "vp9"). MediaError for what
    iter_frames cannot open (empty, not a video, no video stream, no decoder).
    """
    container, stream, start = _open(data, _label(name))
    with container:
        rate = stream.average_rate or stream.guessed_rate
        return {
            "duration": _declared_end(container, stream, start)[0],
            "fps": float(rate) if rate else None,
            "width": stream.codec_context.width,
            "height": stream.codec_context.height,
            "has_audio": bool(container.streams.audio),
            "codec": stream.codec_context.name,
        }

"""Video frames from a video file's bytes: sampled at chosen times, resized, RGB or JPEG.

Beam-free. `iter_frames` decodes a video file's bytes (any container and codec
the bundled FFmpeg reads: mp4/H.264, webm/VP9, mkv, ...) with PyAV and yields
`transforms.media.decoded.Frame`s, chosen and output by the rules of
transforms/media/frames.py (image sequences: transforms/media/image_sequence.py).
`probe_video` reads the container's metadata without decoding.

    from transforms.media.frames import FrameOptions
    from transforms.media.video import iter_frames

    options = FrameOptions(fps=1.0, size=(224, 224), resize="crop")
    for frame in iter_frames(sample["mp4"], options, name=sample["__key__"]):
        frame.time, frame.jpeg            # seconds, JPEG bytes of a 224x224 RGB image

Decoding streams frame by frame and keeps at most two decoded frames (the
nearest-frame candidate and the current one), so memory does not grow with
the video's length. When a sampling time is ahead of the decoder, a second
demuxer on the same bytes tells where a seek would land (the keyframe at or
before that time); the decoder seeks only if that keyframe lies after the last
decoded frame, i.e. only when seeking skips work. Decoding stops as soon as the
last target time is served. `num_frames` needs D before decoding: the video
stream's declared duration (mp4 track duration, Matroska/WebM track DURATION
tag), else the container's, else a demux-only pass over the packets.

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

import contextlib
from typing import Iterator

import av

from transforms.format.sample import StoredBytes
from transforms.format.segments import BoxTrack
from transforms.media.decoded import SPAN_SLACK_S, Frame, MediaError, media_file
from transforms.media.frames import FrameOptions, FramePicker, sampling_times, to_frame, within

__all__ = ["iter_frames", "probe_video"]

# How far short of its declared duration a decoded stream may end before we
# call it truncated: more than a frame or two of rounding, less than any cut
# worth reporting.
_TRUNCATION_SLACK = 0.5

# What PyAV raises on bad data; its EOFError subclasses FFmpegError.
_AV_ERRORS = (av.FFmpegError,)



def _label(name: str) -> str:
    return f"{name}: " if name else ""


@contextlib.contextmanager
def _opened(data: bytes | StoredBytes, label: str) -> Iterator[tuple]:
    """(container, video stream, container start time in seconds), closed after."""
    if not len(data):
        raise MediaError(f"{label}empty input")
    with media_file(data) as file:
        try:
            container = av.open(file)
        except _AV_ERRORS as e:
            raise MediaError(f"{label}not a readable video file (corrupt, truncated or "
                             f"not a video): {e}") from e
        with container:
            # Cover art in audio files is a one-picture "video" stream; it is not video.
            streams = [s for s in container.streams.video
                       if not s.disposition & av.stream.Disposition.attached_pic]
            if not streams:
                raise MediaError(f"{label}no video stream ({container.format.name}: "
                                 f"{', '.join(s.type for s in container.streams) or 'no streams'})")
            stream = streams[0]
            if stream.codec_context is None:
                raise MediaError(f"{label}no decoder for the video codec in this FFmpeg build "
                                 f"({container.format.name})")
            start = (container.start_time / av.time_base if container.start_time is not None
                     else 0.0)
            yield container, stream, start


def _declared_end(container, stream, start: float) -> tuple[float | None, bool]:
    """The video's declared end in seconds from the container start, and
    whether the video stream itself declares it (vs the whole container)."""
    offset = (float(stream.start_time * stream.time_base) - start
              if stream.start_time is not None else 0.0)
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


def _demuxed_end(data: bytes | StoredBytes, stream_index: int, start: float) -> float:
    """The video's end from a demux-only pass (no decoding): the latest packet
    presentation time plus duration."""
    end = 0.0
    with media_file(data) as file, av.open(file) as container:
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

    def __init__(self, data: bytes | StoredBytes, stream_index: int, start: float):
        self._data = data
        self._stream_index = stream_index
        self._start = start
        self._files = contextlib.ExitStack()
        self._container = None

    def landing(self, time: float) -> float | None:
        """Time of the keyframe a backward seek to `time` lands on (None: no seek)."""
        try:
            if self._container is None:
                self._container = self._files.enter_context(
                    av.open(self._files.enter_context(media_file(self._data))))
            stream = self._container.streams[self._stream_index]
            self._container.seek(_pts(stream, time, self._start), stream=stream, backward=True)
            for packet in self._container.demux(stream):
                if packet.pts is not None:
                    return float(packet.pts * stream.time_base) - self._start
        except _AV_ERRORS:
            return None
        return None

    def close(self) -> None:
        self._files.close()


def iter_frames(data: bytes | StoredBytes, options: FrameOptions, *, name: str = "",
                span: tuple[float, float] | None = None,
                boxes: BoxTrack | None = None) -> Iterator[Frame]:
    """Frames sampled from the video in `data` (an encoded file's bytes, or a
    StoredBytes read as it goes); with a segment's `span`, from that part only
    (transforms/media/frames.py `sampling_times`); with a box track, each
    cropped to its box (`to_frame`).

    Streamed: decodes frame by frame, seeking ahead when that skips work.
    Sampling, timing, output and error rules are in the module docstring;
    errors are raised as MediaError while iterating, naming `name`.
    """
    label = _label(name)
    with _opened(data, label) as (container, stream, start):
        stream.codec_context.thread_type = "AUTO"
        stream.codec_context.thread_count = options.threads
        declared, stream_declares = _declared_end(container, stream, start)
        if options.timestamps and span is None and declared is not None and (
                max(options.timestamps) >= declared):
            raise MediaError(f"{label}timestamp {max(options.timestamps):g} s is past the "
                             f"end of the video ({declared:g} s)")
        if span is not None and declared is not None and span[1] > declared + SPAN_SLACK_S:
            raise MediaError(f"{label}segment [{span[0]:g}, {span[1]:g}) s reaches past the "
                             f"end of the video ({declared:.3f} s)", stage="segment",
                             member=name or None)
        targets = sampling_times(options, lambda: declared if declared is not None
                                 else _demuxed_end(data, stream.index, start), span)
        if targets is None:
            picker = seeker = None
        else:
            picker, seeker = FramePicker(targets), _Seeker(data, stream.index, start)
        try:
            yield from within(_sample(container, stream, start, options, picker, seeker, label,
                                      declared if stream_declares else None, boxes),
                              span if picker is None else None)
        finally:
            if seeker is not None:
                seeker.close()


def _sample(container, stream, start, options, picker, seeker, label, declared_end, boxes):
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
            yield to_frame(f, t, options, boxes)
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
            yield to_frame(f, t, options, boxes)
        if options.timestamps and picker.target is not None:
            raise MediaError(f"{label}timestamp {picker.target:g} s is past the end of "
                             f"the video ({end:.3f} s)")


def probe_video(data: bytes | StoredBytes, *, name: str = "") -> dict:
    """The video's metadata from the container headers, without decoding.

    Keys: `duration` (seconds, declared by the video stream or else the
    container; None if neither says), `fps` (average frame rate, or FFmpeg's
    guess; None if unknown), `width` and `height` (stored pixels), `has_audio`,
    `codec` (FFmpeg decoder name, e.g. "h264", "vp9"). MediaError for what
    iter_frames cannot open (empty, not a video, no video stream, no decoder).
    """
    with _opened(data, _label(name)) as (container, stream, start):
        rate = stream.average_rate or stream.guessed_rate
        return {
            "duration": _declared_end(container, stream, start)[0],
            "fps": float(rate) if rate else None,
            "width": stream.codec_context.width,
            "height": stream.codec_context.height,
            "has_audio": bool(container.streams.audio),
            "codec": stream.codec_context.name,
        }

"""Which frames to take, and how a chosen frame is output: the rules video
(transforms/media/video.py) and image sequences (transforms/media/image_sequence.py)
share. Beam-free.

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

Output: the frame is first turned upright as its display matrix says (a
phone's portrait video: stored landscape, rotated 90 degrees), as players and
FFmpeg's CLI show it. With `size=(height, width)` it is scaled by FFmpeg's
swscale (bilinear, keeping the aspect ratio of the stored pixels) to fit inside
("pad": then centred on black) or to cover ("crop": then centre-cropped) the
target, so the output is exactly that size; `size=None` keeps the stored size.
`image_format="raw"` fills `Frame.image` (HxWx3 uint8 RGB), "jpeg" fills
`Frame.jpeg` (Pillow, `jpeg_quality`); both set `Frame.height`/`Frame.width`.
`threads` sets FFmpeg's decoder threads (0 = one per core, chosen by FFmpeg;
1 = unthreaded) and the scaler's.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import math
from typing import Iterator

import av
import numpy as np
from PIL import Image

from transforms.format.segments import Box, BoxTrack
from transforms.media.decoded import Frame, MediaError

__all__ = ["FrameOptions", "FramePicker", "crop_box", "sampling_times", "scaled_size",
           "to_frame", "within"]


@dataclasses.dataclass(frozen=True)
class FrameOptions:
    """Which frames to take and how to output them (see the module docstring).

    >>> import apache_beam as beam, transforms as dg
    >>> from apache_beam.testing.util import assert_that, equal_to
    >>> from transforms.testing.synthetic_media import speaker_colour, video_bytes
    >>> clip = {"__key__": "v", "mp4": video_bytes(speaker_colour(1), seconds=2.0)}
    >>> cut = dg.CutOptions(mode="frames", video_field="mp4", with_audio=False,
    ...                     frames=dg.FrameOptions(fps=None, num_frames=4, size=(64, 64),
    ...                                            image_format="raw"))
    >>> with dg.make_pipeline() as p:   # 4 frames over the clip, each 64x64 RGB
    ...     frames = p | beam.Create([clip]) | dg.CutSamples(cut)
    ...     shapes = frames.examples | beam.Map(lambda e: e["frame"].shape)
    ...     _ = assert_that(shapes, equal_to([(64, 64, 3)] * 4))
    """

    fps: float | None = 1.0         # sample at this rate; None: every frame ...
    num_frames: int = 0             # ... or N frames uniformly over the duration (when > 0)
    timestamps: tuple = ()          # ... or at these times in seconds (when non-empty)
    size: tuple | None = None       # (height, width) output size; None keeps the source size
    resize: str = "pad"             # "pad": fit and letterbox with black; "crop": fill, centre-crop
    image_format: str = "jpeg"      # "jpeg" -> Frame.jpeg; "raw" -> Frame.image (HxWx3 uint8 RGB)
    jpeg_quality: int = 90
    threads: int = 0                # decoder and scaler threads: 0 = FFmpeg's choice, 1 = none
    box_margin: float = 0.0         # a box crop's margin, in box widths/heights on each side

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
        if not (math.isfinite(self.box_margin) and self.box_margin >= 0):
            raise ValueError(f"box_margin must be >= 0, got {self.box_margin}")


class FramePicker:
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
            earlier_nearer = prev is not None and self.target - prev[0] <= time - self.target
            pick = prev if earlier_nearer else current
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


def sampling_times(options: FrameOptions, duration,
                   span: tuple[float, float] | None = None) -> Iterator[float] | None:
    """The sampling times in increasing order, None for every frame.

    `duration` is a callable giving D; it is called only for num_frames. With
    a segment's `span` (start, end), times count from its start (D is its
    length) and stop before its end; an explicit timestamp at or past its end
    is a MediaError."""
    if span is not None:
        start, end = span
        if options.timestamps and max(options.timestamps) >= end - start:
            raise MediaError(f"timestamp {max(options.timestamps):g} s is past the end of the "
                             f"segment [{start:g}, {end:g}) s", stage="segment")
        times = sampling_times(options, lambda: end - start)
        return None if times is None else itertools.takewhile(
            lambda t: t < end, (start + t for t in times))
    if options.timestamps:
        return iter(sorted(set(options.timestamps)))
    if options.num_frames > 0:
        d = duration()
        return (i * d / options.num_frames for i in range(options.num_frames))
    if options.fps is not None:
        return (k / options.fps for k in itertools.count())
    return None


def within(frames: Iterator, span: tuple[float, float] | None, time=lambda f: f.time) -> Iterator:
    """Every frame whose time is in a segment's span [start, end), in time
    order, stopping at the first past it; all of them without a span."""
    if span is None:
        return frames
    start, end = span
    return (f for f in itertools.takewhile(lambda f: time(f) < end, frames) if time(f) >= start)


def scaled_size(height: int, width: int, options: FrameOptions) -> tuple[int, int]:
    """The size to scale to before padding or cropping to exactly options.size."""
    out_h, out_w = options.size
    fit = min if options.resize == "pad" else max
    scale = fit(out_h / height, out_w / width)
    h, w = max(1, round(height * scale)), max(1, round(width * scale))
    if options.resize == "pad":           # rounding must not overflow the box ...
        return min(h, out_h), min(w, out_w)
    return max(h, out_h), max(w, out_w)   # ... nor leave a gap when cropping


def crop_box(box: Box, normalised: bool, height: int, width: int,
             margin: float) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) pixels of a box in a height x width frame:
    widened by `margin` box sizes on each side, edges rounded to the nearest
    pixel, then clipped to the frame; MediaError when nothing of it is in the
    frame."""
    x, y, w, h = box.x, box.y, box.w, box.h
    if normalised:
        x, y, w, h = x * width, y * height, w * width, h * height
    x, y, w, h = x - margin * w, y - margin * h, w * (1 + 2 * margin), h * (1 + 2 * margin)
    # Edges rounded to the nearest pixel, so a box keeps its size wherever it is.
    top, left = max(0, round(y)), max(0, round(x))
    bottom, right = min(height, round(y + h)), min(width, round(x + w))
    if bottom <= top or right <= left:
        raise MediaError(f"the box at {box.time:g} s, {tuple(box[1:])}, lies outside the "
                         f"{width}x{height} frame")
    return top, left, bottom, right


def _upright_rgb(frame: av.VideoFrame, options: FrameOptions) -> np.ndarray:
    rgb = frame.reformat(format="rgb24", src_color_range=frame.color_range,
                         threads=options.threads).to_ndarray()
    return np.rot90(rgb, round(frame.rotation / 90) % 4)


def to_frame(frame: av.VideoFrame, time: float, options: FrameOptions,
             boxes: BoxTrack | None = None) -> Frame:
    """One decoded frame to an output Frame: upright, RGB, cropped to the box
    of `boxes` nearest `time` (and `options.box_margin` around it) when there
    is a track, resized, raw or JPEG."""
    if boxes is not None:
        upright = _upright_rgb(frame, options)
        top, left, bottom, right = crop_box(boxes.at(time), boxes.normalised,
                                            *upright.shape[:2], options.box_margin)
        frame = av.VideoFrame.from_ndarray(
            np.ascontiguousarray(upright[top:bottom, left:right]), format="rgb24")
    # A phone stores a portrait video as landscape pixels and a display matrix
    # saying to turn them (counter-clockwise degrees); players, FFmpeg's CLI and
    # TFDS's ffmpeg-based Video feature turn them, and so do we.
    quarter_turns = round(frame.rotation / 90) % 4
    stored = (frame.height, frame.width)
    shown = stored[::-1] if quarter_turns % 2 else stored
    height, width = shown if options.size is None else scaled_size(*shown, options)
    scaled = (width, height) if quarter_turns % 2 else (height, width)   # as stored
    # The colour range comes from the frame: swscale assumes limited range
    # unless told, which would wash out full-range ("JPEG") video.
    rgb = frame.reformat(width=scaled[1], height=scaled[0], format="rgb24",
                         src_color_range=frame.color_range,
                         threads=options.threads).to_ndarray()
    rgb = np.rot90(rgb, quarter_turns)
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

"""Frames of a sample stored as numbered images (WebDataset style: key.0001.jpg,
key.0002.jpg, ...), sampled and output as video frames are (transforms/media/frames.py).
Beam-free.

    from transforms.media.image_sequence import image_sequence_members, iter_image_sequence

    images = image_sequence_members(sample)     # [("0001.jpg", b"..."), ...] in frame order
    for frame in iter_image_sequence(images, FrameOptions(fps=1.0), fps=25.0):
        frame.time, frame.jpeg
"""

from __future__ import annotations

import io
import math
import re
from typing import Iterator, Mapping, Sequence

import av
import numpy as np
from PIL import Image, ImageOps

from transforms.format.segments import BoxTrack
from transforms.media.decoded import SPAN_SLACK_S, Frame, MediaError
from transforms.media.frames import FrameOptions, FramePicker, sampling_times, to_frame, within

__all__ = ["IMAGE_SEQUENCE", "image_sequence_members", "iter_image_sequence"]

# --video_field value meaning "the sample's numbered images".
IMAGE_SEQUENCE = "frames"

# An image-sequence field: an optional prefix ending in a separator, a frame
# number, an image extension ("0001.jpg", "frames.0001.png", "frames/12.jpeg").
_SEQUENCE_FIELD = re.compile(r"^(.*[./_-])?(\d+)\.(?:jpe?g|png)$", re.IGNORECASE)
# What Pillow raises on bad image data (UnidentifiedImageError is an OSError).
_IMAGE_ERRORS = (OSError, ValueError, EOFError, Image.DecompressionBombError)


def iter_image_sequence(images: Sequence[tuple[str, bytes]], options: FrameOptions, *,
                        fps: float, span: tuple[float, float] | None = None,
                        boxes: BoxTrack | None = None) -> Iterator[Frame]:
    """Frames sampled from a sequence of encoded images (JPEG, PNG, ...).

    `images` are (name, bytes) pairs in frame order (`image_sequence_members`
    gives them sorted); image i is the frame at time i / fps and on screen
    until (i + 1) / fps, so the sequence lasts len(images) / fps seconds.
    Sampling, resizing and output follow the same rules as `iter_frames`
    (fps, num_frames and timestamps are in seconds of the sequence, so
    `options.fps == fps` takes every image). Only chosen images are decoded,
    with Pillow, turned upright by their EXIF orientation (as a camera's
    photos are stored) and converted to RGB (an alpha channel is dropped). A member that
    does not decode is a MediaError naming it; an empty sequence is too. With
    a segment's `span`, only that part of the sequence, and with a box track
    each image cropped to its box (`iter_frames`'s rules).
    """
    if not (math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be positive, got {fps}")
    if not images:
        raise MediaError("empty image sequence")
    duration = len(images) / fps
    if span is not None and span[1] > duration + SPAN_SLACK_S:
        raise MediaError(f"segment [{span[0]:g}, {span[1]:g}) s reaches past the end of the "
                         f"image sequence ({len(images)} images at {fps:g} fps = {duration:g} s)",
                         stage="segment")
    if options.timestamps and span is None and max(options.timestamps) >= duration:
        raise MediaError(f"timestamp {max(options.timestamps):g} s is past the end of the "
                         f"image sequence ({len(images)} images at {fps:g} fps = {duration:g} s)")
    for time, (member, data) in _sequence_choices(images, options, fps, duration, span):
        try:
            with Image.open(io.BytesIO(data)) as image:
                # A camera's photo may be stored sideways with an EXIF orientation.
                rgb = np.asarray(ImageOps.exif_transpose(image).convert("RGB"))
        except _IMAGE_ERRORS as e:
            raise MediaError(f"image sequence member {member!r}: cannot decode: {e}") from e
        yield to_frame(av.VideoFrame.from_ndarray(rgb, format="rgb24"), time, options, boxes)


def _sequence_choices(images, options: FrameOptions, fps: float, duration: float,
                      span) -> Iterator:
    """The (time, member) pairs iter_image_sequence decodes."""
    targets = sampling_times(options, lambda: duration, span)
    if targets is None:
        yield from within(((i / fps, member) for i, member in enumerate(images)), span,
                          time=lambda choice: choice[0])
        return
    picker = FramePicker(targets)
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

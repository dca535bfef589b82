"""One record's media decoded, for the seeded sample of records a verification
decodes (the record against its spec is transforms/format/example_check.py's).

`media_problems` decodes what a record's media should be, for the seeded
sample of records a verification decodes: JPEG frames (Pillow) to their
declared height, width and channels; audio of a cut to the length its
start and end times span at its declared sample rate; and encoded images
and audio kept whole in a `bytes` feature (JPEG, PNG, FLAC, WAV, Ogg) with
Pillow or soundfile.
"""

from __future__ import annotations

import io

import numpy as np

from transforms.format.example_check import stored_values
from transforms.format.spec import FeatureSpec

__all__ = ["media_problems"]

_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")


def media_problems(example, spec: FeatureSpec) -> tuple:
    """(media values decoded, what failed) for a parsed `example` that passed
    `example_problems`."""
    decoded, problems = 0, []
    times = {name: stored_values(example, name, "float") for name in ("start_time", "end_time")
             if name in spec.names}
    for f in spec:
        if f.kind != "bytes" and not f.sample_rate:
            continue
        values = stored_values(example, f.name, f.kind)
        try:
            if f.dtype == "jpeg":
                for image in values:
                    _check_image(image, f.shape[-3:])
                    decoded += 1
            elif f.sample_rate:
                decoded += _check_audio_span(f, values, times)
            elif f.dtype == "bytes":
                decoded += sum(_check_encoded(v) for v in values)
        except ValueError as e:
            problems.append(f"feature {f.name!r}: {e}")
    return decoded, problems


def _check_image(data: bytes, shape: tuple | None = None) -> None:
    """Decodes an image; with `shape` (h, w, c), checks it has that shape."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            size, bands = image.size, len(image.getbands())
    except (UnidentifiedImageError, OSError, SyntaxError) as e:
        raise ValueError(f"the image does not decode: {e}") from None
    if shape is not None and (size[1], size[0], bands) != tuple(shape):
        raise ValueError(f"the image is {size[1]}x{size[0]}x{bands}, declared "
                         f"{'x'.join(map(str, shape))}")


def _check_audio_span(f, values, times: dict) -> int:
    """A cut's audio (its stored `values`) against its start and end times: 1
    if checked, 0 if the example has no times to check it against."""
    if len(times) < 2 or not times["end_time"] or times["end_time"][0] <= times["start_time"][0]:
        return 0
    start, end = times["start_time"][0], times["end_time"][0]
    # A segment's audio is as long as the segment (float32[*]): count what is stored.
    samples = f.shape[0] if f.shape[0] is not None else len(values)
    spanned = (end - start) * f.sample_rate
    # The times are float32: allow a sample, and their rounding at this magnitude.
    slack = 1 + 2 * f.sample_rate * float(np.spacing(np.float32(max(abs(start), abs(end)))))
    if abs(spanned - samples) > slack:
        raise ValueError(f"{samples} samples, but {start:.4f}-{end:.4f} s at the declared "
                         f"{f.sample_rate} Hz spans {spanned:.1f}")
    return 1


def _check_encoded(data: bytes) -> int:
    """Decodes an image or audio file kept whole; 1 if it was one, else 0."""
    if data.startswith(_IMAGE_MAGIC):
        _check_image(data)
        return 1
    if data[:4] in (b"fLaC", b"OggS") or (data[:4] == b"RIFF" and data[8:12] == b"WAVE"):
        import soundfile

        try:
            samples, rate = soundfile.read(io.BytesIO(data), dtype="int16")
        except (soundfile.LibsndfileError, RuntimeError) as e:
            raise ValueError(f"the audio does not decode: {e}") from None
        if not len(samples) or rate <= 0:
            raise ValueError(f"the audio decodes to {len(samples)} samples at {rate} Hz")
        return 1
    return 0

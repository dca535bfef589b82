"""Encoded media kept whole (a `bytes` feature): does it decode?

Beam-free. The one check both sides make: the writer before it publishes an
example holding an image or an audio file as it was stored (its dead letter,
stage `decode`, when it does not decode), and a verification reading a
sample of the records back (transforms/verify/examples.py). So what the
writer publishes, verify passes.

JPEG and PNG images are decoded with Pillow; audio files whose first bytes
name their format (FLAC, WAV, Ogg, MP3 with an ID3 tag, AIFF, ...) as the
cut decodes them (transforms/media/audio.py: libsndfile, else FFmpeg), a
block at a time, so a long recording is never held decoded. Other bytes - a
video, a bare MPEG audio frame (a random payload starts as one once in
2048), or no media (a payload, JSON) - are not checked here.
"""

from __future__ import annotations

import io

from transforms.media.audio import decoded_frames
from transforms.media.decoded import MediaError
from transforms.media.sniff import head_of, media_format

__all__ = ["check_encoded", "check_image"]

_IMAGES = ("jpeg", "png")
_AUDIO = ("flac", "ogg", "wav", "w64", "mp3", "aiff", "au", "caf", "sphere")


def check_image(data: bytes, shape: tuple | None = None) -> None:
    """Decodes an image; with `shape` (h, w, c), checks it has that shape.
    ValueError saying what is wrong."""
    from PIL import Image, UnidentifiedImageError  # its plug-ins load on first use

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            size, bands = image.size, len(image.getbands())
    except (UnidentifiedImageError, OSError, SyntaxError) as e:
        raise ValueError(f"the image does not decode: {e}") from None
    if shape is not None and (size[1], size[0], bands) != tuple(shape):
        raise ValueError(f"the image is {size[1]}x{size[0]}x{bands}, declared "
                         f"{'x'.join(map(str, shape))}")


def check_encoded(data: bytes) -> bool:
    """Decodes an image or audio file kept whole: True if it was one of the
    formats checked, False if not; ValueError when it does not decode."""
    kind = media_format(head_of(data))
    if kind in _IMAGES:
        check_image(data)
    elif kind in _AUDIO:
        try:
            decoded_frames(data, name=f"a {kind} file")
        except MediaError as e:
            raise ValueError(f"the audio does not decode: {e}") from None
    else:
        return False
    return True

"""How long a sample's media are, from their headers: what whole-sample examples
record (--cut none with --audio_fields or --video_field) and what
--min_duration_s/--max_duration_s test, before anything is decoded.

Audio comes first: the first of the audio fields the sample has, else the
video's own audio track (as the cuts take it), gives the duration and
`num_samples` (per channel, at the file's own rate). The video
field gives `num_frames` (its declared duration times its frame rate; the
count of images for an image sequence), and the duration when there is no
audio field. Beam-free.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

from transforms.format.sample import StoredBytes
from transforms.format.spec import Feature
from transforms.media.audio import probe_audio
from transforms.media.decoded import MediaError, staged
from transforms.media.image_sequence import IMAGE_SEQUENCE, image_sequence_members
from transforms.media.video import probe_video

__all__ = ["MediaLength", "length_features", "probe_length"]

_STAGE = "probe"


class MediaLength(NamedTuple):
    """A sample's media length; None where it has no such media."""

    duration_s: float
    num_samples: int | None = None
    num_frames: int | None = None

    def fields(self) -> dict:
        """The example fields `length_features` reads."""
        return {name: value for name, value in self._asdict().items() if value is not None}


def length_features(audio_fields: Sequence[str], video_field: str) -> tuple:
    """The features whole-sample examples get: duration_s, and num_samples with
    audio fields, num_frames with a video field; none without either."""
    if not (audio_fields or video_field):
        return ()
    return (Feature("duration_s", "float"),
            *((Feature("num_samples", "int64"),) if audio_fields else ()),
            *((Feature("num_frames", "int64"),) if video_field else ()))


def _encoded(value: Any) -> bytes | StoredBytes:
    """A media field's value as its decoders take it."""
    return value if isinstance(value, StoredBytes) else bytes(value)


def _video_frames(sample: Mapping[str, Any], field: str,
                  sequence_fps: float) -> tuple[int, float] | None:
    """(frames, seconds) of the sample's video, or None when it has none."""
    if field == IMAGE_SEQUENCE:
        frames = len(image_sequence_members(sample))
        return (frames, frames / sequence_fps) if frames else None
    if field not in sample:
        return None
    info = staged(_STAGE, field, probe_video, _encoded(sample[field]), name=field)
    if info["duration"] is None or not info["fps"]:
        raise MediaError(f"{field}: the video declares no duration or frame rate",
                         stage=_STAGE, member=field)
    return round(info["duration"] * info["fps"]), info["duration"]


def probe_length(sample: Mapping[str, Any], audio_fields: Sequence[str], video_field: str,
                 sequence_fps: float) -> MediaLength:
    """The sample's MediaLength; MediaError naming the field when it has none
    of the fields or their headers cannot be read, NoSamples when its audio
    has no length."""
    num_samples = duration = None
    audio = next((field for field in audio_fields if field in sample), None)
    if audio is None and audio_fields and video_field in sample:
        audio = video_field  # its audio track
    if audio is not None:
        num_samples, rate = staged(_STAGE, audio, probe_audio, _encoded(sample[audio]), name=audio)
        duration = num_samples / rate
    video = _video_frames(sample, video_field, sequence_fps) if video_field else None
    if duration is None and video is not None:
        duration = video[1]
    if duration is None:
        fields = [*audio_fields, *([video_field] if video_field else [])]
        raise MediaError(f"none of the media fields {', '.join(fields)} to measure")
    return MediaLength(duration, num_samples, video[0] if video else None)

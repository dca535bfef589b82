"""Cutting: one decoded sample into examples (audio windows, frames, clips).

Beam-free pure generators; `transforms.recipe.examples` runs them per sample. Every
example is a dict holding the sample's other fields (labels, metadata) plus
what the cut made and where it came from:

- `audio_windows`: `audio` (one window), `source_key`, `start_time`, `end_time`;
- `frames` (the audio-visual "single frame" example): `frame` (JPEG bytes or
  an HxWx3 uint8 array) and `audio`, the window centred on the frame's time,
  zero-padded at the edges; start/end are the audio window's (the frame's time
  when there is no audio);
- `clips`: `frames` (K consecutive sampled frames) and `audio`, the span from
  the first frame's time lasting K / fps seconds;
- `segments`: the whole of a segment: its `audio` (as long as the segment
  is) and, with a video, its `frames` (as many as it has, JPEGs);
- `utterances`: the whole of a sample's audio (a segment's, when it has
  segments) as one example, `audio` as long as it is, with `duration_s` and
  `num_samples`;
- `speech`: each piece of speech a voice activity detector finds in the
  audio (transforms/media/speech.py), as `utterances` are, with the
  detector's mean `speech_probability`; `min_duration_s` and `max_duration_s`
  bound the pieces (not the recording), and a recording with no speech is
  filtered as "no_speech".

With `audio_features` (transforms/media/features.py), every example's audio also
becomes filterbank, log-mel or MFCC frames, a feature named after their
kind (`fbank`), which replaces the audio unless `keep_waveform`.

A segment of a recording (a sample with `__span__`, made by
transforms/recipe/segments.py) is cut the same way inside its span only: its
audio is decoded from the span's start (seeking where the decoder can) to its
end, windows and frames are laid from the span's start, an audio window
around a frame holds the segment's audio only (zeros beyond it, as beyond a
recording's ends), and `source_key` is the recording's key. A span whose end
is not after its start, or that reaches past the media's end, fails its
segment (stage `segment`) before any example. With `crop_to_boxes`, a
segment's frames are cropped to its box track (a face's, VoxCeleb style: the
box nearest each frame's time) before they are resized, so a single-frame
example is the face with the audio around it.

Audio comes from the first of `audio_fields` the sample has, else from the
video's own audio track. Media are decoded lazily and streamed, so a long
recording is never decoded whole: windows are cut from the audio's blocks
(`audio_windows`), and a video's frames take theirs from an `AudioTimeline`
that decodes only as far as the frames have come. A decode error anywhere in
the audio still fails the sample: what the frames did not reach is read to
the end once they are done.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from transforms.format.arguments import (
    ArgumentError,
    check_choice,
    check_names,
    check_option_types,
)
from transforms.format.sample import CHANNEL, KEY, SOURCE_KEY, SPAN
from transforms.format.segments import BoxTrack
from transforms.format.spec import Feature
from transforms.media.audio import AudioOptions, stream_audio
from transforms.media.augment import (
    ORIGINAL,
    Augmentation,
    AugmentOptions,
    augment_blocks,
    augmentation_fields,
    perturbed_blocks,
)
from transforms.media.decoded import MediaError, staged
from transforms.media.features import (
    FEATURE_KINDS,
    AudioFeatures,
    WindowFeatures,
    compute_features,
)
from transforms.media.frames import FrameOptions
from transforms.media.image_sequence import (
    IMAGE_SEQUENCE,
    image_sequence_members,
    iter_image_sequence,
)
from transforms.media.length import length_features
from transforms.media.loudness import ActivePower, Heard
from transforms.media.quality import QUALITY_MEASURES, quality
from transforms.media.recorded import RecordedAudio
from transforms.media.speech import (
    DEFAULT_MAX_S,
    SPEECH_PROBABILITY,
    SPEECH_TOO_SHORT,
    SpeechOptions,
    speech_pieces,
    speech_ratio,
)
from transforms.media.video import iter_frames
from transforms.media.windows import AudioTimeline, OutsideAudio, WindowOptions, audio_windows

__all__ = ["CutOptions", "MODES", "cut_sample", "empty_reason", "media_features",
           "media_fields", "with_cut_features"]

MODES = ("none", "audio_windows", "frames", "clips", "segments", "utterances", "speech")
_MEDIA_FEATURES = ("audio", "frame", "frames", *FEATURE_KINDS)


@dataclasses.dataclass(frozen=True)
class CutOptions:
    """How to decode and cut; pickled to workers, so configuration only.

    `mode` is "none" (whole samples, their media kept as stored), "audio_windows",
    "frames" (one frame and the audio window around it), "clips" (K frames and
    their audio), "utterances" (a sample's whole audio as one example, with
    its duration: speech with transcripts), "segments" (each time-aligned
    segment of a recording whole: SegmentOptions say where they are) or
    "speech" (each piece of speech a detector finds: SpeechOptions say how);
    the rest says which fields hold the media and how to decode and cut them.

    >>> import transforms as dg
    >>> cut = dg.CutOptions(mode="frames", video_field="mp4", audio_fields=("flac",),
    ...                     frames=dg.FrameOptions(fps=2, size=(112, 112)))
    >>> [(f.name, f.dtype, f.shape) for f in cut.features]  # what each example gets
    [('audio', 'float', (16000,)), ('frame', 'jpeg', (112, 112, 3)), ('source_key', 'bytes', ()),
     ('start_time', 'float', ()), ('end_time', 'float', ())]
    """

    mode: str = "none"
    audio_fields: tuple = ()
    video_field: str = ""
    sequence_fps: float = 25.0
    audio: AudioOptions = AudioOptions()
    windows: WindowOptions = WindowOptions()
    frames: FrameOptions = FrameOptions()
    with_audio: bool = True
    av_window_s: float = 1.0
    clip_frames: int = 8
    # Frames cropped to the box of their segment's track nearest their time.
    crop_to_boxes: bool = False
    # Samples whose media last less or more are filtered ("duration"); 0: no bound.
    # With mode "speech" they bound the pieces of speech instead (0: at most
    # DEFAULT_MAX_S).
    min_duration_s: float = 0.0
    max_duration_s: float = 0.0
    speech: SpeechOptions = SpeechOptions()
    # Quality measures of each example's audio (transforms/media/quality.py),
    # each a float feature of its name.
    quality: tuple = ()
    # Filterbank, log-mel or MFCC frames of every example's audio.
    audio_features: AudioFeatures = AudioFeatures()
    # Augmented copies of the samples of some splits (transforms/media/augment.py).
    augment: AugmentOptions = AugmentOptions()

    def __post_init__(self):
        check_choice("mode", self.mode, MODES)
        check_option_types(self)
        object.__setattr__(self, "audio_fields", check_names("audio_fields", self.audio_fields))
        object.__setattr__(self, "quality", check_names("quality", self.quality))
        for name in self.quality:
            check_choice("quality", name, QUALITY_MEASURES)
        if self.min_duration_s < 0 or self.max_duration_s < 0 or (
                self.max_duration_s and self.min_duration_s > self.max_duration_s):
            raise ArgumentError("min_duration_s", f"{self.min_duration_s} and {{max_duration_s}} "
                                f"{self.max_duration_s}: bounds >= 0, the minimum not above "
                                "the maximum (0: no bound)")
        if (self.min_duration_s or self.max_duration_s) and not (
                self.audio_fields or self.video_field):
            raise ArgumentError("min_duration_s", "and {max_duration_s} measure the media of "
                                "{audio_fields} or {video_field}: name one")
        if self.crop_to_boxes and not self._uses_frames:
            raise ArgumentError("crop_to_boxes", "crops frames: {mode} frames or clips, or "
                                "segments with {video_field}")
        self._check_audio_work()
        if self.mode == "none":
            return
        mode = self.mode
        if self.audio.sample_rate is None and self._uses_audio:
            raise ArgumentError("mode", f"{mode} needs {{audio.sample_rate}} (examples have a "
                                "fixed length)")
        if self.mode in ("audio_windows", "segments", "utterances", "speech") and not (
                self.audio_fields or self.video_field):
            raise ArgumentError("mode", f"{mode} needs {{audio_fields}} or {{video_field}}")
        if self.mode in ("frames", "clips") and not self.video_field:
            raise ArgumentError("mode", f"{mode} needs {{video_field}}")
        if self._uses_frames and self.frames.size is None:
            raise ArgumentError("mode", f"{mode} needs {{frames.size}} (examples have a fixed "
                                "shape)")
        if self.mode == "segments" and self.video_field and self.frames.image_format != "jpeg":
            raise ArgumentError("mode", f"{mode} keeps a segment's frames, as many as it has, as "
                                "JPEGs: {frames.image_format} jpeg")
        if self.mode == "clips" and (not self.frames.fps or self.frames.num_frames
                                     or self.frames.timestamps or self.clip_frames < 1):
            raise ArgumentError("mode", f"{mode} samples at {{frames.fps}} (not "
                                "{frames.num_frames} or {frames.timestamps}) and needs "
                                "{clip_frames} >= 1")
        if self.mode == "speech":
            self._check_speech()
        made = next((f for f in self.features if f.name == self.audio_features.kind), None)
        if made is not None and made.shape[0] == 0:
            raise ArgumentError("audio_features", f"{self.audio_features.kind}: {mode} of "
                                f"{_example_seconds(self):g} s are shorter than one "
                                f"{self.audio_features.frame_ms:g} ms feature frame: longer "
                                "examples, or a shorter {frame_ms}")

    def _check_speech(self) -> None:
        shortest = 2 * self.speech.pad_s + 0.1
        if self.speech_max_s <= shortest:
            raise ArgumentError("max_duration_s", f"{self.speech_max_s:g}: a piece of speech "
                                f"holds its margins ({{speech.pad_s}} {self.speech.pad_s:g} "
                                f"each side) and some speech: more than {shortest:g} s")

    @property
    def speech_max_s(self) -> float:
        """The longest piece of speech (mode "speech")."""
        return self.max_duration_s or DEFAULT_MAX_S

    def _check_audio_work(self) -> None:
        """Audio features and augmentation work on the audio a cut decodes, at a
        fixed rate; speed perturbation on audio alone."""
        decodes_audio = self.mode != "none" and self._uses_audio
        if self.audio_features and not decodes_audio:
            raise ArgumentError("audio_features", f"are computed from the audio a cut decodes: not "
                                f"with {{mode}} {self.mode}" + (" (whole utterances: "
                                "{mode} utterances)" if self.mode == "none" else ""))
        if self.quality and not decodes_audio:
            raise ArgumentError("quality", f"measures the audio a cut decodes: not with {{mode}} "
                                f"{self.mode}")
        if self.augment and not decodes_audio:
            raise ArgumentError("augment.copies", f"are made from the audio a cut decodes: not "
                                f"with {{mode}} {self.mode}")
        for parameter, on in (("augment.copies", self.augment),
                              ("audio_features", self.audio_features)):
            if on and self.audio.sample_rate is None:
                raise ArgumentError(parameter, "need a fixed {audio.sample_rate}")
        if self.audio_features and self.audio.sample_rate:
            self.audio_features.check_rate(self.audio.sample_rate)
        if self.augment.speeds and self._uses_frames:
            raise ArgumentError("augment.speeds", f"change the audio's timeline and not the "
                                f"video's: not with {{mode}} {self.mode} of video frames")

    @property
    def features(self) -> tuple:
        """The features this cut adds to every example, before the spec's own
        (`media_features`)."""
        return media_features(self)

    @property
    def media_feature_names(self) -> tuple:
        """The features this cut fills with media (audio, frame, frames)."""
        return tuple(f.name for f in self.features if f.name in _MEDIA_FEATURES)

    @functools.cached_property   # asked of every sample: made once
    def measured_features(self) -> tuple:
        """(name, values a row, dtype) of the features whose statistics a job
        keeps (transforms/recipe/measures/statistics.py): the audio features'
        per value of a frame, a float waveform's level."""
        return tuple((f.name, f.shape[-1] if f.name in FEATURE_KINDS else 1, f.dtype)
                     for f in self.features
                     if f.name in FEATURE_KINDS or f.name == "audio" and f.dtype == "float")

    @property
    def streamed_fields(self) -> frozenset:
        """The fields this cut decodes as a stream (it never needs their bytes whole)."""
        if self.mode == "none":
            return frozenset()
        return frozenset({*self.audio_fields, self.video_field} - {"", IMAGE_SEQUENCE})

    @property
    def measures_length(self) -> bool:
        """Whether each sample's media length is probed first: for the duration
        bounds, or for whole-sample examples to record it."""
        if self.mode == "speech":   # the bounds are the pieces'
            return False
        return bool(self.min_duration_s or self.max_duration_s or (
            self.mode == "none" and (self.audio_fields or self.video_field)))

    def admits(self, duration_s: float) -> bool:
        """Whether a sample of this duration is within the duration bounds."""
        return (duration_s >= self.min_duration_s
                and (not self.max_duration_s or duration_s <= self.max_duration_s))

    @property
    def _uses_audio(self) -> bool:
        return (self.mode in ("audio_windows", "utterances", "speech") or self.with_audio
                or self.mode == "segments" and not self.video_field)

    @property
    def streams_audio(self) -> bool:
        """Whether cutting decodes each sample's audio (its span's) to the end, so
        `cut_sample`'s `audio_tap` sees all of it."""
        return self.mode != "none" and self._uses_audio

    @property
    def _uses_frames(self) -> bool:
        return self.mode in ("frames", "clips") or self.mode == "segments" and bool(
            self.video_field)

    def samples_in(self, seconds: float) -> int:
        return round(seconds * self.audio.sample_rate)


def _example_seconds(options: CutOptions) -> float | None:
    """How long each example's audio is; None where it is as long as its sample."""
    return {"audio_windows": options.windows.window_s, "frames": options.av_window_s,
            "clips": options.clip_frames / (options.frames.fps or 1),
            "segments": None, "utterances": None, "speech": None}[options.mode]


def media_features(options: CutOptions) -> tuple:
    """The features a cut adds to every example (the rest come from --features);
    whole samples with media fields get their length (transforms/media/length.py)."""
    if options.mode == "none":
        return length_features(options.audio_fields, options.video_field)
    audio_dtype = "int16" if options.audio.dtype == "int16" else "float"
    audio_seconds = _example_seconds(options)
    features = []
    if options._uses_audio:
        length = None if audio_seconds is None else options.samples_in(audio_seconds)
        if options.audio_features:
            frames = None if length is None else options.audio_features.num_frames(
                length, options.audio.sample_rate)
            features.append(Feature(options.audio_features.kind,
                                    options.audio_features.stored_dtype,
                                    (frames, options.audio_features.dims)))
        if options.audio_features.keep_waveform or not options.audio_features:
            features.append(Feature("audio", audio_dtype, (length,),
                                    sample_rate=options.audio.sample_rate))
    if options._uses_frames:
        height, width = options.frames.size
        image_dtype = "jpeg" if options.frames.image_format == "jpeg" else "uint8"
        shape = (height, width, 3)
        count = options.clip_frames if options.mode == "clips" else None
        features.append(Feature("frame", image_dtype, shape) if options.mode == "frames"
                        else Feature("frames", image_dtype, (count, *shape)))
    if options.mode in ("utterances", "speech"):
        features += length_features(("audio",), "")
    features += [Feature(SOURCE_KEY, "bytes"), Feature("start_time", "float"),
                 Feature("end_time", "float")]
    if options.mode == "speech":
        features.append(Feature(SPEECH_PROBABILITY, "float"))
    features += [Feature(name, "float") for name in options.quality]
    return tuple(features) + (options.augment.features if options.augment else ())


def with_cut_features(features: Sequence[Feature], options: CutOptions) -> tuple:
    """The cut's features (`media_features`, with their sample rates and
    shapes) and then `features`, so a spec need not restate them. A feature
    of `features` named as one of the cut's must declare its dtype and shape:
    the cut's declaration stands for it; ArgumentError otherwise."""
    cut_features = media_features(options)
    by_name = {f.name: f for f in cut_features}
    for feature in features:
        made = by_name.get(feature.name)
        if made is not None and (feature.dtype, feature.shape) != (made.dtype, made.shape):
            raise ArgumentError("audio_features", f"declare {feature.name!r} as {feature.dtype}"
                                f"{list(feature.shape)}, but the cut makes it {made.dtype}"
                                f"{list(made.shape)}: leave it out, the cut declares it")
    return cut_features + tuple(f for f in features if f.name not in by_name)


def media_fields(sample: Mapping[str, Any], options: CutOptions) -> set:
    """The sample fields a cut consumes (they are not copied into examples)."""
    if options.mode == "none":
        return set()
    fields = {f for f in options.audio_fields if f in sample}
    if options.video_field == IMAGE_SEQUENCE:
        fields.update(name for name, _ in image_sequence_members(sample))
    elif options.video_field:
        fields.add(options.video_field)
    return fields


def _audio_source(sample: Mapping[str, Any], options: CutOptions) -> str:
    for field in options.audio_fields:
        if field in sample:
            return field
    video = options.video_field
    if video and video != IMAGE_SEQUENCE and video in sample:
        return video
    looked = list(options.audio_fields) + ([options.video_field] if options.video_field else [])
    raise MediaError(f"no audio: the sample has none of {looked}", stage="decode_audio")


def _staged_iter(stage: str, member: str, iterator) -> Iterator:
    """`staged` for generators: errors surface while iterating."""
    try:
        yield from iterator
    except MediaError as e:
        raise e.tagged(stage, member) from e


def _frames(sample: Mapping[str, Any], options: CutOptions, span) -> Iterator:
    field = options.video_field
    boxes = _boxes(sample, options)
    if field == IMAGE_SEQUENCE:
        images = image_sequence_members(sample)
        if not images:
            raise MediaError("no numbered image fields for an image sequence",
                             stage="decode_video", member=field)
        return _staged_iter("decode_video", field, iter_image_sequence(
            images, options.frames, fps=options.sequence_fps, span=span, boxes=boxes))
    if field not in sample:
        raise MediaError(f"no video field {field!r}", stage="decode_video", member=field)
    return _staged_iter("decode_video", field, iter_frames(
        sample[field], options.frames, name=field, span=span, boxes=boxes))


def _boxes(sample: Mapping[str, Any], options: CutOptions) -> BoxTrack | None:
    """The segment's box track when frames are cropped to it (--boxes_from segment)."""
    if not options.crop_to_boxes:
        return None
    span = sample.get(SPAN)
    if span is None or span.boxes is None:
        raise MediaError("frames are cropped to the segment's boxes (crop_to_boxes), and "
                         "this segment has none", stage="segment")
    return span.boxes


class _AudioRoute(NamedTuple):
    """Where the audio a cut decodes goes before it is cut: `tap` hears each
    decoded block; `augmentation` changes them (transforms/media/augment.py)."""

    tap: Callable | None = None
    augmentation: Augmentation | None = None


def _audio_stream(sample: Mapping[str, Any], options: CutOptions, span,
                  stats: dict, route: _AudioRoute) -> Iterator:
    """The sample's audio (its span's) in blocks, decode errors tagged, each
    given to the route's tap too, then augmented as the route says; the
    milliseconds decoded counted in stats["audio_ms_decoded"]."""
    field = _audio_source(sample, options)
    audio = options.audio if CHANNEL not in sample else dataclasses.replace(
        options.audio, channel=sample[CHANNEL])
    blocks = stream_audio(sample[field], audio, name=field, span=span)

    def decoded():
        for block in _staged_iter("decode_audio", field, blocks):
            stats["audio_ms_decoded"] = (stats.get("audio_ms_decoded", 0)
                                         + round(1000 * len(block.samples) / block.sample_rate))
            if route.tap is not None:
                route.tap(block)
            yield block
    if route.augmentation is None:
        return decoded()
    return _staged_iter("augment", field, augment_blocks(decoded(), route.augmentation))


def _audio_timeline(sample: Mapping[str, Any], options: CutOptions, span,
                    stats: dict, route: _AudioRoute) -> AudioTimeline | None:
    """The sample's audio, decoded as far as the frames need it (from its first
    block on, so an unreadable track fails the sample before any frame)."""
    if not options.with_audio:
        return None
    return AudioTimeline(_audio_stream(sample, options, span, stats, route))


def _image(frame) -> Any:
    return frame.jpeg if frame.jpeg is not None else frame.image


def _audio_windows(sample, base, options, span, stats, route) -> Iterator[dict]:
    blocks = _audio_stream(sample, options, span, stats, route)
    windows = _staged_iter("cut", _audio_source(sample, options),
                           audio_windows(blocks, options.windows, key=sample[KEY], stats=stats))
    for w in windows:
        yield {**base, "audio": w.samples, "start_time": w.start, "end_time": w.end}
    if route.tap is not None:  # past --max_windows too: the tap hears the whole recording
        for _ in blocks:
            pass


def _segment_example(sample, base, options, span, stats, route) -> Iterator[dict]:
    if span is None:
        raise MediaError("the cut 'segments' cuts segments, and this sample is a whole "
                         "recording (give its segments: a segments field or segment columns)",
                         stage="segment")
    example = {**base, "start_time": span[0], "end_time": span[1]}
    if options._uses_frames:
        example["frames"] = [_image(frame) for frame in _frames(sample, options, span)]
    if options._uses_audio:
        audio, start, end = _whole_audio(sample, options, span, stats, route)
        example.update(audio=audio, start_time=start, end_time=end)
    yield example


def _utterance_example(sample, base, options, span, stats, route) -> Iterator[dict]:
    audio, start, end = _whole_audio(sample, options, span, stats, route)
    yield {**base, "audio": audio, "duration_s": end - start, "num_samples": len(audio),
           "start_time": start, "end_time": end}


def _speech_examples(sample, base, options, span, stats, route) -> Iterator[dict]:
    blocks = _audio_stream(sample, options, span, stats, route)
    pieces = speech_pieces(blocks, options.speech, options.speech_max_s, options.min_duration_s,
                           stats)
    found = False
    for piece in _staged_iter("cut", _audio_source(sample, options), pieces):
        found = True
        example = {**base, "audio": piece.samples, "duration_s": piece.end - piece.start,
                   "num_samples": len(piece.samples), "start_time": piece.start,
                   "end_time": piece.end, SPEECH_PROBABILITY: piece.probability}
        if "speech_ratio" in options.quality:
            example["speech_ratio"] = piece.speech_ratio
        yield example
    if not found and not stats.get(SPEECH_TOO_SHORT):
        stats[_NO_SPEECH] = 1


# What `empty_reason` says of a recording the detector found no speech in.
_NO_SPEECH = "recordings_without_speech"


def empty_reason(stats: Mapping[str, int]) -> str:
    """Why a sample gave no example, from its cut's `stats`: "no_speech" where a
    detector heard none, "speech_too_short" where every piece it found was
    dropped for its length, else "no_examples"."""
    if stats.get(_NO_SPEECH):
        return "no_speech"
    if stats.get(SPEECH_TOO_SHORT):
        return "speech_too_short"
    return "no_examples"


def _whole_audio(sample, options, span, stats, route) -> tuple[np.ndarray, float, float]:
    """The sample's (its span's) audio in one array, with its start and end time."""
    blocks = list(_audio_stream(sample, options, span, stats, route))
    audio = np.concatenate([block.samples for block in blocks])
    start = blocks[0].start
    return audio, start, start + len(audio) / blocks[0].sample_rate


def _frame_examples(sample, base, options, span, stats, route) -> Iterator[dict]:
    audio = _audio_timeline(sample, options, span, stats, route)
    for frame in _frames(sample, options, span):
        example = {**base, "frame": _image(frame), "start_time": frame.time, "end_time": frame.time}
        if audio is not None:
            try:
                w = audio.window_at(frame.time, options.av_window_s)
            except OutsideAudio:
                # A frame after the audio has ended (a video longer than its
                # audio): no audio-visual example there, counted, not a failure.
                stats["frames_without_audio"] = stats.get("frames_without_audio", 0) + 1
                continue
            example.update(audio=w.samples, start_time=w.start, end_time=w.end)
        yield example
    if audio is not None:
        audio.finish()


def _clip_examples(sample, base, options, span, stats, route) -> Iterator[dict]:
    audio = _audio_timeline(sample, options, span, stats, route)
    seconds = options.clip_frames / options.frames.fps
    clip = []
    for frame in _frames(sample, options, span):
        clip.append(frame)
        if len(clip) < options.clip_frames:
            continue
        start = clip[0].time
        images = [_image(f) for f in clip]
        example = {**base, "frames": images if clip[0].jpeg is not None else np.stack(images),
                   "start_time": start, "end_time": start + seconds}
        if audio is not None:
            # Centre on a whole sample so the window starts exactly at the
            # sample nearest the first frame, on the audio's own timeline.
            first = round((start - audio.start) * audio.sample_rate)
            centre = audio.start + (first + options.samples_in(seconds) // 2) / audio.sample_rate
            example["audio"] = audio.window_at(centre, seconds).samples
        yield example
        clip = []
    if clip:
        stats["clip_frames_dropped"] = stats.get("clip_frames_dropped", 0) + len(clip)
    if audio is not None:
        audio.finish()


def cut_sample(sample: Mapping[str, Any], options: CutOptions,
               stats: dict | None = None, audio_tap: Callable | None = None,
               augmentation: Augmentation | None = None) -> Iterator[dict]:
    """The examples of one sample (the sample itself when the mode is 'none').

    Raises MediaError (with `stage` and `member`) for media that cannot be
    decoded or cut; examples yielded before the error stand. `stats` counts
    what was dropped on purpose (windows_silent, frames_without_audio,
    clip_frames_dropped) and the audio decoded (audio_ms_decoded).
    `audio_tap` is given every block of audio the cut decodes, to the end
    when `options.streams_audio` (a near-duplicate fingerprint, the peak an
    augmentation needs, without a second decode). With `augmentation`, the
    audio is that copy's (transforms/media/augment.py); with
    `options.augment`, every example says which copy it is of (`aug.*`).
    """
    stats = stats if stats is not None else {}
    if options.mode == "none":
        yield sample
        return
    consumed = media_fields(sample, options)
    base = {k: v for k, v in sample.items() if k not in consumed}
    span = sample.get(SPAN)
    base[SOURCE_KEY] = sample[KEY] if span is None else span.recording
    if options.augment:
        base.update(augmentation_fields(augmentation or ORIGINAL, options.augment))
    span = None if span is None else _checked_span(span)
    cut = {"audio_windows": _audio_windows, "segments": _segment_example,
           "utterances": _utterance_example, "frames": _frame_examples,
           "clips": _clip_examples, "speech": _speech_examples}[options.mode]
    examples = cut(sample, base, options, span, stats, _AudioRoute(audio_tap, augmentation))
    if options.quality:
        examples = _with_quality(examples, options, sample)
    yield from (_with_features(examples, options, sample) if options.audio_features
                else examples)


def hear_copy(sample: Mapping[str, Any], options: CutOptions, augmentation: Augmentation,
              stats: dict) -> Heard:
    """What a copy's speech sounds like as its speed and RIR make it, before
    gain and noise: a pass over the sample's audio (its span's) that cuts
    nothing, for the copy's plan (AugmentOptions.plan's `hear`); the audio
    is recorded for the copy to replay (the caller closes it)."""
    span = sample.get(SPAN)
    span = None if span is None else _checked_span(span)
    heard, recorded = ActivePower(), RecordedAudio(options.audio.dtype)
    blocks = _audio_stream(sample, options, span, stats, _AudioRoute())
    try:
        for block in _staged_iter("augment", _audio_source(sample, options),
                                  perturbed_blocks(blocks, augmentation)):
            heard(block)
            recorded(block)
    except BaseException:
        recorded.close()
        raise
    return heard.heard(augmentation.speed, recorded)


def _with_quality(examples: Iterator[dict], options: CutOptions,
                  sample: Mapping[str, Any]) -> Iterator[dict]:
    """Each example with the quality measures of its audio (a speech piece's
    speech_ratio is the cut's own)."""
    rate, member = options.audio.sample_rate, _audio_source(sample, options)
    measured = tuple(name for name in options.quality if name != "speech_ratio")
    for example in examples:
        audio = example["audio"]
        example = {**example, **staged("quality", member, quality, audio, rate, measured)}
        if "speech_ratio" in options.quality and "speech_ratio" not in example:
            example["speech_ratio"] = staged("quality", member, speech_ratio, audio, rate,
                                             options.speech)
        yield example


def _with_features(examples: Iterator[dict], options: CutOptions,
                   sample: Mapping[str, Any]) -> Iterator[dict]:
    """Each example with its audio's features (the audio dropped unless kept);
    windows share the frames they overlap on (WindowFeatures)."""
    rate = options.audio.sample_rate
    windows = (WindowFeatures(rate, options.audio_features)
               if options.mode == "audio_windows" else None)
    for example in examples:
        if windows is not None:
            features = staged("features", _audio_source(sample, options), windows,
                              example["audio"], example["start_time"])
        else:
            features = staged("features", _audio_source(sample, options), compute_features,
                              example["audio"], rate, options.audio_features)
        example = {**example, options.audio_features.kind: features}
        if not options.audio_features.keep_waveform:
            del example["audio"]
        yield example


def _checked_span(span) -> tuple[float, float]:
    """A segment's (start, end); MediaError when it is not a span. Whether it
    ends within the media is for the decoders to say, which know the length."""
    if not 0 <= span.start < span.end:
        raise MediaError(f"segment [{span.start:g}, {span.end:g}) s: its end must come after "
                         "its start, and its start at or after 0", stage="segment")
    return span.start, span.end

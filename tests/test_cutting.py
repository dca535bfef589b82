"""cut_sample on synthetic samples: the examples, the features it declares, its errors."""

import io

import numpy as np
import pytest
from PIL import Image

from pipelines import cli
from pipelines.dataset_options import DatasetOptions
from transforms.media.audio import AudioOptions
from transforms.media.cutting import CutOptions, cut_sample, media_features
from transforms.media.decoded import MediaError
from transforms.media.frames import FrameOptions
from transforms.media.windows import WindowOptions
from transforms.testing import synthetic_media

RATE = 16_000


def _voice(seconds, speaker=2):
    return synthetic_media.voice(synthetic_media.speaker_pitch(speaker), seconds, seed=1)


def _sample(**fields):
    return {"__key__": "spk02_0001", "__url__": "mem://t", "cls": b"2", **fields}


def _png(colour):
    buf = io.BytesIO()
    Image.fromarray(np.full((24, 32, 3), colour, np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def test_mode_none_yields_the_sample_itself():
    sample = _sample(flac=b"x")
    assert list(cut_sample(sample, CutOptions())) == [sample]


def test_audio_windows_keep_labels_and_drop_the_media_fields():
    audio = _voice(2.0)
    options = CutOptions(mode="audio_windows", audio_fields=("flac",),
                         windows=WindowOptions(window_s=0.5, remainder="drop"))
    examples = list(cut_sample(_sample(flac=synthetic_media.flac_bytes(audio, RATE)), options))
    assert [e["start_time"] for e in examples] == [0.0, 0.5, 1.0, 1.5]
    for e in examples:
        assert set(e) == {"__key__", "__url__", "cls", "audio", "source_key", "start_time",
                          "end_time"}
        first = round(e["start_time"] * RATE)
        np.testing.assert_allclose(e["audio"], audio[first:first + 8000], atol=1.5 / 32768)
    assert [f.name for f in media_features(options)] == [
        "audio", "source_key", "start_time", "end_time"]
    assert media_features(options)[0].shape == (8000,)


def test_image_sequence_frames_with_separate_audio():
    # Numbered PNG members (spk02_0001.0002.png -> field "0002.png"), given out of order.
    colours = {f"{i:04d}.png": (40 * i, 10, 200) for i in range(1, 5)}
    sample = _sample(flac=synthetic_media.flac_bytes(_voice(1.0), RATE),
                     **{name: _png(c) for name, c in reversed(colours.items())})
    options = CutOptions(mode="frames", video_field="frames", audio_fields=("flac",),
                         sequence_fps=4, av_window_s=0.25,
                         frames=FrameOptions(fps=4, size=(24, 32), image_format="raw"))
    examples = list(cut_sample(sample, options))
    assert len(examples) == 4
    for i, e in enumerate(examples):
        np.testing.assert_allclose(e["frame"][12, 16], (40 * (i + 1), 10, 200), atol=2)
        assert e["end_time"] - e["start_time"] == pytest.approx(0.25)
        assert (e["start_time"] + e["end_time"]) / 2 == pytest.approx(i / 4)
        assert not any(k.endswith(".png") for k in e)


def test_frames_after_the_audio_ends_are_counted_not_failed():
    colour = synthetic_media.speaker_colour(2)
    sample = _sample(mp4=synthetic_media.video_bytes(colour, 3.0),
                     flac=synthetic_media.flac_bytes(_voice(1.0), RATE))
    options = CutOptions(mode="frames", video_field="mp4", audio_fields=("flac",),
                         av_window_s=0.5, frames=FrameOptions(fps=1, size=(30, 40)))
    stats = {}
    examples = list(cut_sample(sample, options, stats))
    # Frames at 0, 1 and 2 s: the one at 1 s still overlaps the audio (padded).
    assert len(examples) == 2 and stats == {"frames_without_audio": 1, "audio_ms_decoded": 1000}


def test_errors_carry_the_innermost_stage_and_member():
    options = CutOptions(mode="audio_windows", audio_fields=("flac",))
    with pytest.raises(MediaError) as info:
        list(cut_sample(_sample(flac=b"not audio at all"), options))
    assert info.value.stage == "decode_audio" and info.value.member == "flac"
    assert not str(info.value).startswith("flac: flac:")

    frames = CutOptions(mode="frames", video_field="mp4", frames=FrameOptions(size=(8, 8)))
    with pytest.raises(MediaError, match="no audio") as info:
        list(cut_sample(_sample(mp4=synthetic_media.video_bytes((1, 2, 3), 1.0)), frames))
    assert info.value.stage == "decode_audio"
    with pytest.raises(MediaError, match="no video field 'mp4'") as info:
        list(cut_sample(_sample(flac=b""), CutOptions(mode="frames", video_field="mp4",
                                                     with_audio=False,
                                                     frames=FrameOptions(size=(8, 8)))))
    assert info.value.stage == "decode_video"


@pytest.mark.parametrize("kwargs, message", [
    (dict(mode="shuffle"), "^mode 'shuffle': expected one of"),
    (dict(mode="frames", video_field="mp4"), "^mode frames needs frames.size"),
    (dict(mode="frames", frames=FrameOptions(size=(8, 8))), "^mode frames needs video_field"),
    (dict(mode="audio_windows"), "needs audio_fields or video_field"),
    (dict(mode="audio_windows", audio_fields=("flac",), audio=AudioOptions(sample_rate=None)),
     "needs audio.sample_rate"),
    (dict(mode="clips", video_field="mp4", frames=FrameOptions(fps=None, num_frames=3,
                                                                 size=(8, 8))),
     "samples at frames.fps"),
    (dict(mode="audio_windows", audio_fields="flac"),
     r"^audio_fields must be a tuple of field names, got 'flac'; for one field: \('flac',\)"),
    (dict(mode="speech", audio_fields=("flac",), speech="silero"),
     "^speech must be a SpeechOptions, got 'silero'"),
    (dict(mode="audio_windows", audio_fields=("flac",), audio=None),
     "^audio must be an AudioOptions, got None"),
])
def test_options_are_validated_before_any_work_in_python_terms(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CutOptions(**kwargs)


def test_the_command_line_says_the_flags_of_the_same_errors():
    with pytest.raises(ValueError) as error:
        CutOptions(mode="frames", video_field="mp4")
    assert error.value.said(cli.flag_names(DatasetOptions.FLAGS)) == (
        "--cut frames needs --frame_size (examples have a fixed shape)")


def test_clip_features_declare_their_shapes():
    options = CutOptions(mode="clips", video_field="mp4", clip_frames=4,
                         frames=FrameOptions(fps=2, size=(32, 48)),
                         audio=AudioOptions(dtype="int16"))
    features = {f.name: (f.dtype, f.shape) for f in media_features(options)}
    assert features["frames"] == ("jpeg", (4, 32, 48, 3))
    assert features["audio"] == ("int16", (32000,))  # 4 frames at 2 fps = 2 s

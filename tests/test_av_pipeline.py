"""Audio-visual examples through the tar pipeline, checked against the synthetic sources.

The corpus is made by pipelines.sample_corpus --kind av: 1.5 s H.264 clips in
the speaker's colour, speech-like audio at the speaker's pitch as FLAC (even
samples) or as the video's AAC track (odd samples); sample 0 has its video
truncated to a third.
"""

import io
import json
import tarfile

import numpy as np
import pytest
import soundfile as sf

from pipelines import tar_to_tfrecord
from transforms.format import reader
from transforms.testing import synthetic_media
from transforms.testing.corpus import write_corpus

SECONDS = 1.5
RATE = 16_000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("av")
    write_corpus(str(root), shards=2, samples_per_shard=4, speakers=8, bad_samples=1,
                 kind="av", seconds=SECONDS)
    return root


def _run(corpus, output, *flags):
    return tar_to_tfrecord.run([
        "--input", f"{corpus}/*.tar", "--output", str(output), "--video_field", "mp4",
        "--audio_fields", "flac", "--features", "label=cls:int64,speaker=json.speaker:bytes",
        "--split_by", "json.speaker", "--splits", "train=0.5,test=0.5",
        "--max_failure_fraction", "0.2", *flags])


def _examples(output):
    info = reader.load_info(str(output))
    return [ex for split in info.splits for ex in reader.load(str(output), split, batch_size=None)]


def _key_index(example):
    return int(example["source_key"].numpy().decode().split("_")[1])


def _original_voice(index):
    speaker = index % 8
    return synthetic_media.voice(synthetic_media.speaker_pitch(speaker), SECONDS, seed=index)


def _peak_hz(signal):
    spectrum = np.abs(np.fft.rfft(signal * np.hanning(len(signal))))
    return np.argmax(spectrum) * RATE / len(signal)


def test_single_frame_examples(corpus, tmp_path):
    info = _run(corpus, tmp_path / "frames", "--cut", "frames", "--fps", "2",
                "--frame_size", "60x80", "--av_window_s", "0.5")
    acc = info["accounting"]
    assert acc["samples_read"] == 8 and acc["samples_failed"] == 1 and acc["samples_written"] == 7
    examples = _examples(tmp_path / "frames")
    assert len(examples) == 7 * 3  # frames at 0, 0.5 and 1.0 s of each 1.5 s clip
    for ex in examples:
        index = _key_index(ex)
        speaker = index % 8
        assert ex["label"].numpy() == speaker
        frame = ex["frame"].numpy()
        assert frame.shape == (60, 80, 3) and frame.dtype == np.uint8
        # A corner pixel is the speaker's colour (the moving square is elsewhere).
        np.testing.assert_allclose(frame[2, 2].astype(int),
                                   synthetic_media.speaker_colour(speaker).astype(int), atol=16)
        audio = ex["audio"].numpy()
        assert audio.shape == (8000,)
        start, end = float(ex["start_time"]), float(ex["end_time"])
        assert end - start == pytest.approx(0.5)
        centre = (start + end) / 2
        if index % 2 == 0:  # separate FLAC: exact up to 16-bit quantisation
            original = np.pad(_original_voice(index), 4000)
            first = round(centre * RATE) - 4000 + 4000
            np.testing.assert_allclose(audio, original[first:first + 8000], atol=1.5 / 32768)
        elif 0.3 < centre < 1.2:  # AAC track, away from the padded edges: the voice's pitch
            assert abs(_peak_hz(audio) - synthetic_media.speaker_pitch(speaker)) < 8


def test_dead_letter_for_the_truncated_video_names_key_member_and_stage(corpus, tmp_path):
    output = tmp_path / "frames"
    _run(corpus, output, "--cut", "frames", "--frame_size", "60x80")
    [record] = [json.loads(line) for line in
                (output / "failures" / "failures.jsonl").read_text().splitlines()]
    assert record["key"] == "spk00_00000" and record["member"] == "mp4"
    assert record["stage"] == "decode_video"


def test_audio_windows_are_exact_and_counted(corpus, tmp_path):
    info = _run(corpus, tmp_path / "windows", "--cut", "audio_windows", "--window_s", "0.5",
                "--hop_s", "0.25", "--remainder", "drop", "--no_audio")
    examples = _examples(tmp_path / "windows")
    # Windows starting at 0, 0.25, ..., 1.0 fit in 1.5 s: 5 per sample; the video is
    # not decoded here, so sample 0's truncated mp4 does not matter.
    assert len(examples) == 5 * 8
    for ex in examples:
        index = _key_index(ex)
        start = float(ex["start_time"])
        if index % 2 == 0:
            first = round(start * RATE)
            original = _original_voice(index)[first:first + 8000]
            np.testing.assert_allclose(ex["audio"].numpy(), original,
                                       atol=1.5 / 32768)
    assert info["accounting"]["samples_written"] == 8


def test_int16_audio_and_raw_frames(corpus, tmp_path):
    _run(corpus, tmp_path / "raw", "--cut", "frames", "--frame_size", "30x40",
         "--frame_format", "raw", "--audio_dtype", "int16", "--num_frames", "2")
    examples = _examples(tmp_path / "raw")
    assert len(examples) == 7 * 2
    ex = next(e for e in examples if _key_index(e) % 2 == 0)
    assert ex["audio"].dtype == np.int16 and ex["frame"].shape == (30, 40, 3)
    index, centre = _key_index(ex), float(ex["start_time"] + ex["end_time"]) / 2
    original = np.pad(_original_voice(index), 8000)
    first = round(centre * RATE) - 8000 + 8000
    expected = np.round(np.clip(original[first:first + 16000], -1, 1) * 32767)
    np.testing.assert_allclose(ex["audio"].numpy(), expected, atol=2)


def test_clips(corpus, tmp_path):
    info = _run(corpus, tmp_path / "clips", "--cut", "clips", "--fps", "2", "--clip_frames", "2",
                "--frame_size", "30x40")
    examples = _examples(tmp_path / "clips")
    assert len(examples) == 7  # frames at 0, 0.5 | 1.0 dropped
    for ex in examples:
        assert ex["frames"].shape == (2, 30, 40, 3)
        assert ex["audio"].shape == (16000,)
        assert float(ex["start_time"]) == pytest.approx(0, abs=0.05)
    assert info["accounting"]["samples_written"] == 7


def _tar(path, members):
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_bad_media_become_dead_letters_and_the_totals_add_up(tmp_path):
    voice = _original_voice(2)
    wav = io.BytesIO()
    sf.write(wav, voice, RATE, format="WAV")
    # Made here: one good FLAC and four broken samples, each broken differently.
    _tar(tmp_path / "bad.tar", [
        ("good_1.flac", synthetic_media.flac_bytes(voice, RATE)), ("good_1.cls", b"1"),
        ("empty_2.flac", b""), ("empty_2.cls", b"1"),
        ("wavnamedflac_3.flac", wav.getvalue()), ("wavnamedflac_3.cls", b"1"),
        ("short_4.flac", synthetic_media.flac_bytes(voice[:3000], RATE)), ("short_4.cls", b"1"),
        ("silentvideo_5.mp4", synthetic_media.video_bytes((9, 9, 9), 1.0)),
        ("silentvideo_5.cls", b"1"),
    ])
    info = tar_to_tfrecord.run([
        "--input", str(tmp_path / "bad.tar"), "--output", str(tmp_path / "out"),
        "--cut", "audio_windows", "--audio_fields", "flac", "--video_field", "mp4",
        "--window_s", "0.5", "--remainder", "drop", "--features", "label=cls:int64",
        "--splits", "train=1", "--max_failure_fraction", "1"])
    acc = info["accounting"]
    assert (acc["samples_read"], acc["samples_written"], acc["samples_failed"]) == (5, 1, 4)
    records = {json.loads(line)["key"]: json.loads(line) for line in
               (tmp_path / "out" / "failures" / "failures.jsonl").read_text().splitlines()}
    assert {k: (r["stage"], r["member"]) for k, r in records.items()} == {
        "empty_2": ("decode_audio", "flac"),
        "wavnamedflac_3": ("decode_audio", "flac"),
        "short_4": ("cut", "flac"),
        "silentvideo_5": ("decode_audio", "mp4"),
    }
    assert "WAV" in records["wavnamedflac_3"]["message"]
    assert "no audio" in records["silentvideo_5"]["message"]
    assert "shorter than one" in records["short_4"]["message"]
    assert len(_examples(tmp_path / "out")) == 3  # 1.5 s of good audio in 0.5 s windows


def test_reader_random_crop_takes_a_slice_of_each_window(corpus, tmp_path):
    output = tmp_path / "crop"
    _run(corpus, output, "--cut", "audio_windows", "--window_s", "0.5", "--no_audio")
    full = {(_key_index(e), float(e["start_time"])): e["audio"].numpy() for e in _examples(output)}
    cropped = list(reader.load(str(output), "train", batch_size=4, random_crop={"audio": 1000},
                               seed=7))
    for batch in cropped:
        assert batch["audio"].shape[1] == 1000
        for key, start, crop in zip(batch["source_key"].numpy(), batch["start_time"].numpy(),
                                    batch["audio"].numpy()):
            window = full[(int(key.decode().split("_")[1]), float(start))]
            offsets = [i for i in range(len(window) - 999)
                       if np.array_equal(window[i:i + 1000], crop)]
            assert offsets, "the crop is not a slice of its window"
    with pytest.raises(ValueError, match="random_crop: 'audio' length 9000"):
        reader.load(str(output), "train", random_crop={"audio": 9000})

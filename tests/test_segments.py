"""Segments: examples cut from time-aligned annotations of long recordings.

The recordings are sox concatenations of tones and noise, one "voice" per
speaker turn; the annotations are RTTM written with printf, JSON segments
packed by webdataset's TarWriter, and a NeMo-style JSONL listing written with
echo. Every segment's audio is checked against `sox trim` of the same span,
resampled by sox (a resampler of its own), and the accounting, the dead
letters and the splits by speaker against what the annotations say.
"""

import collections
import json
import subprocess
import sys

import apache_beam as beam
import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf
import tensorflow_datasets as tfds
import webdataset
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from pipelines import bigtable_to_tfrecord, manifest_to_tfrecord, tar_to_bigtable, tar_to_tfrecord
from transforms import BuildExamples, CutOptions, ExampleRecipe, FeatureSpec, make_pipeline
from transforms.checks.stratify import _GroupLabelFn
from transforms.format import reader
from transforms.format.dead_letters import DatasetFailed
from transforms.format.segments import Box, parse_segments
from transforms.media.cutting import cut_sample
from transforms.media.decoded import MediaError
from transforms.media.frames import FrameOptions, crop_box
from transforms.media.video import iter_frames
from transforms.recipe.examples import recipe_samples
from transforms.recipe.segments import SegmentOptions
from transforms.recipe.splits import SplitPlan
from transforms.sources.listing import ReadListingSamples
from transforms.sources.tar import ReadTarSamples, TarReader, plan_tar_units

RATE = 16_000
# m01: 12 s at 48 kHz stereo. Turns: (speaker, start, duration); carol's
# overlaps alice's second turn, dave's has no length, erin's runs past the end.
M01_TURNS = [("alice", 0.0, 3.2), ("bob", 3.2, 2.9), ("alice", 6.1, 2.9), ("carol", 8.5, 1.5),
             ("bob", 10.0, 2.0), ("dave", 5.0, 0.0), ("erin", 11.5, 1.0)]
# m02: 8 s at 16 kHz mono; alice again, so her turns in both recordings share a split.
M02_TURNS = [("alice", 0.5, 2.5), ("frank", 3.0, 4.25)]
GOOD = {"m01": M01_TURNS[:5], "m02": M02_TURNS}


def _run(*command, cwd=None):
    return subprocess.run(command, check=True, cwd=cwd, capture_output=True)


def _recording(path, rate, channels, parts):
    """sox: the concatenation of `parts` (seconds, synth arguments) into `path`."""
    pieces = []
    for i, (seconds, *synth) in enumerate(parts):
        piece = path.parent / f"{path.stem}-part{i}.wav"
        _run("sox", "-n", "-r", str(rate), "-c", str(channels), "-b", "16", str(piece),
             "synth", str(seconds), *synth, "vol", "0.4")
        pieces.append(str(piece))
    _run("sox", *pieces, str(path))
    for piece in pieces:
        (path.parent / piece).unlink()


def _rttm(name, turns):
    lines = [f"SPEAKER {name} 1 {start:.3f} {duration:.3f} <NA> <NA> {speaker} <NA> <NA>"
             for speaker, start, duration in turns]
    return "\n".join([f"SPKR-INFO {name} 1 <NA> <NA> <NA> unknown alice <NA> <NA>",
                      ";; made by hand", *lines]) + "\n"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """meetings.tar (GNU tar): m01.flac + m01.rttm + m01.cls, m02.flac + m02.rttm +
    m02.cls; talks.tar (webdataset's TarWriter): m02's audio with JSON segments;
    list.jsonl (echo): NeMo-style rows naming m01.flac with offset/duration."""
    root = tmp_path_factory.mktemp("segments")
    files = root / "files"
    files.mkdir()
    _recording(files / "m01.flac", 48000, 2, [
        (3.2, "sine", "300"), (2.9, "sine", "700"), (2.4, "sine", "300"),
        (1.5, "pinknoise"), (2.0, "sine", "700")])
    _recording(files / "m02.flac", 16000, 1, [
        (0.5, "whitenoise"), (2.5, "sine", "350"), (5.0, "sine", "1100")])
    for name, turns, label in [("m01", M01_TURNS, 1), ("m02", M02_TURNS, 2)]:
        _run("sh", "-c", f"printf '%s' '{_rttm(name, turns)}' > {name}.rttm", cwd=files)
        _run("sh", "-c", f"echo {label} > {name}.cls", cwd=files)
    _run("tar", "--format=gnu", "-cf", str(root / "meetings.tar"),
         "m01.cls", "m01.flac", "m01.rttm", "m02.cls", "m02.flac", "m02.rttm", cwd=files)
    with webdataset.TarWriter(str(root / "talks.tar"), encoder=False) as sink:
        segments = [{"start": start, "end": start + duration, "speaker": speaker,
                     "text": f"{speaker} says hello"} for speaker, start, duration in M02_TURNS]
        sink.write({"__key__": "t02", "flac": (files / "m02.flac").read_bytes(),
                    "segments.json": json.dumps({"segments": segments}).encode()})
    rows = [json.dumps({"audio_filepath": "files/m01.flac", "offset": start,
                        "duration": duration, "speaker": speaker, "id": f"m01-{i}"})
            for i, (speaker, start, duration) in enumerate(M01_TURNS[:5])]
    _run("sh", "-c", "".join(f"echo '{row}' >> list.jsonl; " for row in rows), cwd=root)
    return root


def _reference(path, start, end):
    """sox's own trim of [start, end) seconds, mixed to mono and resampled to 16 kHz."""
    out = path.parent / f"ref-{start}-{end}.wav"
    _run("sox", str(path), "-r", str(RATE), "-c", "1", "-b", "32", "-e", "floating-point",
         str(out), "trim", f"{start}", f"={end}")
    audio, rate = sf.read(out, dtype="float32")
    out.unlink()
    assert rate == RATE
    return audio


def _correlation(a, b):
    n = min(len(a), len(b))
    return np.corrcoef(a[:n], b[:n])[0, 1]


def _examples(output):
    info = reader.load_info(str(output))
    return [(split, ex) for split in info.splits
            for ex in reader.load(str(output), split, batch_size=None)]


def _tar_job(corpus, output, *flags):
    return tar_to_tfrecord.run([
        "--input", f"{corpus}/meetings.tar", "--output", str(output),
        "--segments_field", "rttm", "--audio_fields", "flac",
        "--features", "speaker=segment.speaker:bytes,label=cls:int64",
        "--split_by", "segment.speaker", "--splits", "train=0.5,test=0.5",
        "--max_failure_fraction", "0.5", "--allow_empty_splits", *flags])


def test_one_example_per_segment_matches_sox_trim(corpus, tmp_path):
    info = _tar_job(corpus, tmp_path / "out", "--cut", "segments")
    segments = info["accounting"]["segments"]
    assert info["accounting"]["samples_read"] == 2 and info["accounting"]["samples_written"] == 2
    assert (segments["recordings"], segments["read"], segments["written"], segments["failed"]) \
        == (2, 9, 7, 2)
    # carol's turn and alice's it overlaps; erin's (past the end) and bob's last
    assert segments["overlapping"] == 4
    examples = _examples(tmp_path / "out")
    assert len(examples) == 7
    # Each segment is a sample of its own, in its speaker's split (it was empty).
    written = collections.Counter(split for split, _ in examples)
    assert info["accounting"]["samples_written_per_split"] == segments["written_per_split"] \
        == dict(written)
    seen = set()
    for _, ex in examples:
        recording = ex["source_key"].numpy().decode()
        start, end = float(ex["start_time"]), float(ex["end_time"])
        speaker = ex["speaker"].numpy().decode()
        assert (speaker, pytest.approx(start, abs=1e-4), pytest.approx(end - start, abs=1e-4)) \
            in [(s, b, d) for s, b, d in GOOD[recording]]
        assert ex["label"].numpy() == {"m01": 1, "m02": 2}[recording]
        audio = ex["audio"].numpy()
        assert abs(len(audio) - round((end - start) * RATE)) <= 1
        reference = _reference(corpus / "files" / f"{recording}.flac", start, end)
        assert abs(len(reference) - len(audio)) <= 2
        assert _correlation(audio, reference) >= 0.99
        seen.add((recording, round(start, 3)))
    assert len(seen) == 7


def test_bad_segments_are_dead_letters_naming_the_recording_and_segment(corpus, tmp_path):
    _tar_job(corpus, tmp_path / "out", "--cut", "segments")
    with open(tmp_path / "out" / "failures" / "failures.jsonl") as f:
        letters = sorted((json.loads(line) for line in f), key=lambda r: r["key"])
    assert [(r["unit"], r["stage"], r["key"], r["member"], r["segment"]["index"])
            for r in letters] == [("segment", "segment", "m01@11500-12500", "flac", 6),
                                  ("segment", "segment", "m01@5000-5000", None, 5)]
    assert "past the end of 'flac' (12.000 s)" in letters[0]["message"]
    assert "its end must come after its start" in letters[1]["message"]
    assert all(r["url"].endswith("meetings.tar") for r in letters)


def test_windows_inside_segments_are_the_recordings_audio(corpus, tmp_path):
    _tar_job(corpus, tmp_path / "out", "--cut", "audio_windows", "--window_s", "1")
    examples = _examples(tmp_path / "out")
    # Each good turn in whole 1 s windows from its start, the last one zero-padded.
    expected = sorted((recording, round(start + k, 3)) for recording, turns in GOOD.items()
                      for _, start, duration in turns for k in range(int(np.ceil(duration))))
    got = sorted((ex["source_key"].numpy().decode(), round(float(ex["start_time"]), 3))
                 for _, ex in examples)
    assert got == expected
    for _, ex in examples:
        recording, speaker = ex["source_key"].numpy().decode(), ex["speaker"].numpy().decode()
        start = float(ex["start_time"])
        turn = next(t for t in GOOD[recording]
                    if t[0] == speaker and t[1] <= start + 1e-6 < t[1] + t[2])
        end = min(start + 1, turn[1] + turn[2])
        audio = ex["audio"].numpy()
        reference = _reference(corpus / "files" / f"{recording}.flac", start, end)
        assert _correlation(audio, reference) >= 0.99
        assert not audio[len(reference) + 2:].any()   # past the segment's end: zeros


def test_a_speakers_segments_share_a_split_across_recordings(corpus, tmp_path):
    info = _tar_job(corpus, tmp_path / "out", "--cut", "audio_windows")
    splits_of = {}
    for split, ex in _examples(tmp_path / "out"):
        splits_of.setdefault(ex["speaker"].numpy().decode(), set()).add(split)
    assert set(splits_of) == {"alice", "bob", "carol", "frank"}
    assert all(len(splits) == 1 for splits in splits_of.values())
    assert not info.get("leaks")


def test_where_on_a_segment_field(corpus, tmp_path):
    info = _tar_job(corpus, tmp_path / "out", "--cut", "segments", "--where",
                    "segment.speaker=alice")
    segments = info["accounting"]["segments"]
    assert (segments["written"], segments["filtered_per_reason"]) == (3, {"where": 6})
    assert {ex["speaker"].numpy() for _, ex in _examples(tmp_path / "out")} == {b"alice"}


def test_json_segments_from_webdatasets_tarwriter(corpus, tmp_path):
    info = tar_to_tfrecord.run([
        "--input", f"{corpus}/talks.tar", "--output", str(tmp_path / "out"),
        "--segments_field", "segments.json", "--audio_fields", "flac", "--cut", "segments",
        "--features", "speaker=segment.speaker:bytes,text=segment.text:string",
        "--split_by", "segment.speaker", "--allow_empty_splits"])
    assert info["accounting"]["segments"]["written"] == 2
    for _, ex in _examples(tmp_path / "out"):
        speaker = ex["speaker"].numpy().decode()
        assert ex["text"].numpy().decode() == f"{speaker} says hello"
        start, end = float(ex["start_time"]), float(ex["end_time"])
        reference = _reference(corpus / "files" / "m02.flac", start, end)
        assert _correlation(ex["audio"].numpy(), reference) >= 0.99


def test_nemo_style_listing_rows_are_segments_of_one_file(corpus, tmp_path):
    info = manifest_to_tfrecord.run([
        "--input", f"{corpus}/list.jsonl", "--output", str(tmp_path / "out"),
        "--media_columns", "audio_filepath", "--audio_fields", "audio_filepath",
        "--key_column", "id",
        "--segment_columns", "offset,duration", "--cut", "audio_windows", "--window_s", "1",
        "--features", "speaker:bytes", "--split_by", "speaker", "--allow_empty_splits"])
    assert info["accounting"]["samples_read"] == 5
    assert info["accounting"]["segments"]["written"] == 5
    # TensorFlow's own reader over the shards: every window of every row.
    files = [str(tmp_path / "out" / shard["file"]) for split in info["splits"].values()
             for shard in split["shards"]]
    starts = []
    for record in tf.data.TFRecordDataset(files):
        example = tf.train.Example.FromString(record.numpy())
        starts.append(round(example.features.feature["start_time"].float_list.value[0], 3))
    assert sorted(starts) == sorted(round(start + k, 3) for _, start, duration in M01_TURNS[:5]
                                    for k in range(int(np.ceil(duration))))


def test_a_nemo_row_whose_segment_is_bad_is_a_failed_sample(corpus, tmp_path):
    """Rows of no length (dave) and past the recording's end (erin) are dead
    letters, and their rows failed samples: the row is the sample."""
    rows = [json.dumps({"audio_filepath": str(corpus / "files" / "m01.flac"), "offset": start,
                        "duration": duration, "speaker": speaker, "id": f"m01-{i}"})
            for i, (speaker, start, duration) in enumerate(M01_TURNS)]
    _run("sh", "-c", "".join(f"echo '{row}' >> all.jsonl; " for row in rows), cwd=tmp_path)
    info = manifest_to_tfrecord.run([
        "--input", f"{tmp_path}/all.jsonl", "--output", str(tmp_path / "out"),
        "--media_columns", "audio_filepath", "--audio_fields", "audio_filepath",
        "--media_root", str(corpus / "files"),
        "--key_column", "id", "--segment_columns", "offset,duration", "--cut", "segments",
        "--features", "speaker:bytes", "--split_by", "speaker", "--allow_empty_splits",
        "--max_failure_fraction", "0.3"])
    accounting = info["accounting"]
    assert (accounting["samples_read"], accounting["samples_written"],
            accounting["samples_failed"]) == (7, 5, 2)
    segments = accounting["segments"]
    assert (segments["read"], segments["written"], segments["failed"],
            segments["recordings_failed"]) == (7, 5, 2, 2)
    with open(tmp_path / "out" / "failures" / "failures.jsonl") as f:
        letters = sorted(json.loads(line)["segment"]["index"] for line in f)
    assert len(letters) == 2
    # 2 failed inputs of 7: over 0.25 it fails, counting each row once.
    with pytest.raises(DatasetFailed, match="2 of 7 inputs failed"):
        manifest_to_tfrecord.run([
            "--input", f"{tmp_path}/all.jsonl", "--output", str(tmp_path / "strict"),
            "--media_columns", "audio_filepath", "--audio_fields", "audio_filepath",
            "--media_root", str(corpus / "files"),
            "--key_column", "id", "--segment_columns", "offset,duration", "--cut", "segments",
            "--features", "speaker:bytes", "--split_by", "speaker", "--allow_empty_splits",
            "--max_failure_fraction", "0.25"])


def test_an_unreadable_annotation_fails_its_recording(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    _run("sox", "-n", "-r", "16000", "-c", "1", str(files / "r1.flac"), "synth", "2", "sine", "440")
    _run("sh", "-c", "printf 'SPEAKER r1 1 zero 1.0 <NA> <NA> ann <NA> <NA>\\n' > r1.rttm",
         cwd=files)
    _run("tar", "-cf", str(tmp_path / "bad.tar"), "r1.flac", "r1.rttm", cwd=files)
    info = tar_to_tfrecord.run([
        "--input", f"{tmp_path}/bad.tar", "--output", str(tmp_path / "out"),
        "--segments_field", "rttm", "--audio_fields", "flac", "--cut", "segments",
        "--features", "none", "--max_failure_fraction", "1", "--allow_empty_splits"])
    assert (info["accounting"]["samples_read"], info["accounting"]["samples_failed"]) == (1, 1)
    with open(tmp_path / "out" / "failures" / "failures.jsonl") as f:
        (letter,) = [json.loads(line) for line in f]
    assert (letter["unit"], letter["stage"], letter["key"], letter["member"]) == \
        ("sample", "segments", "r1", "rttm")
    assert "RTTM line 1: onset is 'zero'" in letter["message"]


@pytest.mark.parametrize("flags, message", [
    (["--cut", "segments"], "--cut segments needs the segments"),
    (["--cut", "none", "--segments_field", "rttm"], "cut inside segments: name the cut"),
    (["--cut", "segments", "--segments_field", "rttm", "--segment_columns", "a,b"],
     "one or the other"),
])
def test_segment_flags_fail_before_any_work(corpus, tmp_path, flags, message):
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", f"{corpus}/meetings.tar",
         "--output", str(tmp_path / "out"), "--audio_fields", "flac", *flags],
        capture_output=True, text=True)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, expected", [
    (";; header\nSPKR-INFO a 1 <NA> <NA> <NA> unknown x <NA> <NA>\n"
     "SPEAKER a 1 1.50 2.25 <NA> <NA> x <NA> <NA>\n",
     [(1.5, 3.75, {"speaker": "x", "channel": "1"})]),
    ('[{"offset": 1, "duration": 2, "text": "hi"}]', [(1.0, 3.0, {"text": "hi"})]),
    ('{"segments": [{"start": 0, "end": 0.5, "speaker": "s"}]}', [(0.0, 0.5, {"speaker": "s"})]),
    ('{"start": 0, "end": 1}\n{"start": 2, "end": 3, "n": 4}\n',
     [(0.0, 1.0, {}), (2.0, 3.0, {"n": 4})]),
    ("start,end,speaker\n0.25,1.5,a\n", [(0.25, 1.5, {"speaker": "a"})]),
    ("", []),
])
def test_annotation_formats(text, expected):
    got = [(s.start, s.end, dict(s.fields)) for s in parse_segments(text.encode())]
    assert got == expected


@pytest.mark.parametrize("text, message", [
    ("SPEAKER a 1 1.5 <NA> <NA> x <NA> <NA>\n", "RTTM line 1 has 9 fields"),
    ('[{"start": 1, "speaker": "x"}]', "segment 0: give its span"),
    ('[{"start": 1, "end": "soon"}]', "segment 0: end is 'soon'"),
    ("start,end\n1,2,3\n", "CSV segments line 2 has a different number of fields"),
    ('[1, 2]', "segment 0 is int, not an object"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_annotation_errors_name_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        parse_segments(text if isinstance(text, bytes) else text.encode())


def test_frames_inside_a_segment(tmp_path):
    video = tmp_path / "v.mp4"
    _run("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25:duration=6",
         "-c:v", "libx264", "-g", "25", "-pix_fmt", "yuv420p", str(video))
    options = FrameOptions(fps=2, size=(48, 64))
    times = [f.time for f in iter_frames(video.read_bytes(), options, name="mp4",
                                         span=(2.2, 4.0))]
    assert times == pytest.approx([2.2, 2.7, 3.2, 3.7], abs=0.021)
    every = [f.time for f in iter_frames(video.read_bytes(), FrameOptions(fps=None), name="mp4",
                                         span=(2.0, 2.2))]
    assert every == pytest.approx([2.0, 2.04, 2.08, 2.12, 2.16], abs=1e-6)


def _counter(result, name):
    found = result.metrics().query(
        MetricsFilter().with_namespace("datagen").with_name(name))["counters"]
    return sum(c.committed for c in found)


def _recipe(mode, segments, audio_field="flac"):
    cut = CutOptions(mode=mode, audio_fields=(audio_field,))
    return ExampleRecipe(spec=FeatureSpec(cut.features), cut=cut, segments=segments)


def test_a_long_recording_is_decoded_once_for_all_its_segments(tmp_path):
    """60 s cut into 30 turns of 2 s: the audio decoded adds up to the recording
    once (audio_ms_decoded), not once a segment."""
    files = tmp_path / "files"
    files.mkdir()
    _recording(files / "long.flac", 44100, 2, [(30, "sine", "500"), (30, "pinknoise")])
    turns = [(f"s{i % 3}", 2.0 * i, 2.0) for i in range(30)]
    _run("sh", "-c", f"printf '%s' '{_rttm('long', turns)}' > long.rttm", cwd=files)
    _run("tar", "-cf", str(tmp_path / "long.tar"), "long.flac", "long.rttm", cwd=files)
    with make_pipeline() as p:
        read = p | ReadTarSamples(str(tmp_path / "long.tar"))
        built = read.samples | BuildExamples(_recipe("audio_windows",
                                                     SegmentOptions(field="rttm")))
        assert_that(built.examples | beam.combiners.Count.Globally(), equal_to([60]))
    result = p.result
    assert _counter(result, "segments_written") == 30
    assert abs(_counter(result, "audio_ms_decoded") - 60_000) <= 30


def test_rows_naming_one_file_read_it_once(corpus):
    with make_pipeline() as p:
        read = p | ReadListingSamples(str(corpus / "list.jsonl"), ["audio_filepath"], "id")
        built = read.samples | BuildExamples(_recipe(
            "segments", SegmentOptions(columns=("offset", "duration")), "audio_filepath"))
        assert_that(built.examples | beam.combiners.Count.Globally(), equal_to([5]))
    result = p.result
    assert _counter(result, "manifest_rows_read") == 5
    assert _counter(result, "media_files_read") == 1
    # The five turns, 12.5 s (carol's overlaps alice's by 0.5 s), each decoded once.
    assert abs(_counter(result, "audio_ms_decoded") - 12_500) <= 5


def test_a_videos_audio_is_sought_to_each_segment(tmp_path):
    """The AAC track of an ffmpeg mp4, a segment late in it: the same audio as
    ffmpeg's own cut of that span, and only about the segment decoded."""
    video = tmp_path / "talk.mp4"
    _run("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25:duration=40",
         "-f", "lavfi", "-i", "anoisesrc=d=40:c=pink:r=44100:a=0.3", "-c:v", "libx264",
         "-c:a", "aac", "-shortest", str(video))
    reference = tmp_path / "ref.wav"
    _run("ffmpeg", "-v", "error", "-i", str(video), "-vn", "-ac", "1", "-ar", str(RATE),
         "-c:a", "pcm_f32le", str(reference))
    whole, _ = sf.read(reference, dtype="float32")
    sample = {"__key__": "talk", "mp4": video.read_bytes(),
              "segments.json": json.dumps([{"start": 31.25, "end": 33.5}]).encode()}
    stats = {}
    recipe = _recipe("segments", SegmentOptions(field="segments.json"), "mp4")
    (segment,) = recipe_samples(sample, recipe)
    (example,) = cut_sample(segment, recipe.cut, stats)
    audio = example["audio"]
    assert example["start_time"] == pytest.approx(31.25) and len(audio) == 36_000
    start = round(31.25 * RATE)
    assert _correlation(audio[100:], whole[start + 100:start + len(audio)]) >= 0.99
    assert stats["audio_ms_decoded"] == 2250


@pytest.fixture(scope="module")
def face_track(tmp_path_factory):
    """faces.tar (GNU tar): talk.mp4, ffmpeg's 4 s of a gray 320x240 picture with
    a red 80x80 "face" moving right 40 px a second and a 440 Hz tone as its
    AAC track, and talk.segments.json: one segment [1, 3.5) s whose track gives
    the face's box at every frame, in pixels."""
    root = tmp_path_factory.mktemp("faces")
    _run("ffmpeg", "-v", "error", "-f", "lavfi", "-i",
         "color=c=gray:s=320x240:r=25:d=4[bg];color=c=red:s=80x80:r=25:d=4[face];"
         "[bg][face]overlay=x='20+t*40':y=60:shortest=1",
         "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=4",
         "-c:v", "libx264", "-pix_fmt", "yuv444p", "-crf", "10", "-c:a", "aac", "-shortest",
         str(root / "talk.mp4"))
    boxes = [{"t": k / 25, "x": 20 + 40 * k / 25, "y": 60, "w": 80, "h": 80} for k in range(100)]
    (root / "talk.segments.json").write_text(json.dumps(
        [{"start": 1.0, "end": 3.5, "speaker": "red", "boxes": boxes}]))
    _run("tar", "-cf", str(root / "faces.tar"), "talk.mp4", "talk.segments.json", cwd=root)
    return root


def _face_job(face_track, output, *flags):
    return tar_to_tfrecord.run([
        "--input", f"{face_track}/faces.tar", "--output", str(output), "--cut", "frames",
        "--segments_field", "segments.json", "--video_field", "mp4", "--boxes_from", "segment",
        "--fps", "2", "--frame_size", "64x64", "--frame_format", "raw", "--av_window_s", "0.5",
        "--features", "speaker=segment.speaker:bytes", "--allow_empty_splits", *flags])


def test_frames_cropped_to_the_face_track_with_their_audio(face_track, tmp_path):
    info = _face_job(face_track, tmp_path / "tight")
    assert info["accounting"]["segments"]["written"] == 1
    examples = [ex for _, ex in _examples(tmp_path / "tight")]
    assert len(examples) == 5            # 1, 1.5, 2, 2.5, 3 s
    for ex in examples:
        frame = ex["frame"].numpy().astype(int)
        # The whole crop is the face: red everywhere (the box follows it), but
        # for the pixel the overlay blends at its edges.
        inside = frame[2:-2, 2:-2]
        assert (inside[..., 0] > 200).all() and (inside[..., 1] < 60).all()
        audio = ex["audio"].numpy()
        assert audio.shape == (8000,)
        spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
        assert abs(np.argmax(spectrum) * RATE / len(audio) - 440) < 4
    _face_job(face_track, tmp_path / "margin", "--box_margin", "0.25")
    for _, ex in _examples(tmp_path / "margin"):
        frame = ex["frame"].numpy().astype(int)
        # A quarter of the box on each side: the face in the middle, gray around it.
        assert frame[32, 32, 0] > 200 and frame[32, 32, 1] < 50
        for corner in (frame[2, 2], frame[2, 61], frame[61, 2], frame[61, 61]):
            assert np.abs(corner - 128).max() < 12


def test_a_segment_without_boxes_is_a_dead_letter_when_frames_are_cropped(face_track,
                                                                         tmp_path):
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "talk.mp4").write_bytes((face_track / "talk.mp4").read_bytes())
    (folder / "talk.segments.json").write_text('[{"start": 0.5, "end": 1.5}]')
    _run("tar", "-cf", str(tmp_path / "nobox.tar"), "talk.mp4", "talk.segments.json",
         cwd=folder)
    info = tar_to_tfrecord.run([
        "--input", f"{tmp_path}/nobox.tar", "--output", str(tmp_path / "out"),
        "--cut", "frames", "--segments_field", "segments.json", "--video_field", "mp4",
        "--boxes_from", "segment", "--frame_size", "64x64", "--features", "none",
        "--max_failure_fraction", "1", "--allow_empty_splits"])
    assert info["accounting"]["segments"]["failed"] == 1
    with open(tmp_path / "out" / "failures" / "failures.jsonl") as f:
        (letter,) = [json.loads(line) for line in f]
    assert (letter["stage"], letter["unit"]) == ("segment", "segment")
    assert "this segment has none" in letter["message"]


def test_box_tracks_read_and_placed():
    (segment,) = parse_segments(json.dumps([{"start": 0, "end": 2, "boxes": [
        {"t": 1.0, "x1": 0.5, "y1": 0.25, "x2": 0.75, "y2": 0.75}, [0.0, 0.0, 0.0, 0.5, 0.5]]}]))
    track = segment.boxes
    assert track.normalised and [b.time for b in track.boxes] == [0.0, 1.0]
    assert track.at(0.5) == track.boxes[0] and track.at(0.51) == track.boxes[1]
    assert track.at(7) == track.boxes[1] and dict(segment.fields) == {}
    # 100x200 frame: the second box, widened by half its size, clipped at the right.
    assert crop_box(track.at(1), True, 100, 200, 0.5) == (0, 75, 100, 175)
    assert crop_box(Box(0, 150, 10, 100, 20), False, 100, 200, 0.0) == (10, 150, 30, 200)
    with pytest.raises(MediaError, match="lies outside the 200x100 frame"):
        crop_box(Box(0, 250, 10, 100, 20), False, 100, 200, 0.0)
    with pytest.raises(ValueError, match="segment 0: box 0"):
        parse_segments(b'[{"start": 0, "end": 1, "boxes": [{"t": 0, "x": 1}]}]')


@pytest.mark.slow  # the Bigtable emulator
def test_segments_from_a_bigtable_cell(corpus, bigtable_emulator, tmp_path):
    """meetings.tar loaded into the emulator, then m01's row given a cell of JSON
    segments with the cbt CLI: its segments cut from the row's FLAC cell; m02's
    row, without the cell, fails as a recording. With 'raw:*' a cell's field is its
    qualifier."""
    table = ["--project", "p", "--instance", "i"]
    tar_to_bigtable.run(["--input", f"{corpus}/meetings.tar", *table, "--table", "meet",
                         "--create_table", "--max_failure_fraction", "0"])
    segments = json.dumps([{"start": start, "duration": duration, "speaker": speaker}
                           for speaker, start, duration in GOOD["m01"]])
    _run("cbt", "-project", "p", "-instance", "i", "set", "meet", "m01",
         f"raw:segments={segments}")
    info = bigtable_to_tfrecord.run([
        *table, "--table", "meet", "--columns", "raw:*", "--output", str(tmp_path / "out"),
        "--segments_field", "segments", "--audio_fields", "flac", "--cut", "segments",
        "--features", "speaker=segment.speaker:bytes", "--split_by", "segment.speaker",
        "--max_failure_fraction", "0.5", "--allow_empty_splits"])
    accounting = info["accounting"]
    assert (accounting["samples_read"], accounting["samples_failed"]) == (2, 1)
    assert accounting["segments"]["written"] == 5
    for _, ex in _examples(tmp_path / "out"):
        start, end = float(ex["start_time"]), float(ex["end_time"])
        reference = _reference(corpus / "files" / "m01.flac", start, end)
        assert _correlation(ex["audio"].numpy(), reference) >= 0.99


def test_stratified_splits_see_each_segments_group_and_label(corpus):
    """The stratification's own pass over the units (StratifySplits) reads each
    segment's group and label, as the converter splits them."""
    cut = CutOptions(mode="segments", audio_fields=("flac",))
    recipe = ExampleRecipe(spec=FeatureSpec(cut.features), cut=cut,
                           segments=SegmentOptions(field="rttm"),
                           split_plan=SplitPlan.from_flags("train=0.5,test=0.5", "segment.index",
                                                           stratify_by="segment.speaker"))
    labels = _GroupLabelFn(recipe, TarReader())
    labels.setup()
    (unit,) = plan_tar_units([str(corpus / "meetings.tar")], 1 << 30)
    pairs = list(labels.process(unit))
    assert pairs == [(str(i), speaker) for i, (speaker, _, _) in enumerate(M01_TURNS)] + [
        (str(i), speaker) for i, (speaker, _, _) in enumerate(M02_TURNS)]


def test_one_example_per_segment_of_a_video_holds_its_faces_and_audio(face_track, tmp_path):
    """--cut segments with a video: the segment's frames (as many as it has, JPEGs,
    cropped to the face) and its audio, read back by our reader and by TFDS."""
    output = tmp_path / "out"
    tar_to_tfrecord.run([
        "--input", f"{face_track}/faces.tar", "--output", str(output), "--cut", "segments",
        "--segments_field", "segments.json", "--video_field", "mp4", "--boxes_from", "segment",
        "--fps", "2", "--frame_size", "64x64", "--features", "speaker=segment.speaker:bytes",
        "--allow_empty_splits"])
    ((_, example),) = _examples(output)
    frames = example["frames"].numpy()
    assert frames.shape == (5, 64, 64, 3)     # 1, 1.5, 2, 2.5 and 3 s of [1, 3.5)
    assert (frames[:, 8:-8, 8:-8, 0] > 180).all() and (frames[:, 8:-8, 8:-8, 1] < 80).all()
    assert len(example["audio"].numpy()) == 2.5 * RATE
    builder = tfds.builder_from_directory(str(output))
    (from_tfds,) = list(builder.as_dataset(split="train"))
    assert from_tfds["frames"].shape == (5, 64, 64, 3)
    np.testing.assert_array_equal(from_tfds["frames"].numpy(), frames)


@pytest.mark.slow  # tf.Transform's analysis
def test_a_vocabulary_of_segment_speakers_from_the_train_split(corpus, tmp_path):
    """tf.Transform's analysis pass cuts the segments as the converter does: the
    vocabulary holds exactly the speakers of the train split's turns."""
    _tar_job(corpus, tmp_path / "plain", "--cut", "segments")
    train = {ex["speaker"].numpy() for split, ex in _examples(tmp_path / "plain")
             if split == "train"}
    _tar_job(corpus, tmp_path / "out", "--cut", "segments", "--vocabulary", "speaker")
    vocabulary = reader.transform_output(str(tmp_path / "out")).vocabulary_by_name("speaker")
    assert train and set(vocabulary) == train


def test_a_dry_run_projects_the_segments(corpus, tmp_path, capsys):
    """Two recordings read whole: the projection is the real run's count."""
    projected = _tar_job(corpus, tmp_path / "out", "--cut", "audio_windows",
                         "--dry_run_samples", "2")
    assert "dry run: the recipe ran on 2 samples here" in capsys.readouterr().out
    real = _tar_job(corpus, tmp_path / "real", "--cut", "audio_windows")
    assert sum(projected.examples.values()) == sum(
        s["num_examples"] for s in real["splits"].values()) == 22


def test_clips_inside_a_segment(face_track):
    """Clips of 2 frames at 2 fps inside [1, 3.5): from 1 s and 2 s; the frame at
    3 s has no partner in the segment and is dropped, counted."""
    sample = {"__key__": "talk", "mp4": (face_track / "talk.mp4").read_bytes(),
              "segments.json": (face_track / "talk.segments.json").read_bytes()}
    cut = CutOptions(mode="clips", video_field="mp4", clip_frames=2,
                     frames=FrameOptions(fps=2, size=(32, 32), image_format="raw"))
    recipe = ExampleRecipe(spec=FeatureSpec(cut.features), cut=cut,
                           segments=SegmentOptions(field="segments.json"))
    (segment,) = recipe_samples(sample, recipe)
    stats = {}
    clips = list(cut_sample(segment, cut, stats))
    assert [c["start_time"] for c in clips] == pytest.approx([1.0, 2.0], abs=0.021)
    assert all(c["frames"].shape == (2, 32, 32, 3) and c["audio"].shape == (RATE,)
               for c in clips)
    assert stats["clip_frames_dropped"] == 1

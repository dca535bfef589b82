"""Kaldi data directories in: wav.scp, segments, text and utt2spk written by hand
(printf), the recordings spliced by sox from espeak-ng's speech.

Each utterance becomes an example holding exactly its stretch of its
recording; what Kaldi would run instead of reading (a command in wav.scp),
a segment of a recording wav.scp does not list, an utterance with no
transcript, are refused or dead letters naming them.
"""

import json
import subprocess

import numpy as np
import pytest
import soundfile

import transforms as dg
from pipelines import manifest_to_tfrecord
from transforms.testing.spoken import sentences, speak

FLAGS = ["--cut", "utterances", "--audio_fields", "audio", "--features",
         "text:string,speaker:string", "--text_field", "text", "--split_by", "__key__",
         "--splits", "train=0.5,test=0.5", "--allow_empty_splits",
         "--max_failure_fraction", "0.5"]


def _shell(command: str, cwd) -> None:
    subprocess.run(command, shell=True, check=True, cwd=cwd, capture_output=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """wav/r0.wav and r1.wav, two sentences each (sox); data/train lists them
    (r0 by its absolute path, r1 relative to the data directory) and cuts
    six utterances, three of them bad: one of recording r9 (not in wav.scp),
    one with no line in text, one ending at -1."""
    root = tmp_path_factory.mktemp("kaldi")
    (root / "wav").mkdir()
    for i, text in enumerate(sentences(4)):
        speak(text, str(root / "wav" / f"s{i}.flac"), voice=i)
    _shell("sox s0.flac s1.flac r0.wav && sox s2.flac s3.flac r1.wav", root / "wav")
    data = root / "data" / "train"
    data.mkdir(parents=True)
    _shell(f"printf 'r0 {root}/wav/r0.wav\\nr1 ../../wav/r1.wav\\n' > wav.scp;"
           " printf 'r0-a r0 0.00 1.25\\nr0-b r0 1.25 2.50\\nr1-a r1 0.40 1.60\\n"
           "r1-b r1 1.60 2.75\\nr9-a r9 0.00 1.00\\nr1-c r1 0.10 0.90\\nr0-c r0 2.5 -1\\n'"
           " > segments;"
           " printf 'r0-a THE BIRCH CANOE\\nr0-b GLUE THE SHEET\\nr1-a IT IS EASY\\n"
           "r1-b THESE DAYS\\nr9-a NOWHERE\\nr0-c TO THE END\\n' > text;"
           " printf 'r0-a spkA\\nr0-b spkA\\nr1-a spkB\\nr1-b spkB\\nr9-a spkC\\n"
           "r1-c spkB\\nr0-c spkA\\n' > utt2spk", data)
    return root


def test_each_utterance_is_its_stretch_of_its_recording(corpus, tmp_path):
    output = tmp_path / "ds"
    manifest_to_tfrecord.run(["--input", f"{corpus}/data/*/wav.scp", "--output", str(output),
                              "--segment_columns", "start,end", "--media_root",
                              str(corpus / "wav"), *FLAGS])
    info = dg.load_info(output)
    assert info.document["source"]["format"] == "kaldi"
    written = {}
    for split in ("train", "test"):
        for example in dg.load(output, split, batch_size=None):
            written[example["source_key"].numpy().decode()] = example
    assert sorted(written) == ["r0-a", "r0-b", "r1-a", "r1-b"]
    spans = {"r0-a": ("r0", 0.0, 1.25, "THE BIRCH CANOE", "spkA"),
             "r0-b": ("r0", 1.25, 2.5, "GLUE THE SHEET", "spkA"),
             "r1-a": ("r1", 0.4, 1.6, "IT IS EASY", "spkB"),
             "r1-b": ("r1", 1.6, 2.75, "THESE DAYS", "spkB")}
    for utterance, (recording, start, end, text, speaker) in spans.items():
        audio, rate = soundfile.read(corpus / "wav" / f"{recording}.wav", dtype="float32")
        example = written[utterance]
        np.testing.assert_allclose(example["audio"].numpy(),
                                   audio[round(start * rate):round(end * rate)], atol=1e-4)
        assert example["text"].numpy().decode() == text
        assert example["speaker"].numpy().decode() == speaker
    with open(output / "failures" / "failures.jsonl") as f:
        letters = {letter["key"]: letter["message"] for letter in map(json.loads, f)}
    assert letters == {
        "r9-a": "segments: utterance 'r9-a' names recording 'r9', which wav.scp does not have",
        "r1-c": "utterance 'r1-c' has no line in text",
        "r0-c": "segments: utterance 'r0-c' ends at -1 (to the recording's end), which is not "
                "read: give its end"}


def test_segments_without_segment_columns_are_refused_on_every_way_in(corpus, tmp_path):
    """The command line takes the columns the directory implies (start,end)
    when given none; other ones, and none from Python, are refused."""
    with pytest.raises(ValueError, match="^--segment_columns must be start,end for a Kaldi "
                                         "data directory with a segments file"):
        manifest_to_tfrecord.run(["--input", f"{corpus}/data/train/wav.scp", "--output",
                                  str(tmp_path / "cli"), "--media_root", str(corpus),
                                  "--segment_columns", "start,channel", *FLAGS])
    read = dg.ReadListingSamples(f"{corpus}/data/train/wav.scp", [], media_root=corpus)
    with pytest.raises(dg.ArgumentError, match="^segments.columns must be start,end"):
        dg.WriteDataset(str(tmp_path / "api"), read.source, features="text:string")
    assert not (tmp_path / "cli").exists() and not (tmp_path / "api").exists()


def test_a_command_in_wav_scp_is_refused_first_and_a_dead_letter_later(corpus, tmp_path):
    first, later = tmp_path / "first", tmp_path / "later"
    first.mkdir()
    later.mkdir()
    _shell("printf 'r0 sox r0.flac -t wav - |\\n' > wav.scp", first)
    with pytest.raises(ValueError, match="wav.scp entry of recording 'r0' is a command, not a "
                                         "file: 'sox r0.flac -t wav - |'; convert the audio"):
        manifest_to_tfrecord.run(["--input", str(first / "wav.scp"), "--output",
                                  str(tmp_path / "out1"), *FLAGS[:4], "--features", "none"])
    _shell(f"printf 'r0 {corpus}/wav/r0.wav\\nr1 flac -dc r1.flac |\\n' > wav.scp", later)
    info = manifest_to_tfrecord.run(["--input", str(later / "wav.scp"), "--output",
                                     str(tmp_path / "out2"), "--media_root", str(corpus),
                                     "--cut", "utterances",
                                     "--audio_fields", "audio", "--features", "none",
                                     "--splits", "train=1", "--max_failure_fraction", "0.5"])
    assert info["accounting"]["samples_failed"] == 1
    with open(tmp_path / "out2" / "failures" / "failures.jsonl") as f:
        (letter,) = map(json.loads, f)
    assert letter["stage"] == "read_manifest"
    assert "recording 'r1' is a command" in letter["message"]


def test_an_id_on_two_lines_and_a_transcript_not_utf8_fail_their_utterances_alone(
        corpus, tmp_path):
    """printf'd files: `dup` twice in segments, `twice` twice in text, `spk2`
    twice in utt2spk, recording r2 twice in wav.scp, `latin` a transcript in
    Latin-1. Each is a dead letter naming the file and its lines (or stage
    `transcript`); the other utterances are written (two of one text went
    out with the second before)."""
    data = tmp_path / "data"
    data.mkdir()
    _shell(f"printf 'r0 {corpus}/wav/r0.wav\\nr2 {corpus}/wav/r1.wav\\nr2 {corpus}/wav/r0.wav\\n'"
           " > wav.scp;"
           " printf 'ok r0 0.00 1.25\\ndup r0 1.25 2.00\\ndup r0 2.00 2.50\\ntwice r0 0.2 1.0\\n"
           "spk2 r0 0.3 1.0\\nr2-a r2 0.0 1.0\\nlatin r0 0.5 1.5\\n' > segments;"
           " printf 'ok THE BIRCH CANOE\\ndup ONE\\ntwice FIRST\\ntwice SECOND\\nspk2 X\\n"
           "r2-a Y\\nlatin caf\\351\\n' > text;"
           " printf 'ok a\\ndup a\\ntwice a\\nspk2 a\\nspk2 b\\nr2-a a\\nlatin a\\n' > utt2spk",
           data)
    info = manifest_to_tfrecord.run(["--input", str(data / "wav.scp"), "--output",
                                     str(tmp_path / "ds"), "--segment_columns", "start,end",
                                     "--media_root", str(corpus), *FLAGS,
                                     "--max_failure_fraction", "0.9"])
    written = [example["source_key"].numpy().decode() for split in ("train", "test")
               for example in dg.load(tmp_path / "ds", split, batch_size=None)]
    assert written == ["ok"]
    with open(tmp_path / "ds" / "failures" / "failures.jsonl") as f:
        letters = sorted((d["key"], d["stage"], d["message"]) for d in map(json.loads, f))
    lines = "which line holds it is unknown; give each id one line"
    assert letters == [
        ("dup", "duplicate_key", f"utterance 'dup' is on lines 2 and 3 of segments: {lines}"),
        ("dup", "duplicate_key", f"utterance 'dup' is on lines 2 and 3 of segments: {lines}"),
        ("latin@500-1500", "transcript", letters[2][2]),   # a segment of its recording
        ("r2-a", "duplicate_key", f"recording 'r2' is on lines 2 and 3 of wav.scp: {lines}"),
        ("spk2", "duplicate_key", f"utterance 'spk2' is on lines 4 and 5 of utt2spk: {lines}"),
        ("twice", "duplicate_key", f"utterance 'twice' is on lines 3 and 4 of text: {lines}")]
    assert "not UTF-8" in letters[2][2]
    assert info["accounting"]["samples_failed"] == 6

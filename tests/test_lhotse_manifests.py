"""Lhotse manifests in: written by Lhotse itself (tests/fixtures/lhotse/make_manifests.py:
its LibriSpeech recipe, and its classes for a meeting), the audio made again by sox.

Each supervision becomes an example holding exactly its stretch of its
recording's file for its channel (one file of several, or one channel of a
stereo file), with its text, speaker and labels; what cannot be read as
Lhotse means it (a command source, an unknown recording, a segment past its
recording's end, a speed perturbation Lhotse would apply as it loads the
audio) is a dead letter naming the supervision.
"""

import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import soundfile
from apache_beam.metrics.metric import MetricsFilter

import transforms as dg
from pipelines import manifest_to_tfrecord

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "lhotse"
sys.path.insert(0, str(FIXTURES))
from audio import UTTERANCES, make_audio, utterance_path  # noqa: E402

FLAGS = ["--segment_columns", "start,end", "--cut", "utterances", "--audio_fields", "audio",
         "--splits", "train=1"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The manifests, and beside them the audio they describe."""
    root = tmp_path_factory.mktemp("lhotse")
    for manifest in FIXTURES.glob("*.jsonl.gz"):
        shutil.copy(manifest, root)
    make_audio(str(root))
    return root


def _examples(output) -> dict:
    return {e["source_key"].numpy().decode(): e for e in dg.load(output, "train", batch_size=None)}


def test_a_librispeech_recipes_supervisions_are_its_utterances(corpus, tmp_path):
    output = tmp_path / "ds"
    manifest_to_tfrecord.run(["--input", f"{corpus}/librispeech_recordings_*.jsonl.gz",
                              "--output", str(output), *FLAGS,
                              "--features", "text:string,speaker:string,language:string"])
    info = dg.load_info(output)
    assert info.document["source"]["format"] == "lhotse"
    examples = _examples(output)
    assert len(examples) == len(UTTERANCES)
    for speaker, chapter, utterance, seconds, _, text in UTTERANCES:
        example = examples[f"{speaker}-{chapter}-{utterance}"]
        audio, _ = soundfile.read(corpus / utterance_path(speaker, chapter, utterance),
                                  dtype="float32")
        assert len(audio) == seconds * 16000
        np.testing.assert_allclose(example["audio"].numpy(), audio, atol=1e-4)
        assert (example["text"].numpy().decode(), example["speaker"].numpy().decode(),
                example["language"].numpy().decode()) == (text, speaker, "English")


def test_each_supervision_is_its_channels_stretch_or_a_dead_letter(corpus, tmp_path):
    output = tmp_path / "meeting"
    read = dg.ReadLhotseSamples(f"{corpus}/meeting_recordings_test.jsonl.gz")
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(
            str(output), read.source, splits="train=1", max_failure_fraction=0.8,
            features="text:string",
            cut=dg.CutOptions(mode="utterances", audio_fields=("audio",)),
            segments=dg.SegmentOptions(columns=("start", "end")))
    examples = _examples(output)
    assert sorted(examples) == ["m-0", "m-1", "s-both", "s-left"]
    meeting = corpus / "meeting"
    headsets = [soundfile.read(meeting / f"headset{c}.flac", dtype="float32")[0] for c in (0, 1)]
    np.testing.assert_allclose(examples["m-0"]["audio"].numpy(), headsets[0][8000:32000],
                               atol=1e-4)
    np.testing.assert_allclose(examples["m-1"]["audio"].numpy(), headsets[1][32000:52000],
                               atol=1e-4)
    stereo, _ = soundfile.read(meeting / "stereo.flac", dtype="float32")
    np.testing.assert_allclose(examples["s-both"]["audio"].numpy(),
                               stereo[:32000].mean(axis=1), atol=1e-4)
    # On channel 0 of the stereo file: that channel alone, not the mix.
    np.testing.assert_allclose(examples["s-left"]["audio"].numpy(), stereo[16000:32000, 0],
                               atol=1e-4)
    assert {key: examples[key]["text"].numpy().decode() for key in examples} == {
        "m-0": "first speaker", "m-1": "second speaker", "s-both": "both at once",
        "s-left": "one of two"}
    samples = {sample["__key__"]: sample for sample in read.first_samples()}
    assert (samples["m-0"]["speaker"], samples["m-0"]["gender"]) == (b"A", b"F")
    assert json.loads(samples["m-1"]["custom"]) == {"emotion": "calm"}
    assert (samples["m-1"]["recording"], samples["m-1"]["channel"]) == (b"meeting", 1)
    with open(output / "failures" / "failures.jsonl") as f:
        letters = {letter["key"]: letter["message"] for letter in map(json.loads, f)}
    assert sorted(letters) == ["o-0", "p-0", "sp-0", "x-0"]
    assert "has transforms (Speed) Lhotse applies as it loads the audio" in letters["sp-0"]
    assert "a 'command' source is not read" in letters["p-0"]
    assert "names recording 'absent', which meeting_recordings_test.jsonl.gz does not" in (
        letters["x-0"])
    assert "spans 3.5-4.5 s, outside its recording 'meeting' of 4 s" in letters["o-0"]


def test_a_cutsets_cuts_are_the_same_utterances(corpus, tmp_path):
    """Lhotse's CutSet.from_manifests of the recipe's manifests: each cut
    holds its recording and supervision, and reads as they do."""
    by_supervisions, by_cuts = tmp_path / "supervisions", tmp_path / "cuts"
    flags = [*FLAGS, "--features", "text:string,speaker:string"]
    for output, manifest in ((by_supervisions, "recordings"), (by_cuts, "cuts")):
        manifest_to_tfrecord.run(["--input", f"{corpus}/librispeech_{manifest}_*.jsonl.gz",
                                  "--output", str(output), *flags])
    cuts, supervisions = _examples(by_cuts), _examples(by_supervisions)
    assert sorted(cuts) == [f"{s}-{c}-{u}-{i}" for i, (s, c, u, *_) in sorted(
        enumerate(UTTERANCES), key=lambda e: f"{e[1][0]}-{e[1][1]}-{e[1][2]}-{e[0]}")]
    for key, example in cuts.items():
        twin = supervisions[key.rsplit("-", 1)[0]]
        for name in ("audio", "text", "speaker"):
            np.testing.assert_array_equal(example[name].numpy(), twin[name].numpy())
    supervisions = f"{corpus}/librispeech_supervisions_dev-clean.jsonl.gz"
    with pytest.raises(ValueError, match="is a Lhotse supervisions manifest: give its "
                                         "recordings manifest \\(.*/librispeech_recordings_"
                                         "dev-clean.jsonl.gz or .*dev-clean.jsonl\\)"):
        dg.ReadLhotseSamples(supervisions)
    with pytest.raises(ValueError, match="is a Lhotse supervisions manifest"):
        manifest_to_tfrecord.run(["--input", supervisions, "--output", str(tmp_path / "x"),
                                  *FLAGS])
    (tmp_path / "rows.jsonl").write_text('{"audio": "a.flac"}\n')
    with pytest.raises(ValueError, match="is not a Lhotse recordings manifest or CutSet"):
        dg.ReadLhotseSamples(str(tmp_path / "rows.jsonl"))


def test_supervisions_imply_their_segment_columns_and_refuse_others(corpus, tmp_path, caplog):
    """The manifests imply --segment_columns start,end and --audio_fields audio
    (a line says so); other segment columns would misread them: refused."""
    with caplog.at_level("INFO"):
        info = manifest_to_tfrecord.run([
            "--input", f"{corpus}/librispeech_recordings_*.jsonl.gz", "--output",
            str(tmp_path / "implied"), "--cut", "utterances", "--splits", "train=1"])
    assert info["recipe"]["segments"]["columns"] == ["start", "end"]
    assert "--segment_columns start,end, as the input's metadata declares" in caplog.text
    with pytest.raises(ValueError, match="^--segment_columns must be start,end for Lhotse "
                                         "supervisions"):
        manifest_to_tfrecord.run(["--input", f"{corpus}/librispeech_recordings_*.jsonl.gz",
                                  "--output", str(tmp_path / "ds"), "--segment_columns",
                                  "start,channel", *FLAGS[2:]])
    assert not (tmp_path / "ds").exists()


def test_a_recordings_manifest_that_does_not_read_is_one_dead_letter(corpus, tmp_path):
    """A recordings manifest whose second line is no JSON (its supervisions
    beside it): the set is one file dead letter, planned (the units sized by
    its rows) and read without a crash, and the other set's utterances are
    written."""
    bad = tmp_path / "bad"
    bad.mkdir()
    first = ('{"id": "r", "sampling_rate": 16000, "num_samples": 16000, "duration": 1, '
             '"sources": [{"type": "file", "channels": [0], "source": "r.flac"}]}')
    (bad / "x_recordings_a.jsonl").write_text(first + '\n{"id": "q", "sources": [\n')
    (bad / "x_supervisions_a.jsonl").write_text(
        '{"id": "s", "recording_id": "r", "start": 0, "duration": 1}\n')
    read = dg.ReadLhotseSamples(str(bad / "x_recordings_a.jsonl"))
    assert [u.inputs[1:] for u in read.source.plan()] == [
        (0, (bad / "x_supervisions_a.jsonl").stat().st_size)]
    output = tmp_path / "ds"
    info = manifest_to_tfrecord.run([
        "--input", f"{bad}/x_recordings_a.jsonl,{corpus}/librispeech_recordings_dev-clean.jsonl.gz",
        "--output", str(output), *FLAGS, "--features", "text:string",
        "--max_failure_fraction", "0.5"])
    assert info["accounting"]["files_failed"] == 1
    assert len(_examples(output)) == len(UTTERANCES)
    with open(output / "failures" / "failures.jsonl") as f:
        (letter,) = map(json.loads, f)
    assert letter["url"].endswith("x_recordings_a.jsonl") and "not JSON" in letter["message"]


def _one_recording(folder, supervisions: list, last_line: bytes = b"") -> np.ndarray:
    """A 1 s recording r.flac and its manifests beside it (the supervisions'
    then `last_line`), gzipped by GNU gzip."""
    audio = (0.5 * np.sin(np.arange(16000) / 7)).astype("float32")
    soundfile.write(folder / "r.flac", audio, 16000)
    recording = {"id": "r", "sampling_rate": 16000, "num_samples": 16000, "duration": 1.0,
                 "sources": [{"type": "file", "channels": [0], "source": "r.flac"}]}
    (folder / "t_recordings_a.jsonl").write_text(json.dumps(recording) + "\n")
    (folder / "t_supervisions_a.jsonl").write_bytes(
        "".join(json.dumps({"recording_id": "r", "channel": 0, **s}) + "\n"
                for s in supervisions).encode() + last_line)
    subprocess.run(["gzip", str(folder / "t_recordings_a.jsonl"),
                    str(folder / "t_supervisions_a.jsonl")], check=True)
    return audio


def test_a_supervision_within_lhotses_tolerance_is_cut_at_its_recordings_end(tmp_path):
    """Lhotse loads a supervision ending up to 25 ms past its recording: cut
    there and counted (segments_clamped); 30 ms past is a dead letter."""
    audio = _one_recording(tmp_path, [{"id": "in", "start": 0.5, "duration": 0.52},
                                      {"id": "out", "start": 0.5, "duration": 0.53}])
    output = tmp_path / "ds"
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(
            str(output), dg.ReadLhotseSamples(f"{tmp_path}/t_recordings_a.jsonl.gz").source,
            splits="train=1", max_failure_fraction=0.5, features="recording:string",
            cut=dg.CutOptions(mode="utterances", audio_fields=("audio",)),
            segments=dg.SegmentOptions(columns=("start", "end")))
    (example,) = _examples(output).values()
    np.testing.assert_allclose(example["audio"].numpy(), audio[8000:], atol=1e-4)
    clamped = p.result.metrics().query(MetricsFilter().with_namespace("datagen").with_name(
        "segments_clamped"))["counters"]
    assert sum(c.committed for c in clamped) == 1
    with open(output / "failures" / "failures.jsonl") as f:
        (letter,) = map(json.loads, f)
    assert letter["key"] == "out" and "outside its recording 'r' of 1 s" in letter["message"]


def test_gzip_supervisions_are_cut_into_units_each_row_read_once(tmp_path):
    """A gzipped recordings manifest's units are ranges of its supervisions'
    text (the file its rows are in): a row each, read once; a supervision
    line that is not UTF-8 is a dead letter naming its line."""
    rows = [{"id": f"s{i:03d}-" + "x" * 100, "start": i / 100, "duration": 0.01}
            for i in range(60)]
    _one_recording(tmp_path, rows, last_line=b'{"id": "bad\xff"}\n')
    read = dg.ReadLhotseSamples(f"{tmp_path}/t_recordings_a.jsonl.gz", target_bytes=1500)
    units = read.source.plan()
    assert len(units) > 4
    reader = read.source.reader
    reader.setup(counting=False)
    read_rows = [sample for unit in units for sample in reader.read(unit)]
    letters = [s.record for s in read_rows if isinstance(s, dg.Failed)]
    assert sorted(s["__key__"] for s in read_rows if not isinstance(s, dg.Failed)) == [
        r["id"] for r in rows]
    assert [(letter["member"], letter["stage"]) for letter in letters] == [
        ("line 61", "read_manifest")]


def test_a_recordings_manifest_alone_is_read_whole_or_refused_naming_the_supervisions(
        corpus, tmp_path):
    """A recordings manifest with no supervisions beside it is its recordings
    whole; asked for a supervision's fields, the job is refused naming the
    supervisions manifest it looked for."""
    shutil.copy(corpus / "librispeech_recordings_dev-clean.jsonl.gz", tmp_path)
    with pytest.raises(ValueError, match="has no Lhotse supervisions manifest beside it "
                                         "\\(looked for .*supervisions_dev-clean.jsonl.gz and"):
        manifest_to_tfrecord.run([
            "--input", f"{tmp_path}/librispeech_recordings_dev-clean.jsonl.gz",
            "--output", str(tmp_path / "ds"), *FLAGS, "--features", "text:string"])
    assert not (tmp_path / "ds").exists()

"""The jobs' promises kept through the Python API (issue #36): dead letters of the
steps before the writer counted, shapes checked, repeated keys refused, empty
input refused, arguments refused in Python's terms, nested rows read.

Corpora: speech-like FLAC made with soundfile, packed by GNU tar and cut short
with `head -c` (a truncated shard); a Parquet file in Hugging Face `datasets`'
audio layout ({"bytes", "path"} structs) written by pyarrow.
"""

import json
import logging
import os
import pathlib
import re
import subprocess

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import transforms as dg
from transforms.format.dead_letters import DatasetFailed
from transforms.testing.synthetic_media import flac_bytes, voice


def _manifest(output) -> dict:
    return json.loads((pathlib.Path(output) / "manifest.json").read_text())


def _dead_letters(output) -> list:
    path = pathlib.Path(output) / "failures" / "failures.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def speech_tars(tmp_path_factory):
    """Two GNU tar shards of 3 s utterances (a .flac and a .cls each), 4 a shard;
    the second cut in half by `head -c`: its third and fourth samples are lost."""
    root = tmp_path_factory.mktemp("speech")
    for shard in range(2):
        folder = root / f"shard{shard}"
        folder.mkdir()
        names = []
        for i in range(4):
            key = f"spk{shard}_{i}"
            (folder / f"{key}.flac").write_bytes(flac_bytes(voice(180 + 20 * i, 3.0), 16000))
            subprocess.run(f"printf '{i % 2}' > {key}.cls", shell=True, cwd=folder, check=True)
            names += [f"{key}.flac", f"{key}.cls"]
        subprocess.run(["tar", "--format=gnu", "-cf", str(root / f"shard{shard}.tar"), *names],
                       cwd=folder, check=True)
    whole = root / "shard1.tar"
    size = whole.stat().st_size
    subprocess.run(f"head -c {size // 2} {whole} > {root / 'cut.tar'} && mv {root / 'cut.tar'} "
                   f"{whole}", shell=True, check=True)
    return root


WINDOWS = dg.CutOptions(mode="audio_windows", audio_fields=("flac",))


class _Loudness(beam.DoFn):
    """A step of the user's between cutting and writing."""

    def process(self, window):
        yield {**window, "rms": float(np.sqrt(np.mean(window["audio"] ** 2)))}


def test_read_cut_a_step_write_counts_every_failure_and_every_sample(speech_tars, tmp_path):
    output = tmp_path / "windows"
    with dg.make_pipeline() as p:
        read = p | dg.ReadTarSamples(str(speech_tars / "*.tar"))
        cut = read.samples | dg.CutSamples(WINDOWS)
        (cut.examples
         | beam.ParDo(_Loudness())
         | dg.WriteDataset(output, features="label=cls:int64,rms:float", cut_by=WINDOWS,
                           splits={"train": 1.0}, failures=(read, cut.failures),
                           max_failure_fraction=0.5))
    info = _manifest(output)
    accounting = info["accounting"]
    letters = _dead_letters(output)
    # 4 + 2 samples whole, the shard's third cut mid-member: a dead letter naming it.
    assert [(r["stage"], r["key"], r["member"]) for r in letters] == [
        ("read_tar", "spk1_2", "spk1_2.flac")]
    assert (accounting["samples_read"], accounting["samples_written"],
            accounting["samples_failed"]) == (7, 6, 1)
    assert accounting["cut_examples"]["read"] == accounting["cut_examples"]["written"] == 18
    assert sum(accounting["examples_per_split"].values()) == 18
    audio = next(f for f in info["features"] if f["name"] == "audio")
    assert (audio["shape"], audio["sample_rate"]) == ([16000], 16000)
    # A recording's windows share its split: the default group is its source_key.
    windows = [ex for split in info["splits"]
               for ex in dg.load(str(output), split, batch_size=None).as_numpy_iterator()]
    assert len(windows) == 18 and all(ex["audio"].shape == (16000,) for ex in windows)
    assert dg.verify_dataset(output).ok
    # TFDS sees the cut's audio, with its rate, without the spec restating it.
    builder = tfds.builder_from_directory(str(output))
    assert isinstance(builder.info.features["audio"], tfds.features.Audio)
    assert builder.info.features["audio"].sample_rate == 16000
    assert builder.info.splits["train"].num_examples == 18


def test_a_result_piped_in_brings_its_failures(speech_tars, tmp_path):
    output = tmp_path / "whole"
    with dg.make_pipeline() as p:
        _ = (p | dg.ReadTarSamples(str(speech_tars / "*.tar"))
             | dg.WriteDataset(output, features="flac:bytes,label=cls:int64",
                               max_failure_fraction=0.5, splits="train=1"))
    accounting = _manifest(output)["accounting"]
    assert (accounting["samples_read"], accounting["samples_failed"]) == (7, 1)


def test_failures_given_twice_are_counted_once(speech_tars, tmp_path):
    """A result piped in and its failures given too: 7 samples read, not 8."""
    output = tmp_path / "twice"
    with dg.make_pipeline() as p:
        read = p | dg.ReadTarSamples(str(speech_tars / "*.tar"))
        _ = read | dg.WriteDataset(output, features="flac:bytes,label=cls:int64",
                                   max_failure_fraction=0.5, splits="train=1",
                                   failures=[read.failures, read])
    accounting = _manifest(output)["accounting"]
    assert (accounting["samples_read"], accounting["samples_failed"]) == (7, 1)
    assert len(_dead_letters(output)) == 1


def test_failures_of_a_library_step_not_given_are_refused_before_work(speech_tars, tmp_path):
    """The reader's and the cut's dead letters: leaving out either is refused at
    construction, naming the step; given through a step of the user's they
    count; `unwired_failures='drop'` writes without them and says so."""
    def write(failures, **keywords):
        with dg.make_pipeline() as p:
            read = p | "Read" >> dg.ReadTarSamples(str(speech_tars / "*.tar"))
            cut = read.samples | "Cut" >> dg.CutSamples(WINDOWS)
            (cut.examples
             | dg.WriteDataset(tmp_path / str(len(list(tmp_path.iterdir()))),
                               features="label=cls:int64", cut_by=WINDOWS, splits="train=1",
                               max_failure_fraction=0.5, failures=failures(read, cut),
                               **keywords))
        return _manifest(tmp_path / str(len(list(tmp_path.iterdir())) - 1))

    for failures, missing in ((lambda read, cut: None, "'Read' (ReadTarSamples), 'Cut' "
                                                       "(CutSamples)"),
                              (lambda read, cut: read.failures, "'Cut' (CutSamples)"),
                              (lambda read, cut: [cut], "'Read' (ReadTarSamples)")):
        with pytest.raises(dg.ArgumentError, match=re.escape(
                f"failures misses the dead letters of {missing}, before this WriteDataset")):
            write(failures)
    assert not list(tmp_path.iterdir())
    # Through a step of the user's (here, one that notes where they came from).
    info = write(lambda read, cut: [read.failures | beam.Map(lambda r: {**r, "seen": 1}),
                                    cut])
    assert (info["accounting"]["samples_read"], info["accounting"]["samples_failed"]) == (7, 1)
    dropped = write(lambda read, cut: cut, unwired_failures="drop")
    assert dropped["source"]["failures_dropped_from"] == ["Read"]
    assert any("the dead letters of Read were not given" in w for w in dropped["warnings"])


def test_examples_a_users_step_drops_are_counted_and_a_sample_left_with_none_filtered(
        speech_tars, tmp_path):
    """Windows of one recording dropped by a Filter of the user's, then every
    window: read = written + filtered + failed in samples and in windows, the
    failure fraction over the samples read (it failed the job, "1 of 1
    inputs", before)."""
    def write(output, keep):
        with dg.make_pipeline() as p:
            read = p | dg.ReadTarSamples(str(speech_tars / "*.tar"))
            cut = read.samples | dg.CutSamples(WINDOWS)
            (cut.examples
             | beam.Filter(keep)
             | dg.WriteDataset(output, features="label=cls:int64", cut_by=WINDOWS,
                               splits="train=1", failures=[read, cut],
                               max_failure_fraction=0.2, allow_empty_splits=True))
        return _manifest(output)["accounting"]

    some = write(tmp_path / "some", lambda w: not (w["source_key"] == "spk0_1"
                                                   or w["start_time"] >= 2.0))
    assert (some["samples_read"], some["samples_written"], some["samples_filtered"],
            some["samples_failed"]) == (7, 5, 1, 1)
    assert some["samples_filtered_per_reason"] == {"dropped_by_your_step": 1}
    # 6 recordings of 3 windows: the filtered one's 3 and the third of 5 others.
    assert some["cut_examples"] == {"read": 18, "written": 10, "filtered": 8, "failed": 0,
                                    "filtered_per_reason": {"dropped_by_your_step": 8}}
    none = write(tmp_path / "none", lambda w: False)
    assert (none["samples_read"], none["samples_filtered"], none["samples_failed"]) == (7, 6, 1)
    assert none["cut_examples"]["filtered_per_reason"] == {"dropped_by_your_step": 18}


def test_the_same_sample_in_two_tars_is_a_duplicate_group(speech_tars, tmp_path):
    """The second tar holds shard0's members under `copy/` (GNU tar's
    --transform): other keys, the same content."""
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "a.tar").write_bytes((speech_tars / "shard0.tar").read_bytes())
    subprocess.run(["tar", "-xf", str(copy / "a.tar")], cwd=tmp_path, check=True)
    members = sorted(p.name for p in tmp_path.glob("spk0_*"))
    subprocess.run(["tar", "-cf", str(copy / "b.tar"), "--transform", "s,^,copy/,", *members],
                   cwd=tmp_path, check=True)
    with dg.make_pipeline() as p:
        _ = (p | dg.ReadTarSamples(str(copy / "*.tar"))
             | dg.WriteDataset(tmp_path / "out", features="flac:bytes", splits="train=1",
                               cut=dg.CutOptions(audio_fields=("flac",))))
    duplicates = _manifest(tmp_path / "out")["duplicates"]
    assert duplicates["groups"] == 4
    listed = [json.loads(line) for line in
              (tmp_path / "out" / "duplicates.jsonl").read_text().splitlines()]
    assert sorted({os.path.basename(m["url"]) for group in listed for m in group["members"]}) == [
        "a.tar", "b.tar"]


def test_a_key_given_twice_fails_before_publishing(tmp_path):
    rows = [{"__key__": "a", "x": 1}, {"__key__": "a", "x": 2}, {"__key__": "b", "x": 3}]
    with pytest.raises(DatasetFailed, match=r"given more than once, e\.g\. 'a' 2 times"):
        with dg.make_pipeline() as p:
            _ = p | beam.Create(rows) | dg.WriteDataset(tmp_path / "out", features="x:int64")
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_arrays_of_another_shape_are_dead_letters(tmp_path):
    rows = [{"v": np.zeros(4, np.float32), "s": f"s{i}"} for i in range(20)] + [
        {"v": np.zeros((2, 2), np.float32), "s": "square"}]
    clips = [{"audio": np.zeros(16000, np.float32)}, {"audio": np.zeros((8000, 2), np.float32)}]
    with dg.make_pipeline() as p:
        _ = p | "Rows" >> beam.Create(rows) | "WriteRows" >> dg.WriteDataset(
            tmp_path / "rows", features="v:float32[4]", split_by="s",
            max_failure_fraction=0.1, splits="train=1")
        _ = p | "Clips" >> beam.Create(clips) | "WriteClips" >> dg.WriteDataset(
            tmp_path / "clips", features="audio:float32[16000]", max_failure_fraction=0.5,
            splits="train=1")
    for name, shape in (("rows", "[2, 2]"), ("clips", "[8000, 2]")):
        (letter,) = _dead_letters(tmp_path / name)
        assert letter["stage"] == "encode" and f"shape {shape}" in letter["message"]
        assert _manifest(tmp_path / name)["accounting"]["samples_failed"] == 1
    # The clip had no key: its dead letter has its digest and shows what it held.
    (clip,) = _dead_letters(tmp_path / "clips")
    assert clip["key"].startswith("content-") and clip["element"].startswith("{'audio': array(")


def test_an_empty_input_fails_unless_empty_splits_are_allowed(tmp_path):
    with pytest.raises(DatasetFailed, match="no example was written"):
        with dg.make_pipeline() as p:
            _ = p | beam.Create([]) | dg.WriteDataset(tmp_path / "empty", features="x:int64")
    assert not (tmp_path / "empty" / "manifest.json").exists()
    with dg.make_pipeline() as p:
        _ = p | beam.Create([]) | dg.WriteDataset(tmp_path / "allowed", features="x:int64",
                                                  allow_empty_splits=True)
    assert _manifest(tmp_path / "allowed")["accounting"]["samples_read"] == 0


def test_elements_that_are_no_samples_are_dead_letters(tmp_path):
    rows = [{"x": i} for i in range(30)] + [{0: "pandas column"}, {"__key__": 7, "x": 1},
                                             {"x": tf.constant([1, 2])}]
    windows = dg.CutOptions(mode="audio_windows", audio_fields=("flac",))
    with dg.make_pipeline() as p:
        cut = p | beam.Create([{"flac": b"not audio"}, {"flac": None}, {1: 2}]) | dg.CutSamples(
            windows)
        _ = p | "Rows" >> beam.Create(rows) | dg.WriteDataset(
            tmp_path / "rows", features="x:int64", max_failure_fraction=0.2, failures=cut)
    letters = _dead_letters(tmp_path / "rows")
    messages = sorted((r["stage"], r["message"][:30]) for r in letters)
    assert [stage for stage, _ in messages] == [
        "cut", "decode_audio", "encode", "read_element", "read_element", "read_element"]
    assert any("field names must be text, got 0" in r["message"] for r in letters)
    accounting = _manifest(tmp_path / "rows")["accounting"]
    assert (accounting["samples_read"], accounting["samples_failed"]) == (36, 6)


def test_two_writes_into_one_folder_are_refused(tmp_path):
    with pytest.raises(ValueError, match="written by another WriteDataset of this pipeline"):
        with dg.make_pipeline() as p:
            rows = p | beam.Create([{"x": 1}])
            _ = rows | "One" >> dg.WriteDataset(tmp_path / "out", features="x:int64")
            _ = rows | "Two" >> dg.WriteDataset(str(tmp_path / "out"), features="x:int64")


@pytest.mark.parametrize("keywords, error, message", [
    (dict(max_failure_fraction="0.1"), TypeError,
     r"^max_failure_fraction must be a float in \[0, 1\], got '0.1'"),
    (dict(split_by=None), TypeError, "^split_by must be a field name"),
    (dict(features={"x": "int64"}), TypeError, "^features must be a FeatureSpec"),
    (dict(splits="train=0.5"), ValueError, "^splits 'train=0.5': ratios sum to 0.5, not 1"),
    (dict(compression="zip"), ValueError, "^compression 'zip': expected one of"),
    (dict(file_format="parquet"), ValueError, "^file_format 'parquet': expected one of"),
    (dict(file_format="array_record", compression="gzip"), ValueError,
     "^compression must be 'none' with file_format 'array_record'"),
    (dict(shard_size_bytes="64MB"), TypeError, "^shard_size_bytes must be an int, got '64MB'"),
    (dict(text_field="text"), ValueError, "^text_field 'text' must name a string feature"),
    (dict(segments="start,end"), TypeError, "^segments must be a SegmentOptions"),
])
def test_bad_arguments_are_refused_in_python_terms(keywords, error, message):
    with pytest.raises(error, match=message):
        dg.WriteDataset("out", **{"features": "x:int64", **keywords})


class _V0Reader:
    """A reader as the v0 docs wrote one: read() alone, no base class."""

    def read(self, unit, tracker=None):
        yield {"__key__": "a", "x": 1}


@pytest.mark.parametrize("make, message", [
    (lambda: dg.WriteDataset("out", features="x:int64", splits={"train": "0.5", "test": 0.5}),
     r"^splits\['train'\] must be a number, got '0.5'"),
    (lambda: dg.SplitPlan.from_flags({"train": 0.5, "eval": 0.2}, "__key__"),
     "^splits 'train=0.5,eval=0.2': ratios sum to 0.7, not 1"),
    (lambda: dg.SplitPlan.from_flags(None, "__key__"), "^splits must be 'train=0.8"),
    (lambda: dg.WindowOptions(window_s="1"), "^window_s must be a number, got '1'"),
    (lambda: dg.WindowOptions(hop_s=-1.0), "^hop_s must be above 0, got -1.0"),
    (lambda: dg.AudioOptions(sample_rate="16000"), "^sample_rate must be an int or None"),
    (lambda: dg.decode_audio(pathlib.Path("a.flac"), dg.AudioOptions()),
     r"^data must be a file's encoded bytes, got PosixPath; read the file first"),
    (lambda: dg.load("out", "train", batch_size="8"), "^batch_size must be an int or None, "
                                                      "got '8'"),
    (lambda: dg.Source(list, _V0Reader()), r"^reader must be a UnitReader, got _V0Reader: "
                                           r"subclass it, class _V0Reader\(dg.UnitReader\)"),
    (lambda: dg.WriteDataset("out", dg.ReadTarSamples("a.tar"), features="x:int64"),
     r"^source must be a Source, got .*ReadTarSamples.*: give its \.source "
     r"\(ReadTarSamples\(\.\.\.\)\.source\)$"),
])
def test_a_wrong_argument_is_an_argument_error_naming_it_not_an_internal_error(make, message):
    with pytest.raises(dg.ArgumentError, match=message):
        make()


def test_paths_lists_and_dicts_are_taken(tmp_path):
    with dg.make_pipeline() as p:
        _ = p | beam.Create([{"x": i, "y": 2.0 * i} for i in range(40)]) | dg.WriteDataset(
            tmp_path / "out", features=["x:int64", "y:float"], splits={"train": 0.5, "test": 0.5})
    info = _manifest(tmp_path / "out")
    assert [f["name"] for f in info["features"]] == ["x", "y"]
    assert sorted(info["splits"]) == ["test", "train"]


def test_the_recipe_adds_the_cuts_own_features():
    spec = dg.FeatureSpec.parse("label=cls:int64")
    windows = dg.ExampleRecipe(spec=spec, cut=WINDOWS).spec
    assert [(f.name, f.sample_rate) for f in windows][:2] == [("audio", 16000),
                                                               ("source_key", None)]
    whole = dg.ExampleRecipe(spec=spec, cut=dg.CutOptions(audio_fields=("flac",))).spec
    assert [f.name for f in whole] == ["duration_s", "num_samples", "label"]
    with pytest.raises(ValueError, match="the cut makes it float"):
        dg.ExampleRecipe(spec=dg.FeatureSpec.parse("audio:float32[8000]"), cut=WINDOWS)


def test_warnings_reach_a_python_caller_through_logging(tmp_path, caplog):
    rows = [{"x": i, "g": "one" if i < 38 else "two"} for i in range(40)]
    with caplog.at_level(logging.WARNING, logger="transforms"):
        with dg.make_pipeline() as p:
            _ = p | beam.Create(rows) | dg.WriteDataset(
                tmp_path / "out", features="x:int64", split_by="g",
                splits="train=0.5,test=0.5", allow_empty_splits=True)
    warnings = _manifest(tmp_path / "out")["warnings"]
    assert warnings and [r.getMessage() for r in caplog.records
                         if r.levelno == logging.WARNING] == warnings


def test_hugging_face_audio_rows_read_with_the_projection_syntax(tmp_path):
    table = pa.table({
        "audio": [{"bytes": flac_bytes(voice(200 + i, 1.0), 16000), "path": f"u{i}.flac"}
                  for i in range(12)],
        "speaker": [f"spk{i}" for i in range(12)],
    })
    pq.write_table(table, tmp_path / "train.parquet")
    with dg.make_pipeline() as p:
        _ = (p | beam.io.ReadFromParquet(str(tmp_path / "train.parquet"))
             | beam.Map(lambda row: {"__key__": row["audio"]["path"], **row})
             | dg.WriteDataset(tmp_path / "out", features="audio=audio.bytes:bytes,speaker:string",
                               split_by="speaker", splits="train=0.5,test=0.5"))
    info = _manifest(tmp_path / "out")
    assert info["accounting"]["samples_written"] == 12
    examples = [ex for split in info["splits"]
                for ex in dg.load(str(tmp_path / "out"), split, batch_size=None)
                .as_numpy_iterator()]
    assert sorted(ex["audio"][:4] for ex in examples) == [b"fLaC"] * 12
    assert dg.verify_dataset(tmp_path / "out").ok
    builder = tfds.builder_from_directory(str(tmp_path / "out"))
    assert sum(builder.info.splits[s].num_examples for s in info["splits"]) == 12


class _Utterances(dg.UnitReader):
    """A user's folder tree: SPEAKER/N.flac beside its transcript SPEAKER/N.txt."""

    def read(self, unit, tracker=None):
        for folder in unit.inputs:
            for name in sorted(n for n in os.listdir(folder) if n.endswith(".flac")):
                path = os.path.join(folder, name)
                text = pathlib.Path(path[:-5] + ".txt").read_text().strip()
                if not text:
                    yield dg.Failed.of("read_text", "empty transcript", url=path, key=name)
                    continue
                yield {"__key__": f"{os.path.basename(folder)}/{name[:-5]}", "__url__": folder,
                       "flac": pathlib.Path(path).read_bytes(), "text": text,
                       "speaker": os.path.basename(folder)}


def test_a_users_source_over_a_folder_tree_with_transcripts(tmp_path):
    """Transcripts written by printf, one left empty: a dead letter; the rest
    whole utterances with their text, read back by our reader and TFDS."""
    root = tmp_path / "voices"
    for s in range(6):
        folder = root / f"spk{s}"
        folder.mkdir(parents=True)
        for n in range(3):
            (folder / f"{n}.flac").write_bytes(flac_bytes(voice(150 + 20 * s, 1.5, seed=n), 16000))
            line = "" if (s, n) == (0, 0) else f"speaker {s} line {n}"
            subprocess.run(f"printf '{line}' > {n}.txt", shell=True, cwd=folder, check=True)

    def plan():
        sizes = [(str(folder), 1) for folder in sorted(root.iterdir())]
        return [dg.WorkUnit(i, folders, len(folders))
                for i, folders in enumerate(dg.group_by_size(sizes, 2))]

    output = tmp_path / "out"
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(output, dg.Source(plan, _Utterances()),
                                features="text:string,speaker:string", split_by="speaker",
                                cut=dg.CutOptions(audio_fields=("flac",)),
                                splits="train=0.5,test=0.5", max_failure_fraction=0.1)
    info = dg.load_info(output)
    assert (info.accounting["samples_read"], info.accounting["samples_written"],
            info.accounting["samples_failed"]) == (18, 17, 1)
    assert [r["stage"] for r in _dead_letters(output)] == ["read_text"]
    assert dg.verify_dataset(output).ok
    examples = [ex for split in info.splits
                for ex in dg.load(str(output), split, batch_size=None).as_numpy_iterator()]
    assert sorted(ex["text"].decode() for ex in examples)[:2] == ["speaker 0 line 1",
                                                                  "speaker 0 line 2"]
    assert {round(float(ex["duration_s"]), 2) for ex in examples} == {1.5}
    builder = tfds.builder_from_directory(str(output))
    assert sum(builder.info.splits[s].num_examples for s in info.splits) == 17


def test_a_key_given_again_in_a_tar_is_a_dead_letter(tmp_path):
    """GNU tar appends a member of a name the archive has (`tar -r`): a second
    sample of that key. Read as a Source, both are dead letters naming both
    members; piped in as a PCollection, the job refuses it
    (test_a_key_given_twice_fails_before_publishing)."""
    folder = tmp_path / "members"
    folder.mkdir()
    for key in ("a", "b", "c"):
        subprocess.run(f"echo {ord(key)} > {key}.cls", shell=True, cwd=folder, check=True)
    subprocess.run(["tar", "-cf", str(tmp_path / "t.tar"), "a.cls", "b.cls", "c.cls"],
                   cwd=folder, check=True)
    subprocess.run(["tar", "-rf", str(tmp_path / "t.tar"), "a.cls"], cwd=folder, check=True)
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(tmp_path / "out", dg.ReadTarSamples(str(tmp_path / "t.tar")).source,
                                features="label=cls:int64", splits="train=1",
                                max_failure_fraction=0.5)
    accounting = _manifest(tmp_path / "out")["accounting"]
    assert (accounting["samples_read"], accounting["samples_written"],
            accounting["samples_failed"]) == (4, 2, 2)
    letters = _dead_letters(tmp_path / "out")
    assert [(letter["stage"], letter["key"]) for letter in letters] == [("duplicate_key", "a")] * 2
    tar = str(tmp_path / "t.tar")
    assert f"({tar} member a.cls, {tar} member a.cls)" in letters[0]["message"]

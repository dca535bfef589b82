"""Hugging Face `datasets` Parquet read by its own metadata: files written by
the real `datasets` library (to_parquet, and push_to_hub's layout of
data/train-0000N-of-0000M.parquet with the audio embedded), audio made by sox.

The schema's `huggingface` key says which columns are Audio and at what rate:
no --media_columns is needed, the rate is the job's default --sample_rate,
and plain Parquet with no media column named gets an error saying what each
column holds.
"""

import json
import subprocess

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile
import tensorflow_datasets as tfds

import transforms as dg
from pipelines import parquet_to_tfrecord
from transforms.report.gather import gather

TONES = {"a": (1.0, 300), "b": (1.5, 500), "c": (0.75, 700)}   # seconds, Hz


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """a.flac, b.flac, c.flac: 16 kHz tones by sox."""
    root = tmp_path_factory.mktemp("hf")
    for name, (seconds, hz) in TONES.items():
        subprocess.run(["sox", "-n", "-r", "16000", "-b", "16", "-c", "1",
                        str(root / f"{name}.flac"), "synth", str(seconds), "sine", str(hz),
                        "gain", "-6"], check=True)
    return root


def _dataset(columns: dict, rate: int | None = None) -> datasets.Dataset:
    ds = datasets.Dataset.from_dict(columns)
    ds = ds.cast_column("audio", datasets.Audio(sampling_rate=rate))
    return ds.cast_column("label", datasets.ClassLabel(names=["low", "mid", "high"]))


def test_to_parquets_audio_column_and_rate_need_no_flags(clips, tmp_path, monkeypatch):
    """Paths (as to_parquet keeps them: relative to the Parquet file's folder
    here) and Audio(sampling_rate=8000): the job decodes at 8 kHz without
    --media_columns, --sample_rate or --features."""
    monkeypatch.chdir(clips)   # where `datasets` finds the relative paths
    _dataset({"audio": [f"{n}.flac" for n in TONES], "text": ["one", "two", "three"],
              "code": ["007", "010", "3"], "label": [0, 1, 2]},
             rate=8000).to_parquet(str(clips / "clips.parquet"))
    output = tmp_path / "ds"
    parquet_to_tfrecord.run(["--input", str(clips / "clips.parquet"), "--output", str(output),
                             "--cut", "utterances", "--splits", "train=1",
                             "--label_field", "label"])
    info = dg.load_info(output)
    # The ClassLabel's names: the manifest's, TFDS's, the report's label axis.
    assert info.class_names == {"label": ["low", "mid", "high"]}
    assert tfds.builder_from_directory(str(output)).info.features["label"].names == [
        "low", "mid", "high"]
    assert gather(str(output)).splits[0].label_counts == {"low": 1, "mid": 1, "high": 1}
    assert dg.verify_dataset(output).ok
    audio = next(f for f in info.spec if f.name == "audio")
    assert audio.sample_rate == 8000 and info.document["options"]["sample_rate"] == 8000
    # The schema's dtypes: text that reads as a number stays text (Value("string")).
    assert {f.name: f.dtype for f in info.spec if f.name in ("text", "code", "label")} == {
        "text": "string", "code": "string", "label": "int64"}
    examples = {int(e["label"]): e for e in dg.load(output, "train", batch_size=None)}
    assert sorted(examples) == [0, 1, 2]
    for label, (seconds, hz) in enumerate(TONES.values()):
        audio = examples[label]["audio"].numpy()
        assert len(audio) == seconds * 8000
        # Each tone at 8 kHz: its strongest FFT bin its pitch, its level sox's -6 dB sine.
        spectrum = np.abs(np.fft.rfft(audio))
        assert np.argmax(spectrum) * 8000 / len(audio) == pytest.approx(hz, abs=2)
        assert np.sqrt(np.mean(audio[800:-800] ** 2)) == pytest.approx(0.501 / np.sqrt(2),
                                                                        rel=0.01)
        assert examples[label]["text"].numpy() == [b"one", b"two", b"three"][label]
        assert examples[label]["code"].numpy() == [b"007", b"010", b"3"][label]
    # A rerun into the folder without the label leaves no class names behind.
    parquet_to_tfrecord.run(["--input", str(clips / "clips.parquet"), "--output", str(output),
                             "--cut", "utterances", "--splits", "train=1",
                             "--features", "text:string"])
    assert not (output / "label.labels.txt").exists() and dg.verify_dataset(output).ok


def test_push_to_hubs_shards_with_embedded_audio(clips, tmp_path):
    """data/train-0000N-of-00002.parquet, each FLAC's bytes in its row."""
    embedded = [{"bytes": (clips / f"{n}.flac").read_bytes(), "path": f"{n}.flac"} for n in TONES]
    ds = _dataset({"audio": embedded, "text": list(TONES), "label": [0, 1, 2]})
    data = tmp_path / "data"
    data.mkdir()
    for index in range(2):
        ds.shard(2, index).to_parquet(str(data / f"train-{index:05d}-of-00002.parquet"))
    first = pq.read_table(data / "train-00000-of-00002.parquet")
    assert first["audio"][0]["bytes"].as_py()[:4] == b"fLaC"
    read = dg.ReadParquetSamples(str(data / "train-*.parquet"), [])
    assert read.layout.media_columns == ("audio",)
    assert read.flag_defaults == {"audio_fields": "audio"}   # Audio(): the files' own rate
    output = tmp_path / "ds"
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(str(output), read.source, features="text:string,label:int64",
                                cut=dg.CutOptions(mode="utterances", audio_fields=("audio",)),
                                splits="train=1")
    examples = {e["text"].numpy().decode(): e for e in dg.load(output, "train", batch_size=None)}
    assert sorted(examples) == sorted(TONES)
    for name in TONES:
        audio, _ = soundfile.read(clips / f"{name}.flac", dtype="float32")
        np.testing.assert_allclose(examples[name]["audio"].numpy(), audio, atol=1e-4)


def test_plain_parquet_without_media_columns_says_what_its_columns_hold(clips, tmp_path):
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"clip": [(clips / "a.flac").read_bytes()], "note": ["a.flac"],
                             "n": [1]}), path)
    with pytest.raises(ValueError, match="clip: bytes; note: text \\(file paths\\?\\); n: int64"):
        parquet_to_tfrecord.run(["--input", str(path), "--output", str(tmp_path / "ds"),
                                 "--cut", "utterances", "--splits", "train=1"])
    assert not (tmp_path / "ds").exists()


def test_an_unlabeled_row_is_filtered_and_every_value_lies_in_its_declared_classes(
        clips, tmp_path, monkeypatch):
    """`datasets` writes an unlabeled row's ClassLabel as -1: it names no class,
    so the row is filtered (`no_label`), from the command line and from Python
    alike; a value past the names (7 of 3, rewritten by pyarrow) is a dead
    letter; verify holds every value to the classes the dataset declares."""
    monkeypatch.chdir(clips)
    _dataset({"audio": [f"{n}.flac" for n in TONES] + ["a.flac"], "text": ["1", "2", "3", "4"],
              "label": [0, -1, 2, 1]}).to_parquet(str(clips / "unlabeled.parquet"))
    table = pq.read_table(clips / "unlabeled.parquet")
    assert table["label"].to_pylist() == [0, -1, 2, 1]
    output = tmp_path / "ds"
    parquet_to_tfrecord.run(["--input", str(clips / "unlabeled.parquet"), "--output", str(output),
                             "--cut", "utterances", "--splits", "train=1",
                             "--features", "text:string,label:int64"])
    info = dg.load_info(output)
    assert (info.accounting["samples_written"], info.accounting["samples_filtered"]) == (3, 1)
    assert info.accounting["samples_filtered_per_reason"] == {"no_label": 1}
    assert sorted(int(e["label"]) for e in dg.load(output, "train", batch_size=None)) == [0, 1, 2]
    assert "int_domain {\n    min: 0\n    max: 2" in (output / "schema.pbtxt").read_text()
    assert tfds.builder_from_directory(str(output)).info.features["label"].num_classes == 3
    assert dg.verify_dataset(output).ok

    read = dg.ReadParquetSamples(str(clips / "unlabeled.parquet"), [])
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(str(tmp_path / "python"), read.source,
                                features="text:string,label:int64", splits="train=1",
                                cut=dg.CutOptions(mode="utterances", audio_fields=("audio",)))
    python = dg.load_info(tmp_path / "python")
    assert python.accounting["samples_filtered_per_reason"] == {"no_label": 1}
    assert python.class_names == {"label": ["low", "mid", "high"]}

    labels = table["label"].to_pylist()
    labels[3] = 7
    pq.write_table(table.set_column(2, "label", pa.array(labels, table.schema.field("label").type)),
                   clips / "unlabeled.parquet")
    parquet_to_tfrecord.run(["--input", str(clips / "unlabeled.parquet"), "--output",
                             str(tmp_path / "seven"), "--cut", "utterances", "--splits",
                             "train=1", "--max_failure_fraction", "0.5",
                             "--features", "text:string,label:int64"])
    (letter,) = [json.loads(line) for line in
                 (tmp_path / "seven" / "failures" / "failures.jsonl").read_text().splitlines()]
    assert (letter["stage"], letter["message"]) == (
        "classes", "label 7 is none of the 3 classes its input declares (0..2: low, mid, high)")

    # A manifest declaring fewer classes than its records hold (as a dataset
    # written before -1 was filtered declared 3 and held -1): verify refuses it.
    document = json.loads((output / "manifest.json").read_text())
    document["recipe"]["class_names"]["label"] = ["low", "mid"]
    (output / "manifest.json").write_text(json.dumps(document))
    problems = dg.verify_dataset(output).problems
    assert problems and all("feature 'label': 2 is none of its 2 declared classes (0..1)" in p
                            for p in problems)


def test_a_hub_layouts_own_splits_are_kept(clips, tmp_path):
    """`datasets` writes a train and a test split in the hub's layout
    (data/<split>-00000-of-00001.parquet): with no split flag, each row stays
    in its file's split; --splits asks for new ones, split by hash."""
    embedded = [{"bytes": (clips / f"{n}.flac").read_bytes(), "path": f"{n}.flac"} for n in TONES]
    ds = _dataset({"audio": embedded * 4, "text": [f"t{i}" for i in range(12)],
                   "label": [i % 3 for i in range(12)]})
    data = tmp_path / "data"
    data.mkdir()
    ds.select(range(8)).to_parquet(str(data / "train-00000-of-00001.parquet"))
    ds.select(range(8, 12)).to_parquet(str(data / "test-00000-of-00001.parquet"))
    output = tmp_path / "ds"
    info = parquet_to_tfrecord.run(["--input", f"{data}/*.parquet", "--output", str(output),
                                    "--cut", "utterances", "--features", "text:string"])
    texts = {split: sorted(e["text"].numpy().decode() for e in dg.load(
        output, split, batch_size=None)) for split in ("train", "test")}
    assert texts == {"train": sorted(f"t{i}" for i in range(8)),
                     "test": sorted(f"t{i}" for i in range(8, 12))}
    assert info["recipe"]["splits"]["column"] == "file_split"
    resplit = parquet_to_tfrecord.run(["--input", f"{data}/*.parquet", "--output",
                                       str(tmp_path / "resplit"), "--cut", "utterances",
                                       "--features", "text:string", "--splits",
                                       "train=0.5,test=0.5"])
    assert resplit["recipe"]["splits"]["column"] is None

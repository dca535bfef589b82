"""Parquet in: Hugging Face `datasets`' audio layout written by pyarrow, read by
row groups into utterances with features and transcripts.

The Parquet file is pyarrow's, as `datasets.Dataset.to_parquet` writes an
`Audio` column: a struct of `bytes` and `path`. Its speech is espeak-ng's,
stored by sox (transforms/testing/spoken.py). Row by row: embedded bytes, a
path relative to the Parquet file, a struct with neither, a path to nothing.
"""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile
import tensorflow_datasets as tfds

import transforms as dg
from pipelines import parquet_to_tfrecord
from transforms.media.features import AudioFeatures, compute_features
from transforms.sources.parquet import plan_parquet_units
from transforms.testing.spoken import sentences, speak

SPEAKERS = ("s0", "s1", "s0", "s1", "s2", "s3")
AUDIO = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
FLAGS = ["--media_columns", "audio", "--cut", "utterances", "--audio_fields", "audio",
         "--audio_features", "logmel", "--num_mel_bins", "40",
         "--features", "text:string,speaker:string", "--text_field", "text",
         "--split_by", "speaker", "--splits", "train=0.5,test=0.5", "--max_failure_fraction",
         "0.5"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """rows.parquet, 3 row groups of 3: rows 0-5 speech (even rows embed their
    FLAC, odd rows give its path), row 6 neither bytes nor path, row 7 a path
    to no file, row 8 a key of its own ("spare", embedded)."""
    root = tmp_path_factory.mktemp("parquet")
    (root / "clips").mkdir()
    texts = sentences(len(SPEAKERS))
    audio, rows = [], []
    for i, text in enumerate(texts):
        path = root / "clips" / f"c{i}.flac"
        speak(text, str(path), voice=i)
        audio.append({"bytes": path.read_bytes() if i % 2 == 0 else None,
                      "path": f"clips/c{i}.flac"})
        rows.append((text, SPEAKERS[i]))
    audio += [{"bytes": None, "path": None}, {"bytes": None, "path": "clips/gone.flac"},
              {"bytes": (root / "clips" / "c0.flac").read_bytes(), "path": None}]
    rows += [("nothing", "s0"), ("gone", "s1"), ("spare", "s2")]
    table = pa.table({"audio": pa.array(audio, AUDIO), "text": [t for t, _ in rows],
                      "speaker": [s for _, s in rows]})
    pq.write_table(table, root / "rows.parquet", row_group_size=3)
    return root


@pytest.fixture(scope="module")
def dataset(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("out") / "ds"
    parquet_to_tfrecord.run(["--input", str(corpus / "rows.parquet"), "--output", str(output),
                             "--shard_size_mb", "0.0001", *FLAGS])
    return output


def test_row_groups_are_the_work_units(corpus):
    units = plan_parquet_units(str(corpus / "rows.parquet"), 1)
    assert [u.inputs[1:] for u in units] == [(0, 1, 0, "rows"), (1, 2, 3, "rows"),
                                             (2, 3, 6, "rows")]
    assert [u.index for u in units] == [0, 1, 2]


def test_embedded_bytes_and_paths_are_read_and_bad_rows_are_dead_letters(corpus, dataset):
    info = dg.load_info(dataset)
    assert info.accounting["samples_read"] == 9
    assert info.accounting["samples_failed"] == 2
    with open(dataset / "failures" / "failures.jsonl") as f:
        letters = {letter["key"]: letter for letter in map(json.loads, f)}
    assert sorted(letters) == ["rows-0000006", "rows-0000007"]
    assert letters["rows-0000006"]["message"] == "the row's media holds neither bytes nor a path"
    gone = letters["rows-0000007"]
    assert (gone["stage"], gone["member"], gone["column"]) == ("read_media", "audio", "audio")
    assert "gone.flac" in gone["message"]

    written, in_train = {}, set()
    for split in ("train", "test"):
        for example in dg.load(dataset, split, batch_size=None):
            key = example["source_key"].numpy().decode()
            written[key] = example
            if split == "train":
                in_train.add(key)
    assert sorted(written) == [f"rows-{i:07d}" for i in (0, 1, 2, 3, 4, 5, 8)]
    texts = sentences(len(SPEAKERS))
    for i in range(len(SPEAKERS)):
        example = written[f"rows-{i:07d}"]
        audio, _ = soundfile.read(corpus / "clips" / f"c{i}.flac", dtype="float32")
        expected = compute_features(audio, 16000, AudioFeatures("logmel", num_mel_bins=40))
        np.testing.assert_array_equal(example["logmel"].numpy(), expected)
        assert example["text"].numpy().decode() == texts[i]
    by_tfds = tfds.builder_from_directory(str(dataset)).as_dataset(split="train")
    assert {e["source_key"].numpy().decode() for e in by_tfds} == in_train


def test_a_missing_column_or_a_file_not_parquet_is_refused_before_work(corpus, tmp_path):
    with pytest.raises(ValueError, match="no column 'video' in the Parquet files"):
        dg.ReadParquetSamples(str(corpus / "rows.parquet"), ["video"])
    (tmp_path / "fake.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match="fake.parquet: not a Parquet file"):
        dg.ReadParquetSamples(str(tmp_path / "fake.parquet"), ["audio"])
    with pytest.raises(ValueError, match="has no column for 'lang' \\(--features\\)"):
        parquet_to_tfrecord.run(["--input", str(corpus / "rows.parquet"), "--output",
                                 str(tmp_path / "out"), *FLAGS,
                                 "--features", "text:string,lang:string"])
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # against the storage emulator
def test_parquet_and_its_media_on_gs_give_the_local_dataset(corpus, dataset, gcs_emulator):
    for path in [corpus / "rows.parquet", *sorted((corpus / "clips").iterdir())]:
        gcs_emulator.upload(path, f"parquet/{path.relative_to(corpus)}")
    remote = gcs_emulator.url("parquet-out/ds")
    info = parquet_to_tfrecord.run(["--input", gcs_emulator.url("parquet/rows.parquet"),
                                    "--output", remote, "--shard_size_mb", "0.0001", *FLAGS])
    local = dg.load_info(dataset)
    assert info["splits"] == local.splits
    assert info["statistics"] == local.document["statistics"]


def test_a_row_group_that_does_not_decode_is_its_rows_dead_letters(corpus, tmp_path):
    """rows.parquet with the first page header of its second row group
    overwritten (the footer intact): that row group's rows are dead letters
    naming it, the others are written, the totals add up, by the job and the
    Python API (it failed the whole job, "infrastructure error", before)."""
    data = bytearray((corpus / "rows.parquet").read_bytes())
    column = pq.ParquetFile(corpus / "rows.parquet").metadata.row_group(1).column(0)
    start = column.dictionary_page_offset or column.data_page_offset
    data[start:start + 8] = b"\xff" * 8
    (tmp_path / "clips").symlink_to(corpus / "clips")
    (tmp_path / "damaged.parquet").write_bytes(bytes(data))
    keywords = dict(features="text:string", splits="train=1", max_failure_fraction=0.9)
    info = parquet_to_tfrecord.run(["--input", str(tmp_path / "damaged.parquet"),
                                    "--media_columns", "audio", "--media_root", str(corpus),
                                    "--output", str(tmp_path / "cli"), "--features", "text:string",
                                    "--splits", "train=1", "--max_failure_fraction", "0.9"])
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(str(tmp_path / "api"), dg.ReadParquetSamples(
            str(tmp_path / "damaged.parquet"), "audio", media_root=corpus).source, **keywords)
    for output in ("cli", "api"):
        with open(tmp_path / output / "failures" / "failures.jsonl") as f:
            letters = {d["key"]: d for d in map(json.loads, f)}
        lost = {f"damaged-{row:07d}" for row in (3, 4, 5)}
        assert lost <= set(letters)
        assert {letters[key]["member"] for key in lost} == {"row group 1"}
        assert all("row group 1 does not decode from row 3 on" in letters[key]["message"]
                   for key in lost)
        accounting = dg.load_info(tmp_path / output).accounting
        assert accounting["samples_read"] == 9
        assert accounting["samples_read"] == (accounting["samples_written"]
                                              + accounting["samples_failed"])
    assert info["accounting"]["samples_written"] == 4   # rows 0-2 and 8 (6 and 7 are bad)

"""The two writer layouts: examples written where they are built (the default) and the
hash-ordered global layout; what each sends between stages, memory that stays flat
however large the corpus, and the output folder a run leaves."""

import dataclasses
import gzip
import io
import json
import os
import sys
import tarfile

import pytest
import tensorflow as tf
from apache_beam.runners.portability.fn_api_runner import execution

import transforms as dg
from benchmarks.process_tree import measure
from pipelines import tar_to_tfrecord
from transforms.format.arguments import ArgumentError
from transforms.format.manifest import AT_READ
from transforms.testing.corpus import write_corpus
from transforms.writer.plan import COPIES, FIRST, KEYS, ON_SHARDS, STRATA, plan_write

FEATURES = "payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """4 shards x 40 samples of 64 KiB payloads (10 MiB), 16 speakers."""
    root = tmp_path_factory.mktemp("corpus")
    paths = write_corpus(str(root), shards=4, samples_per_shard=40, payload_bytes=64 << 10,
                         speakers=16)
    return root, sum(os.path.getsize(p) for p in paths)


def _run(corpus_root, output, *flags):
    return tar_to_tfrecord.run(["--input", f"{corpus_root}/*.tar", "--output", str(output),
                                "--features", FEATURES, "--split_by", "__key__:^([^_]+)",
                                "--allow_empty_splits", *flags])


@pytest.fixture
def bytes_between_stages(monkeypatch):
    """Counts every byte the local runner holds between stages: each stage's output
    is appended to one of these buffers, whether a GroupByKey's, a side input's or
    the next stage's input."""
    counted = {"bytes": 0}

    def counting(append):
        def wrapped(self, data):
            counted["bytes"] += len(data)
            return append(self, data)
        return wrapped

    for buffer in (execution.ListBuffer, execution.GroupingBuffer):
        monkeypatch.setattr(buffer, "append", counting(buffer.append))
    return counted


def test_no_example_crosses_a_stage_boundary(corpus, tmp_path, bytes_between_stages):
    root, corpus_bytes = corpus
    info = _run(root, tmp_path / "streamed", "--shard_size_mb", "1")
    streamed = bytes_between_stages["bytes"]
    assert sum(s["num_bytes"] for s in info["splits"].values()) > 0.9 * corpus_bytes
    # Units, shard records, tallies and (group, split) pairs: a few KB per unit.
    assert streamed < 0.01 * corpus_bytes

    # The measurement sees payloads when they do cross: the global layout holds
    # every example for its shard plan, then shuffles them into shards.
    bytes_between_stages["bytes"] = 0
    _run(root, tmp_path / "global", "--shuffle", "global")
    assert bytes_between_stages["bytes"] > 1.5 * corpus_bytes


def _compressible_corpus(root, megabytes, files=4, member_kib=256):
    """.tar.gz shards of `megabytes` of samples whose payload repeats one 1 KiB
    block: gzip shrinks them about a thousandfold, so a corpus larger than the
    memory budget costs little disk, and inflating and deflating it is fast."""
    block = os.urandom(1024)
    payload = block * member_kib
    samples = megabytes * 1024 // member_kib // files
    for f in range(files):
        with gzip.GzipFile(root / f"big-{f}.tar.gz", "wb", compresslevel=1) as gz, \
                tarfile.open(fileobj=gz, mode="w") as tar:
            for i in range(samples):
                for ext, data in (("bin", payload), ("cls", str(i % 5).encode())):
                    info = tarfile.TarInfo(f"spk{i % 8}_{f}_{i:05d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return files * samples * len(payload)


@pytest.mark.slow
def test_memory_stays_flat_over_a_corpus_three_times_the_budget(tmp_path):
    budget = 512 << 20
    corpus_bytes = _compressible_corpus(tmp_path, megabytes=1536)
    assert corpus_bytes >= 3 * budget
    run = measure([sys.executable, "-m", "pipelines.tar_to_tfrecord",
                   "--input", f"{tmp_path}/*.tar.gz", "--output", str(tmp_path / "out"),
                   "--features", "payload=bin:bytes,label=cls:int64",
                   "--split_by", "__key__:^([^_]+)", "--allow_empty_splits"])
    info = json.loads((tmp_path / "out" / "manifest.json").read_text())
    written = sum(s["num_bytes"] for s in info["splits"].values())
    assert written >= corpus_bytes  # every payload went through, and more than the budget
    assert run.peak_rss < budget, f"peak RSS {run.peak_rss >> 20} MiB"


def test_global_layout_balances_shards_and_reruns_identically(corpus, tmp_path):
    root, _ = corpus
    info = _run(root, tmp_path / "a", "--shuffle", "global", "--num_shards", "3")
    again = _run(root, tmp_path / "b", "--shuffle", "global", "--num_shards", "3")
    assert info["splits"] == again["splits"]
    assert info["options"]["shuffle"] == "global"
    for entry in info["splits"].values():
        counts = [s["num_examples"] for s in entry["shards"]]
        assert len(counts) == min(3, entry["num_examples"]) and all(c > 0 for c in counts)
        for shard in entry["shards"]:
            assert (tmp_path / "a" / shard["file"]).read_bytes() == (
                tmp_path / "b" / shard["file"]).read_bytes()


@pytest.mark.parametrize("flags, message", [
    (["--shuffle", "global", "--direct_num_workers", "2"],
     r"--shuffle global cannot run with --direct_num_workers 2: .*use the default "
     r"--shuffle none, or --direct_num_workers 1"),
    (["--num_shards", "4"], "--num_shards needs --shuffle 'global'"),
    (["--shuffle", "random"], "invalid choice: .random."),
])
def test_layout_flag_errors_before_any_work(corpus, tmp_path, flags, message):
    root, _ = corpus
    with pytest.raises(ValueError, match=message):
        _run(root, tmp_path / "bad", *flags)
    assert not (tmp_path / "bad").exists()


def test_a_run_removes_what_killed_runs_left_and_nothing_else(corpus, tmp_path):
    root, _ = corpus
    output = tmp_path / "out"
    # A run killed while writing, and one killed after moving its shards out.
    (output / ".temp-datagen-0123abcd").mkdir(parents=True)
    (output / ".temp-datagen-0123abcd" / "train-000000-00000-x.tfrecord").write_bytes(b"x")
    (output / ".temp-datagen-4567").mkdir()
    (output / "notes.txt").write_text("mine")
    (output / "mine").mkdir()
    info = _run(root, output, "--shard_size_mb", "1")
    filled = [split for split, entry in info["splits"].items() if entry["num_examples"]]
    assert sorted(os.listdir(output)) == sorted(
        ["dataset_info.json", "features.json", "manifest.json", "mine", "notes.txt",
         "schema.pbtxt", "units.jsonl", *filled])
    assert (output / "notes.txt").read_text() == "mine"
    for split in filled:
        entry = info["splits"][split]
        files = sorted(os.listdir(output / split))
        shard_files = sorted(os.path.basename(s["file"]) for s in entry["shards"])
        assert files == sorted(shard_files + [f + ".idx" for f in shard_files])
        assert sum(1 for f in shard_files for _ in tf.data.TFRecordDataset(
            str(output / split / f))) == entry["num_examples"]


def test_the_plan_decides_once_what_a_write_does(tmp_path):
    """transforms/writer/plan.py: the layout, tf.Transform's mode, the passes
    before converting and the ledger, from the config and the way in; what
    a PCollection cannot do is refused there, naming the parameter."""
    plain = dg.WriteDataset(str(tmp_path), features="gain:float,label:int64").config
    pre = dataclasses.replace(plain, preprocessing=dg.Preprocessing(
        normalize=(("gain", "zscore"),)))
    rolled = plan_write(pre, from_source=True, examples_sink=False, reuse=False)
    assert (rolled.transform, rolled.pre_passes, rolled.keep_ledger) == (AT_READ, (KEYS,), True)
    materialized = dataclasses.replace(pre, preprocessing=dataclasses.replace(
        pre.preprocessing, materialize=True))
    assert plan_write(materialized, True, False, False).transform == ON_SHARDS
    hashed = plan_write(dataclasses.replace(pre, shuffle="global"), True, False, False)
    assert (hashed.transform, hashed.global_shards, hashed.write_shards, hashed.keep_ledger) == (
        FIRST, True, False, False)
    assert plan_write(pre, True, examples_sink=True, reuse=False).transform == FIRST
    both = dg.WriteDataset(str(tmp_path), features="label:int64", stratify_by="label",
                           duplicates="drop").config
    assert plan_write(both, True, False, False).pre_passes == (KEYS, STRATA, COPIES)
    elements = plan_write(plain, from_source=False, examples_sink=False, reuse=False)
    assert (elements.pre_passes, elements.keep_ledger, elements.transform) == ((), False, "")
    with pytest.raises(ArgumentError, match="^duplicates .* give WriteDataset a Source"):
        plan_write(dataclasses.replace(plain, duplicates="drop"), False, False, False)

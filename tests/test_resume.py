"""--resume and --retry_failed: a rerun does only what an earlier run left undone,
and publishes the dataset a clean run makes, byte for byte."""

import dataclasses
import json
import os
import re
import subprocess
import sys
import tarfile

import pytest

from pipelines import tar_to_tfrecord
from transforms import ReadTarSamples, WriteDataset
from transforms.format.arguments import ArgumentError
from transforms.format.dead_letters import DatasetFailed
from transforms.recipe.accounting import Kind, Tally
from transforms.recipe.units import WorkUnit, unit_coverage_errors
from transforms.testing.corpus import write_corpus
from transforms.tft.preprocessing import Preprocessing
from transforms.verify.dataset import verify_dataset
from transforms.writer.ledger import (
    CHANGED,
    NEW,
    RETRIED,
    REUSE,
    RunFolder,
    UnitReceipt,
    reusable,
)
from transforms.writer.shard_files import ShardRecord

from published_tree import published_tree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["--features", "payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes",
         "--split_by", "json.speaker", "--splits", "train=0.5,eval=0.25,test=0.25",
         "--allow_empty_splits", "--shard_size_mb", "0.2",
         "--sample_fn", "tests.kill_switch:die_midway"]


@pytest.fixture
def corpus(tmp_path):
    """6 tar files of 10 samples (64 KiB payloads): 6 work units at 0.2 MiB."""
    root = tmp_path / "corpus"
    write_corpus(str(root), shards=6, samples_per_shard=10, payload_bytes=64 << 10, speakers=12)
    return root


def _args(corpus, output, *extra):
    return ["--input", f"{corpus}/*.tar", "--output", str(output), *FLAGS, *extra]


def _reuse_line(printed: str) -> tuple:
    reused, converted = re.search(r"resume: (\d+) work units reused, (\d+) converted",
                                  printed).groups()
    return int(reused), int(converted)


def test_a_killed_run_resumes_into_the_clean_runs_dataset(corpus, tmp_path):
    clean = tmp_path / "clean" / "ds"
    tar_to_tfrecord.run(_args(corpus, clean))
    output = tmp_path / "resumed" / "ds"
    killed = subprocess.run(
        [sys.executable, "-m", "pipelines.tar_to_tfrecord", *_args(corpus, output)],
        cwd=ROOT, env={**os.environ, "DATAGEN_KILL_AFTER": "35"}, capture_output=True)
    assert killed.returncode == -9
    # Killed in its fourth unit of ten samples: three receipts, no dataset.
    temp, = output.glob(".temp-datagen-*")
    assert len(list((temp / "units").glob("*.json"))) == 3
    assert not (output / "manifest.json").exists()

    resumed = subprocess.run(
        [sys.executable, "-m", "pipelines.tar_to_tfrecord", *_args(corpus, output, "--resume")],
        cwd=ROOT, capture_output=True, text=True, check=True)
    assert f"reusing 3 unit receipts of the unfinished run in {temp}" in resumed.stdout
    assert _reuse_line(resumed.stdout) == (3, 3)
    assert published_tree(output) == published_tree(clean)
    assert verify_dataset(str(output))[0] == []


def test_retry_failed_converts_again_only_the_units_that_failed(corpus, tmp_path, capsys):
    good = (corpus / "corpus-00002.tar").read_bytes()
    (corpus / "corpus-00002.tar").write_bytes(good[:len(good) // 2])  # a read cut short
    output = tmp_path / "retried" / "ds"
    first = tar_to_tfrecord.run(_args(corpus, output, "--max_failure_fraction", "0.5"))
    assert first["failures"]["count"] == 1

    (corpus / "corpus-00002.tar").write_bytes(good)  # the input is whole again
    capsys.readouterr()
    retried = tar_to_tfrecord.run(_args(corpus, output, "--max_failure_fraction", "0.5",
                                        "--retry_failed"))
    assert _reuse_line(capsys.readouterr().out) == (5, 1)
    assert retried["failures"]["count"] == 0
    clean = tmp_path / "clean" / "ds"
    clean_info = tar_to_tfrecord.run(_args(corpus, clean, "--max_failure_fraction", "0.5"))
    assert first["accounting"] != clean_info["accounting"]
    # Fewer shards at first: the retry renamed the reused ones in place (moved aside first).
    assert [s["file"] for s in first["splits"]["train"]["shards"]] != [
        s["file"] for s in clean_info["splits"]["train"]["shards"]]
    assert published_tree(output) == published_tree(clean)


def _edit_in_place(path) -> None:
    """One payload byte of the file's first .bin member changed: the tar stays
    valid, its size stays the same, and its mtime is set back as it was."""
    with tarfile.open(path) as tar:
        offset = next(m for m in tar.getmembers() if m.name.endswith(".bin")).offset_data
    before = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _published_then(corpus, tmp_path, capsys, change, flag):
    """A dataset published, an input changed by `change`, then rerun with `flag`:
    (the resume line's counts, the rerun's tree, a clean run's tree of the inputs now)."""
    output = tmp_path / "ds"
    tar_to_tfrecord.run(_args(corpus, output))
    change(corpus / "corpus-00003.tar")
    capsys.readouterr()
    tar_to_tfrecord.run(_args(corpus, output, flag))
    printed = capsys.readouterr().out
    clean = tmp_path / "clean" / "ds"
    tar_to_tfrecord.run(_args(corpus, clean))
    return printed, published_tree(output), published_tree(clean)


@pytest.mark.parametrize("flag", ["--resume", "--retry_failed"])
def test_an_input_edited_after_publishing_is_converted_again(corpus, tmp_path, capsys, flag):
    printed, rerun, clean = _published_then(corpus, tmp_path, capsys, _edit_in_place, flag)
    assert "resume: 5 work units reused, 1 converted (1 whose input files changed since " \
           "they were read)" in printed
    assert rerun == clean


def test_a_touched_input_is_converted_again_to_the_same_bytes(corpus, tmp_path, capsys):
    before = tmp_path / "before" / "ds"
    tar_to_tfrecord.run(_args(corpus, before))
    printed, rerun, clean = _published_then(corpus, tmp_path, capsys,
                                            lambda path: os.utime(path), "--resume")
    assert _reuse_line(printed) == (5, 1)
    assert rerun == clean
    assert {k: v for k, v in rerun.items() if k != "units.jsonl"} == {
        k: v for k, v in published_tree(before).items() if k != "units.jsonl"}


def test_resume_after_restoring_corrupt_inputs_gives_the_clean_dataset(corpus, tmp_path, capsys):
    good = {n: (corpus / n).read_bytes() for n in ("corpus-00001.tar", "corpus-00004.tar")}
    for name, data in good.items():
        (corpus / name).write_bytes(data[:len(data) // 3])
    output = tmp_path / "ds"
    with pytest.raises(DatasetFailed, match="not a readable tar archive|truncated"):
        tar_to_tfrecord.run(_args(corpus, output))
    for name, data in good.items():
        (corpus / name).write_bytes(data)
    capsys.readouterr()
    info = tar_to_tfrecord.run(_args(corpus, output, "--resume"))
    assert _reuse_line(capsys.readouterr().out) == (4, 2)
    assert info["failures"]["count"] == 0
    clean = tmp_path / "clean" / "ds"
    tar_to_tfrecord.run(_args(corpus, clean))
    assert published_tree(output) == published_tree(clean)


def test_a_run_failed_by_policy_is_published_by_resume(corpus, tmp_path, capsys):
    (corpus / "corpus-00004.tar").write_bytes((corpus / "corpus-00004.tar").read_bytes()[:9000])
    output = tmp_path / "ds"
    with pytest.raises(Exception, match="--resume with a higher --max_failure_fraction "
                                        "publishes this run's work"):
        tar_to_tfrecord.run(_args(corpus, output, "--max_failure_fraction", "0"))
    capsys.readouterr()
    info = tar_to_tfrecord.run(_args(corpus, output, "--max_failure_fraction", "0.5",
                                     "--resume"))
    assert _reuse_line(capsys.readouterr().out) == (6, 0)
    assert info["accounting"]["samples_read"] + info["accounting"]["files_failed"] < 60
    assert info["failures"]["count"] >= 1
    assert not list(output.glob(".temp-datagen-*"))
    assert verify_dataset(str(output))[0] == []


def test_resume_refuses_another_recipe_naming_the_flags(corpus, tmp_path):
    output = tmp_path / "ds"
    tar_to_tfrecord.run(_args(corpus, output))
    before = published_tree(output)
    with pytest.raises(ValueError, match=r"^--resume: .* was written by another recipe: "
                                         r"--shard_size_mb 0\.5 \(was 0\.2\); run without"):
        tar_to_tfrecord.run(_args(corpus, output, "--resume", "--shard_size_mb", "0.5"))
    assert published_tree(output) == before


def test_resume_of_a_published_dataset_changes_nothing(corpus, tmp_path, capsys):
    output = tmp_path / "ds"
    tar_to_tfrecord.run(_args(corpus, output))
    before = published_tree(output)
    capsys.readouterr()
    tar_to_tfrecord.run(_args(corpus, output, "--resume"))
    assert _reuse_line(capsys.readouterr().out) == (6, 0)
    assert published_tree(output) == before


@pytest.mark.parametrize("extra, message", [
    (["--retry_failed"], "holds no published dataset"),
    (["--resume", "--shuffle", "global"], "not with --shuffle 'global'"),
    (["--resume", "--normalize", "label=zscore"], "tf.Transform"),
])
def test_refusals_fail_before_any_work(corpus, tmp_path, extra, message):
    output = tmp_path / "ds"
    with pytest.raises(ValueError, match=message):
        tar_to_tfrecord.run(_args(corpus, output, *extra))
    assert not output.exists()


@pytest.mark.parametrize("keywords", [
    {"shuffle": "global"}, {"duplicates": "drop"},
    {"preprocessing": Preprocessing(normalize=(("label", "zscore"),))}])
def test_writedataset_refuses_to_reuse_work_where_the_whole_input_decides(corpus, tmp_path,
                                                                         keywords):
    """The Python way in: the same refusal as the command line's, naming `run`."""
    config = dataclasses.replace(WriteDataset(str(tmp_path / "ds"), features="label=cls:int64")
                                 .config, **keywords)
    earlier = RunFolder(str(tmp_path / "run"), reuse=(str(tmp_path / "run/units/*.json"),))
    with pytest.raises(ArgumentError, match="^run reuses the shards of work units"):
        WriteDataset(config, ReadTarSamples(f"{corpus}/*.tar").source, run=earlier)
    # The same run folder without earlier work to reuse is taken.
    WriteDataset(config, ReadTarSamples(f"{corpus}/*.tar").source,
                 run=RunFolder(str(tmp_path / "run")))


def _receipt(unit, span, inputs=("a.tar",), failed=0, versions=(("a.tar", "v1"),)):
    tallies = ((Tally(Kind.FAILED, "sample"), failed),) if failed else ()
    return UnitReceipt(unit, span, inputs, tallies,
                       (ShardRecord("train", (unit, 0), f"t{unit}{span}", 1, 1, "0"),), (),
                       versions)


def _unit(inputs=("a.tar",), versions=(("a.tar", "v1"),)):
    return WorkUnit(0, inputs, 1, versions)


def test_reusable_takes_one_origin_whole_and_only_for_the_same_inputs():
    whole = _receipt(0, None)
    assert reusable(_unit(), None, [(1, whole)], False) == (( whole,), REUSE, ())
    assert reusable(_unit(("b.tar",)), None, [(1, whole)], False) == (None, NEW, ())
    failed = _receipt(0, None, failed=1)
    assert reusable(_unit(), None, [(0, failed)], False).receipts == (failed,)
    assert reusable(_unit(), None, [(0, failed)], True) == (None, RETRIED, ())
    # The lower origin (an unfinished run) wins over the ledger.
    assert reusable(_unit(), None, [(1, whole), (0, failed)], False).receipts == (failed,)


def test_a_ledger_from_before_the_observers_is_not_reused(corpus, tmp_path, capsys):
    """Its receipts hold no observations for the dataset's checks (a field a
    fact then, and earlier no keys, nor any measures): every unit is
    converted again."""
    output = tmp_path / "ds"
    tar_to_tfrecord.run(_args(corpus, output))
    before = published_tree(output)
    ledger = output / "units.jsonl"
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    ledger.write_text("".join(json.dumps({**{k: v for k, v in line.items() if k != "observed"},
                                          **dict(line["observed"])}) + "\n" for line in lines))
    capsys.readouterr()
    tar_to_tfrecord.run(_args(corpus, output, "--resume"))
    assert _reuse_line(capsys.readouterr().out) == (0, 6)
    assert published_tree(output) == before


def test_reusable_only_while_the_inputs_read_the_same():
    old, new = _receipt(0, None), _receipt(0, None, versions=(("a.tar", "v2"),))
    assert reusable(_unit(versions=(("a.tar", "v2"),)), None, [(0, old)], False) == (
        None, CHANGED, (("a.tar", "v1", "v2"),))
    # A run that converted the changed file again left a receipt of each version.
    assert reusable(_unit(versions=(("a.tar", "v2"),)), None, [(0, old), (0, new)],
                    False).receipts == (new,)
    # A receipt from before versions were kept is never reused for a file with one.
    assert reusable(_unit(), None, [(0, _receipt(0, None, versions=()))], False).reason == CHANGED


def test_reusable_key_ranges_only_when_their_parts_tile_the_unit():
    unit = WorkUnit(3, (b"a", b"z"), 1)
    parts = [_receipt(3, (b"a", b"k"), unit.inputs, versions=()),
             _receipt(3, (b"k", b"z"), unit.inputs, versions=())]
    assert reusable(unit, unit.inputs, [(0, p) for p in parts], False).receipts == tuple(parts)
    assert reusable(unit, unit.inputs, [(0, parts[0])], False).receipts is None
    # Parts from two origins are never mixed.
    assert reusable(unit, unit.inputs, [(0, parts[0]), (1, parts[1])], False).receipts is None


def test_the_final_step_finds_units_lost_or_repeated():
    """Each planned unit is reported once, a key range's parts tiling it."""
    planned = {0: None, 1: (0, 10)}
    assert unit_coverage_errors(planned, [(0, None), (1, (0, 4)), (1, (4, 10))]) == []
    assert unit_coverage_errors(planned, [(1, (0, 10))]) == ["unit 0 reported 0 times, not once"]
    assert unit_coverage_errors(planned, [(0, None), (0, None), (1, (0, 10))]) == [
        "unit 0 reported 2 times, not once"]
    gap = unit_coverage_errors(planned, [(0, None), (1, (0, 4)), (1, (5, 10))])
    overlap = unit_coverage_errors(planned, [(0, None), (1, (0, 6)), (1, (4, 10))])
    assert [len(gap), len(overlap)] == [1, 1] and "do not cover it exactly once" in gap[0]
    assert unit_coverage_errors(planned, [(0, None), (1, (0, 10)), (2, None)]) == [
        "unit 2 was never planned"]

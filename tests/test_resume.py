"""--resume and --retry_failed: a rerun does only what an earlier run left undone,
and publishes the dataset a clean run makes, byte for byte."""

import json
import os
import re
import subprocess
import sys

import pytest

from pipelines import tar_to_tfrecord
from pipelines.verify import verify
from transforms.dataset.ledger import UnitReceipt, reusable
from transforms.dataset.tfrecord import ShardRecord
from transforms.testing.corpus import write_corpus

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


def _tree(folder) -> dict:
    """Every file under `folder`: path -> bytes; the manifest without its creation time."""
    tree = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}
    manifest = json.loads(tree.pop("manifest.json"))
    del manifest["created"]
    return {**tree, "manifest.json": manifest}


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
    assert _tree(output) == _tree(clean)
    assert verify(str(output))[0] == []


def test_retry_failed_converts_again_only_the_units_that_failed(corpus, tmp_path, capsys):
    clean = tmp_path / "clean" / "ds"
    tar_to_tfrecord.run(_args(corpus, clean))
    good = (corpus / "corpus-00002.tar").read_bytes()
    (corpus / "corpus-00002.tar").write_bytes(good[:len(good) // 2])  # a read cut short
    output = tmp_path / "retried" / "ds"
    first = tar_to_tfrecord.run(_args(corpus, output, "--max_failure_fraction", "0.5"))
    assert first["failures"]["count"] == 1
    clean_info = json.loads((clean / "manifest.json").read_text())
    assert first["accounting"] != clean_info["accounting"]
    # Fewer shards: the retry renames the reused ones in place (moved aside first).
    assert [s["file"] for s in first["splits"]["train"]["shards"]] != [
        s["file"] for s in clean_info["splits"]["train"]["shards"]]

    (corpus / "corpus-00002.tar").write_bytes(good)  # the input is whole again
    capsys.readouterr()
    retried = tar_to_tfrecord.run(_args(corpus, output, "--max_failure_fraction", "0.5",
                                        "--retry_failed"))
    assert _reuse_line(capsys.readouterr().out) == (5, 1)
    assert retried["failures"]["count"] == 0
    clean_tree = _tree(clean)
    clean_tree["manifest.json"]["options"]["max_failure_fraction"] = 0.5
    assert _tree(output) == clean_tree


def test_a_run_failed_by_policy_is_published_by_resume(corpus, tmp_path, capsys):
    (corpus / "corpus-00004.tar").write_bytes((corpus / "corpus-00004.tar").read_bytes()[:9000])
    output = tmp_path / "ds"
    with pytest.raises(Exception, match="--resume with a higher --max_failure_fraction publishes this run's work"):
        tar_to_tfrecord.run(_args(corpus, output, "--max_failure_fraction", "0"))
    capsys.readouterr()
    info = tar_to_tfrecord.run(_args(corpus, output, "--max_failure_fraction", "0.5",
                                     "--resume"))
    assert _reuse_line(capsys.readouterr().out) == (6, 0)
    assert info["accounting"]["samples_read"] + info["accounting"]["files_failed"] < 60
    assert info["failures"]["count"] >= 1
    assert not list(output.glob(".temp-datagen-*"))
    assert verify(str(output))[0] == []


def test_resume_refuses_another_recipe_naming_the_flags(corpus, tmp_path):
    output = tmp_path / "ds"
    tar_to_tfrecord.run(_args(corpus, output))
    before = _tree(output)
    with pytest.raises(ValueError, match=r"^--resume: .* was written by another recipe: "
                                         r"--shard_size_mb 0\.5 \(was 0\.2\); run without"):
        tar_to_tfrecord.run(_args(corpus, output, "--resume", "--shard_size_mb", "0.5"))
    assert _tree(output) == before


def test_resume_of_a_published_dataset_changes_nothing(corpus, tmp_path, capsys):
    output = tmp_path / "ds"
    tar_to_tfrecord.run(_args(corpus, output))
    before = _tree(output)
    capsys.readouterr()
    tar_to_tfrecord.run(_args(corpus, output, "--resume"))
    assert _reuse_line(capsys.readouterr().out) == (6, 0)
    assert _tree(output) == before


@pytest.mark.parametrize("extra, message", [
    (["--retry_failed"], "holds no published dataset"),
    (["--resume", "--shuffle", "global"], "not with --shuffle global"),
    (["--resume", "--normalize", "label=zscore"], "tf.Transform"),
])
def test_refusals_fail_before_any_work(corpus, tmp_path, extra, message):
    output = tmp_path / "ds"
    with pytest.raises(ValueError, match=message):
        tar_to_tfrecord.run(_args(corpus, output, *extra))
    assert not output.exists()


def _receipt(unit, span, inputs=("a.tar",), failed=0):
    return UnitReceipt(unit, span, inputs, ((("failed", "sample"), failed),) if failed else (),
                       (), (ShardRecord("train", (unit, 0), f"t{unit}{span}", 1, 1, "0"),), ())


def test_reusable_takes_one_origin_whole_and_only_for_the_same_inputs():
    whole = _receipt(0, None)
    assert reusable(("a.tar",), None, [(1, whole)], False) == (whole,)
    assert reusable(("b.tar",), None, [(1, whole)], False) is None  # the plan changed
    failed = _receipt(0, None, failed=1)
    assert reusable(("a.tar",), None, [(0, failed)], False) == (failed,)
    assert reusable(("a.tar",), None, [(0, failed)], True) is None
    # The lower origin (an unfinished run) wins over the ledger.
    assert reusable(("a.tar",), None, [(1, whole), (0, failed)], False) == (failed,)


def test_reusable_key_ranges_only_when_their_parts_tile_the_unit():
    unit = (b"a", b"z")
    parts = [_receipt(3, (b"a", b"k"), unit), _receipt(3, (b"k", b"z"), unit)]
    assert reusable(unit, unit, [(0, p) for p in parts], False) == tuple(parts)
    assert reusable(unit, unit, [(0, parts[0])], False) is None
    # Parts from two origins are never mixed.
    assert reusable(unit, unit, [(0, parts[0]), (1, parts[1])], False) is None

"""The tar pipeline with input and output on gs://, against gcp-storage-emulator.

The corpus (pipelines.sample_corpus: 3 shards x 8 samples, sample 0 with an
unparseable label) plus one archive cut in the middle of a member is made
locally and uploaded to the emulator's bucket. The same job runs on the local
copy and on gs://; what lands in the bucket must be what lands on disk: the
same shards byte for byte, the same manifest, the same dead letters (but for
their gs:// urls), and the reader reads it back from gs://.
"""

import json
import os
import shutil
import time

import apache_beam as beam
import pytest
import tensorflow as tf

import transforms as dg
from pipelines import tar_to_tfrecord
from transforms.format import manifest, reader, tfds_metadata
from transforms.format.shard_format import ShardFormat
from transforms.format.tf_paths import tf_readable
from transforms.storage.folders import ensure_dir
from transforms.testing.corpus import write_corpus
from transforms.verify.dataset import verify_dataset
from transforms.writer import finalise
from transforms.writer.commit import move_shards, name_shards
from transforms.writer.ledger import LEDGER
from transforms.writer.shard_files import write_shard

pytestmark = pytest.mark.slow  # jobs against the storage emulator

# 5 KB shards of 1 KB payloads: every file a unit, several shards per split.
FLAGS = ["--features", "payload=bin:bytes,label=cls:int64", "--split_by", "__key__:^([^_]+)",
         "--splits", "train=0.5,eval=0.25,test=0.25", "--shard_size_mb", "0.005",
         "--max_failure_fraction", "0.2", "--allow_empty_splits"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, gcs_emulator):
    """Local tar shards, the fourth cut in half (cut.tar), and the same files
    under gs://BUCKET/raw/."""
    root = tmp_path_factory.mktemp("corpus")
    paths = write_corpus(str(root), shards=4, samples_per_shard=8, payload_bytes=1024,
                         speakers=6, bad_samples=1)
    whole = open(paths[3], "rb").read()
    os.remove(paths[3])
    (root / "cut.tar").write_bytes(whole[: len(whole) // 2])  # ends inside a member
    for name in sorted(os.listdir(root)):
        gcs_emulator.upload(root / name, f"raw/{name}")
    return root


@pytest.fixture(scope="module")
def runs(corpus, gcs_emulator, tmp_path_factory):
    """(local output dir, its manifest, gs:// output url, its manifest)."""
    local = tmp_path_factory.mktemp("local") / "ds"
    local_info = tar_to_tfrecord.run(["--input", f"{corpus}/*.tar", "--output", str(local), *FLAGS])
    remote = gcs_emulator.url("out/ds")
    remote_info = tar_to_tfrecord.run(
        ["--input", gcs_emulator.url("raw/*.tar"), "--output", remote, *FLAGS])
    return local, local_info, remote, remote_info


def _local_files(root) -> dict:
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _, files in os.walk(root) for f in files}


# What a dataset holds besides its shards and their indexes.
_METADATA = {manifest.MANIFEST, manifest.SCHEMA, manifest.FAILURES_FILE, tfds_metadata.TFDS_INFO,
             tfds_metadata.TFDS_FEATURES, LEDGER}


def _without_run_details(info: dict) -> dict:
    # The fingerprint covers the source's path.
    return {k: v for k, v in info.items() if k not in ("created", "source", "recipe_fingerprint")}


def test_dataset_lands_in_the_bucket(runs, gcs_emulator):
    local, local_info, _, remote_info = runs
    in_bucket = gcs_emulator.objects("out/ds/")
    on_disk = _local_files(local)
    shards = {f for split in remote_info["splits"].values() for s in split["shards"]
              for f in (s["file"], s["index"]["file"])}
    # Exactly the dataset: no temp folder, no stray object.
    assert set(in_bucket) == shards | _METADATA
    assert set(in_bucket) == set(on_disk)
    assert {name: in_bucket[name] for name in shards} == {name: on_disk[name] for name in shards}
    assert json.loads(in_bucket[manifest.MANIFEST]) == remote_info
    assert _without_run_details(remote_info) == _without_run_details(local_info)
    assert remote_info["source"]["input"] == gcs_emulator.url("raw/*.tar")
    assert in_bucket[manifest.SCHEMA] == on_disk[manifest.SCHEMA]


def test_dead_letters_land_in_the_bucket(runs, gcs_emulator, corpus):
    local, _, _, remote_info = runs
    remote = [json.loads(line) for line in
              gcs_emulator.objects("out/ds/")[manifest.FAILURES_FILE].decode().splitlines()]
    on_disk = [json.loads(line) for line in
               (local / manifest.FAILURES_FILE).read_text().splitlines()]
    # The unparseable label and the sample the cut archive broke off.
    assert {(r["stage"], r["key"]) for r in remote} == {
        ("encode", "spk00_00000"), ("read_tar", "spk04_00028")}
    assert {r["url"] for r in remote} == {gcs_emulator.url("raw/corpus-00000.tar"),
                                          gcs_emulator.url("raw/cut.tar")}
    for record in on_disk:
        record["url"] = record["url"].replace(f"{corpus}/", gcs_emulator.url("raw/"))
    assert sorted(remote, key=json.dumps) == sorted(on_disk, key=json.dumps)
    assert remote_info["failures"] == {"count": 2, "file": manifest.FAILURES_FILE}


def test_reader_reads_back_from_gs(runs):
    local, local_info, remote, _ = runs
    for split, entry in local_info["splits"].items():
        from_gs = [(ex["payload"].numpy(), int(ex["label"]))
                   for ex in reader.load(remote, split, batch_size=None)]
        assert len(from_gs) == entry["num_examples"]
        assert from_gs == [(ex["payload"].numpy(), int(ex["label"]))
                           for ex in reader.load(str(local), split, batch_size=None)]


def test_verify_reads_a_dataset_in_the_bucket(runs, gcs_emulator, tmp_path):
    """pipelines.verify as a Beam job on gs://; then on a copy with one shard byte flipped."""
    _, _, remote, remote_info = runs
    problems, summary = verify_dataset(remote, media_samples=1000)
    examples = sum(s["num_examples"] for s in remote_info["splits"].values())
    assert problems == [] and f": {examples} examples in " in summary
    shard = remote_info["splits"]["train"]["shards"][0]
    for name, data in gcs_emulator.objects("out/ds/").items():
        if name == shard["file"]:
            data = data[:-1] + bytes([data[-1] ^ 1])  # the last record's CRC
        (tmp_path / "object").write_bytes(data)
        gcs_emulator.upload(tmp_path / "object", f"out/flipped/{name}")
    problems, _ = verify_dataset(gcs_emulator.url("out/flipped"))
    assert len(problems) == 2 and problems[0].endswith(": fails its CRC")
    assert problems[1].startswith(f"{shard['file']}: its CRC32C is ")


def test_resume_converts_again_an_object_rewritten_since(corpus, gcs_emulator, capsys):
    """A new generation of an input object, even of the same size, is not the
    object a receipt was made from: --resume converts its unit again."""
    names = ["corpus-00000.tar", "corpus-00001.tar", "corpus-00002.tar"]
    for name in names:
        gcs_emulator.upload(corpus / name, f"resume/{name}")
    args = ["--input", gcs_emulator.url("resume/*.tar"), "--output",
            gcs_emulator.url("resume_out/ds"), *FLAGS]
    tar_to_tfrecord.run(args)
    edited = bytearray((corpus / names[1]).read_bytes())
    edited[1024] ^= 0xFF  # a payload byte of the first member
    gcs_emulator.bucket().blob(f"resume/{names[1]}").upload_from_string(bytes(edited))
    capsys.readouterr()
    tar_to_tfrecord.run([*args, "--resume"])
    assert ("resume: 2 work units reused, 1 converted (1 whose input files changed since "
            "they were read)") in capsys.readouterr().out


def test_an_output_in_no_bucket_is_refused_before_any_work_on_every_way_in(corpus, gcs_emulator,
                                                                          tmp_path):
    """gs://nope/x: the job, a Source's and a PCollection's WriteDataset each
    refuse it in one line naming it, at once (a Source's retried for minutes
    before, and named no output)."""
    nowhere = "gs://datagen-no-such-bucket/x"
    started = time.monotonic()
    with pytest.raises(ValueError, match=f"^--output '{nowhere}' is not writable: "):
        tar_to_tfrecord.run(["--input", f"{corpus}/*.tar", "--output", nowhere, *FLAGS])
    read = dg.ReadTarSamples(f"{corpus}/*.tar")
    for make in (lambda p: p | dg.WriteDataset(nowhere, read.source, features="cls:int64"),
                 lambda p: (p | beam.Create([{"cls": 1}])
                            | dg.WriteDataset(nowhere, features="cls:int64"))):
        with pytest.raises(ValueError, match=f"^output '{nowhere}' is not writable: "):
            make(dg.make_pipeline())
    assert time.monotonic() - started < 20


def test_missing_dataset_on_gs_is_a_clear_error(gcs_emulator):
    with pytest.raises(FileNotFoundError, match="out/nothing/manifest.json not found"):
        reader.load_info(gcs_emulator.url("out/nothing"))


def test_rerun_into_the_same_bucket_path_leaves_only_the_new_shards(corpus, gcs_emulator):
    output = gcs_emulator.url("out/rerun")
    first = tar_to_tfrecord.run(["--input", gcs_emulator.url("raw/*.tar"), "--output", output,
                                 *FLAGS])
    assert len(first["splits"]["train"]["shards"]) > 1
    flags = [f if f != "0.005" else "128" for f in FLAGS]  # one unit: a shard per split
    info = tar_to_tfrecord.run(["--input", gcs_emulator.url("raw/*.tar"), "--output", output,
                                *flags])
    shards = {s["file"] for split in info["splits"].values() for s in split["shards"]}
    assert all(name.endswith("-of-00001.tfrecord") for name in shards)
    assert set(gcs_emulator.objects("out/rerun/")) == shards | _METADATA | {
        f"{name}.idx" for name in shards}


def test_a_rerun_failing_while_it_replaces_files_unpublishes_the_old_dataset(
        corpus, gcs_emulator, monkeypatch):
    output = gcs_emulator.url("out/failing")
    tar_to_tfrecord.run(["--input", gcs_emulator.url("raw/*.tar"), "--output", output, *FLAGS])
    assert manifest.MANIFEST in gcs_emulator.objects("out/failing/")

    def fail(*_):
        raise IOError("the store went away mid-commit")

    monkeypatch.setattr(finalise, "move_shards", fail)
    with pytest.raises(Exception, match="mid-commit"):
        tar_to_tfrecord.run(["--input", gcs_emulator.url("raw/*.tar"), "--output", output, *FLAGS])
    # Old shards may be half replaced: without a manifest, no reader takes them.
    assert manifest.MANIFEST not in gcs_emulator.objects("out/failing/")


def _temp_shards(temp_dir: str) -> list:
    shards = []
    for split, part in (("train", 0), ("train", 1), ("eval", 0)):
        temp = f"{temp_dir}/{split}-{part}.tfrecord"
        record = f"{split}{part}".encode()
        shards.append(write_shard(temp, [record], ShardFormat(), split, (0, part)))
    return shards


@pytest.mark.parametrize("where", ["local", "gs"])
def test_moves_survive_a_retry_after_failing_partway(where, gcs_emulator, tmp_path):
    """A runner retries a batch of moves that failed: a GCS rename is a copy and a
    delete per shard, so a retry finds some shards moved and some not."""
    output = str(tmp_path / "out") if where == "local" else gcs_emulator.url("commit/out")
    named = name_shards(_temp_shards(f"{output}/.temp"), ShardFormat())
    for split in ("train", "eval"):
        ensure_dir(f"{output}/{split}")
    moves = [pair for n in named for pair in n.moves(output)]
    move_shards(moves[:1])  # the first attempt moved one shard, then failed
    move_shards(moves)
    move_shards(moves)
    assert [n.file for n in named] == ["eval/data-00000-of-00001.tfrecord",
                                       "train/data-00000-of-00002.tfrecord",
                                       "train/data-00001-of-00002.tfrecord"]
    for n, split_part in zip(named, ("eval0", "train0", "train1")):
        final = f"{output}/{n.file}"
        assert [r.numpy() for r in tf.data.TFRecordDataset(tf_readable(final))] == [
            split_part.encode()]
        with tf.io.gfile.GFile(tf_readable(f"{output}/{n.index_file}")) as f:
            assert f.read() == f"0 {len(split_part) + 16}\n"
    # A shard gone from both places is an error, not a silently smaller dataset.
    with pytest.raises(IOError, match="eval/data-00001-of-00002"):
        move_shards([(f"{output}/.temp/gone.tfrecord",
                      f"{output}/eval/data-00001-of-00002.tfrecord")])
    if where == "local":
        shutil.rmtree(output)


def test_publishing_the_transform_survives_a_retry(tmp_path):
    """The final step moves the staged transform next to the data before it commits
    the shards; when a later part of it fails (a shard rename, the manifest write)
    the runner runs it again, and the staged directories are gone by then."""
    from transforms.format.spec import parse_features
    from transforms.tft.preprocessing import TRANSFORM_FN_DIR, TRANSFORMED_METADATA_DIR
    from transforms.tft.stage import publish

    staged, output = tmp_path / "temp" / "transform", tmp_path / "out"
    for name in (f"{TRANSFORM_FN_DIR}/saved_model.pb", f"{TRANSFORMED_METADATA_DIR}/schema.pbtxt"):
        (staged / name).parent.mkdir(parents=True, exist_ok=True)
        (staged / name).write_bytes(b"this run's")
    (output / TRANSFORM_FN_DIR).mkdir(parents=True)
    (output / TRANSFORM_FN_DIR / "old.pb").write_bytes(b"an earlier run's")
    spec = parse_features("label:int64")
    publish(str(staged), str(output), spec)
    published = _local_files(output)
    publish(str(staged), str(output), spec)  # the retry, temp folder still there
    shutil.rmtree(tmp_path / "temp")
    publish(str(staged), str(output), spec)  # the retry, temp folder removed
    assert _local_files(output) == published
    assert published[f"{TRANSFORM_FN_DIR}/saved_model.pb"] == b"this run's"
    assert f"{TRANSFORM_FN_DIR}/old.pb" not in published

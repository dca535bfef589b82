"""Hostile inputs through the whole pipeline: nothing wrong is written, every bad
input is a dead letter naming it, the job goes on, and the totals add up.

The inputs are made by real producers - tarfile, the gzip/bz2/lzma modules,
os.mkfifo - and damaged the way storage and people damage them: a flipped
byte, a cut upload, names in no UTF-8, a FIFO among the shards, JSON values of
the wrong kind, one huge member, an output that cannot be written.
"""

import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import random
import re
import signal
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest
import soundfile

from benchmarks.process_tree import measure
from pipelines import manifest_to_tfrecord, tar_to_tfrecord
from transforms.format import reader
from transforms.format.manifest import DatasetInfo

FEATURES = "payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes"
_PACK = {".tar.gz": gzip.compress, ".tar.bz2": bz2.compress, ".tar.xz": lzma.compress}


def _payload(key: str) -> bytes:
    """Random bytes: deflate stores them as they are, so a flipped byte inflates
    to a changed payload without any error - only a checksum can tell."""
    return random.Random(key.encode("utf-8", "surrogateescape")).randbytes(3000)


def _media_payload(key: str) -> bytes:
    """A payload a listing's media column may name (its file must be media): a
    WAV, written by libsndfile, of the random bytes as 16-bit samples."""
    out = io.BytesIO()
    soundfile.write(out, np.frombuffer(_payload(key), np.int16), 16000, format="WAV")
    return out.getvalue()


def _tar(samples, encoding_errors="surrogateescape") -> bytes:
    """A tar of (key, speaker JSON text) samples: key.bin, key.cls, key.json."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT,
                      errors=encoding_errors) as tar:
        for key, meta in samples:
            for ext, data in (("bin", _payload(key)), ("cls", b"1"), ("json", meta)):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _samples(prefix: str, n: int = 6):
    return [(f"{prefix}{i:02d}", json.dumps({"speaker": f"s{i % 3}"}).encode())
            for i in range(n)]


def _run(inputs, output, *extra):
    return tar_to_tfrecord.run(["--input", inputs, "--output", str(output),
                                "--features", FEATURES, "--split_by", "json.speaker",
                                "--splits", "train=1",
                                "--max_failure_fraction", "0.9", *extra])


def _written(output, info) -> dict:
    """payload -> speaker of every example, read back with the project's reader."""
    return {ex["payload"].numpy(): ex["speaker"].numpy()
            for split in info["splits"]
            for ex in reader.load(str(output), split, batch_size=None)}


def _dead_letters(output) -> list:
    path = output / "failures" / "failures.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _assert_totals_add_up(info, failures):
    a = info["accounting"]
    assert a["samples_read"] == a["samples_written"] + a["samples_filtered"] + a["samples_failed"]
    assert a["samples_failed"] + a["files_failed"] == len(failures)


# -- checksums ------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", sorted(_PACK))
def test_a_compressed_tar_failing_its_checksum_gives_no_example(suffix, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "good.tar").write_bytes(_tar(_samples("good")))
    flipped = bytearray(_PACK[suffix](_tar(_samples("flip"))))
    flipped[len(flipped) // 2] ^= 0x01
    (corpus / f"flipped{suffix}").write_bytes(bytes(flipped))
    packed = _PACK[suffix](_tar(_samples("cut")))
    (corpus / f"cut{suffix}").write_bytes(packed[:-20])
    (corpus / f"whole{suffix}").write_bytes(_PACK[suffix](_tar(_samples("whole"))))

    info = _run(f"{corpus}/*", tmp_path / "out")
    written = _written(tmp_path / "out", info)
    failures = _dead_letters(tmp_path / "out")
    # Only the good and the whole archives' payloads, each exactly as packed.
    assert sorted(written) == sorted(_payload(k) for k, _ in _samples("good") + _samples("whole"))
    assert sorted((f["url"].rsplit("/", 1)[1], f["unit"], f["error_type"]) for f in failures) == [
        (f"cut{suffix}", "file", "StreamCorrupt"), (f"flipped{suffix}", "file", "StreamCorrupt")]
    _assert_totals_add_up(info, failures)


def test_a_compressed_listing_failing_its_checksum_gives_no_row(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    rows = ["audio,speaker"]
    for i in range(8):
        (media / f"clip{i}.bin").write_bytes(_media_payload(f"clip{i}"))
        rows.append(f"../media/clip{i}.bin,s{i % 3}")
    text = ("\n".join(rows) + "\n").encode()
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "a.csv").write_bytes(text)
    flipped = bytearray(gzip.compress(text))
    flipped[len(flipped) // 2] ^= 0x01
    (lists / "b.csv.gz").write_bytes(bytes(flipped))
    (lists / "c.csv.bz2").write_bytes(bz2.compress(text)[:-8])  # cut: Beam reads it as short

    info = manifest_to_tfrecord.run([
        "--input", f"{lists}/*", "--output", str(tmp_path / "out"), "--media_columns", "audio",
        "--media_root", str(media),
        "--features", "payload=audio:bytes,speaker:bytes", "--split_by", "speaker",
        "--splits", "train=1", "--max_failure_fraction", "0.9"])
    failures = _dead_letters(tmp_path / "out")
    assert sorted((f["url"].rsplit("/", 1)[1], f["unit"]) for f in failures) == [
        ("b.csv.gz", "file"), ("c.csv.bz2", "file")]
    assert info["accounting"]["samples_written"] == 8  # a.csv's rows, each once
    _assert_totals_add_up(info, failures)


# -- names ------------------------------------------------------------------------------

def test_names_in_no_utf8_are_dead_letters_recorded_losslessly(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    latin1 = b"caf\xe9".decode("utf-8", "surrogateescape")  # what tarfile and os.listdir give
    (corpus / "a.tar").write_bytes(_tar(_samples("ok") + [(latin1, b'{"speaker": "s9"}')]))
    bad_file = os.fsencode(corpus) + b"/caf\xe9.tar"
    with open(bad_file, "wb") as f:
        f.write(_tar(_samples("other")))

    info = _run(f"{corpus}/*", tmp_path / "out")
    failures = _dead_letters(tmp_path / "out")
    by_unit = {f["unit"]: f for f in failures}
    assert sorted(by_unit) == ["file", "sample"] and len(failures) == 2
    member = by_unit["sample"]
    assert (member["key"], member["member"], member["escaped"]) == (
        "caf\\xe9", "caf\\xe9.bin", ["key", "member"])
    assert "not UTF-8" in member["message"]
    # The escaped text gives the original bytes back.
    assert codecs.escape_decode(member["member"].encode())[0] == b"caf\xe9.bin"
    file = by_unit["file"]
    assert file["escaped"] == ["url"]
    assert codecs.escape_decode(file["url"].encode())[0] == bad_file
    expected = sorted(_payload(k) for k, _ in _samples("ok"))
    assert sorted(_written(tmp_path / "out", info)) == expected
    _assert_totals_add_up(info, failures)


def test_a_fifo_matched_by_input_is_refused_before_any_work(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.tar").write_bytes(_tar(_samples("ok")))
    os.mkfifo(corpus / "b.tar")
    with pytest.raises(ValueError, match=r"matches .*/b\.tar, a FIFO, not a regular file"):
        _run(f"{corpus}/*.tar", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_fifo_named_by_a_listing_row_is_a_dead_letter(tmp_path):
    (tmp_path / "clip.bin").write_bytes(_media_payload("clip"))
    os.mkfifo(tmp_path / "pipe.bin")
    (tmp_path / "rows.csv").write_text("audio,speaker\nclip.bin,s1\npipe.bin,s2\n/dev/zero,s3\n")
    info = manifest_to_tfrecord.run([
        "--input", str(tmp_path / "rows.csv"), "--output", str(tmp_path / "out"),
        "--media_columns", "audio", "--media_root", "/dev",   # so /dev/zero is opened, and refused
        "--features", "payload=audio:bytes,speaker:bytes",
        "--split_by", "speaker", "--splits", "train=1", "--max_failure_fraction", "0.9"])
    failures = _dead_letters(tmp_path / "out")
    assert sorted((f["member"], f["stage"]) for f in failures) == [
        ("/dev/zero", "read_media"), (str(tmp_path / "pipe.bin"), "read_media")]
    assert any("a FIFO, not a regular file" in f["message"] for f in failures)
    assert list(_written(tmp_path / "out", info)) == [_media_payload("clip")]
    _assert_totals_add_up(info, failures)


# -- JSON values --------------------------------------------------------------------------

def test_json_values_follow_the_rules_in_the_pipeline(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    metas = {"null": b'{"speaker": null}', "true": b'{"speaker": true}',
             "object": b'{"speaker": {"name": "x"}}', "list": b'{"speaker": ["a", ["b"]]}',
             "number": b'{"speaker": 7}'}
    (corpus / "a.tar").write_bytes(_tar(list(metas.items())))
    # The split key is a bytes feature's text as well: a null has none.
    info = _run(f"{corpus}/*", tmp_path / "out")
    written = {payload: speaker for payload, speaker in _written(tmp_path / "out", info).items()}
    assert written == {_payload("true"): b"true", _payload("object"): b'{"name": "x"}',
                       _payload("number"): b"7"}
    failures = {f["key"]: f for f in _dead_letters(tmp_path / "out")}
    assert sorted(failures) == ["list", "null"]
    assert "null" in failures["null"]["message"]
    _assert_totals_add_up(info, list(failures.values()))


def test_json_that_cannot_be_read_fails_its_sample_at_every_step(tmp_path):
    """Invalid or absurdly nested JSON, read by --where, the split key and a feature."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    metas = {"ok": b'{"speaker": "s1", "lang": "en"}', "invalid": b'{"speaker": ',
             "deep": b'{"speaker": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"}
    (corpus / "a.tar").write_bytes(_tar(list(metas.items())))
    for flags in ([], ["--where", "json.lang=en"]):
        output = tmp_path / f"out{len(flags)}"
        info = _run(f"{corpus}/*", output, *flags)
        assert list(_written(output, info)) == [_payload("ok")]
        failures = {f["key"]: f for f in _dead_letters(output)}
        assert sorted(failures) == ["deep", "invalid"]
        assert "nested too deeply" in failures["deep"]["message"]
        _assert_totals_add_up(info, list(failures.values()))


# -- the output -----------------------------------------------------------------------------

def test_an_unwritable_output_fails_before_any_work_in_one_line(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.tar").write_bytes(_tar(_samples("ok")))
    (tmp_path / "file").write_text("a regular file")
    with pytest.raises(ValueError) as error:
        _run(f"{corpus}/*", tmp_path / "file" / "out")
    assert str(error.value).startswith(f"--output '{tmp_path}/file/out' is not writable: ")
    assert "\n" not in str(error.value)


def test_an_unwritable_gcs_output_fails_before_any_work(tmp_path, gcs_emulator):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.tar").write_bytes(_tar(_samples("ok")))
    with pytest.raises(ValueError, match=r"^--output 'gs://no-such-bucket/out' is not writable"):
        _run(f"{corpus}/*", "gs://no-such-bucket/out")


def _tree(folder) -> dict:
    """Every file under `folder` but the runs' temporary folders: path -> bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.relative_to(folder).parts[0].startswith(".temp-datagen-")}


def _failed_run(inputs, output, *extra) -> str:
    """Runs with no failure allowed; the path of the dead letters its error names."""
    with pytest.raises(Exception, match="max_failure_fraction") as failed:
        _run(inputs, output, "--max_failure_fraction", "0", *extra)
    return re.search(r"dead letters in (\S+\.jsonl)", str(failed.value)).group(1)


@pytest.fixture
def one_bad_sample(tmp_path):
    """A tar of 6 good samples and one whose speaker is null."""
    (tmp_path / "a.tar").write_bytes(_tar(_samples("ok") + [("bad", b'{"speaker": null}')]))
    return str(tmp_path / "a.tar")


def test_a_failed_run_publishes_nothing_and_keeps_its_dead_letters(one_bad_sample, tmp_path):
    output = tmp_path / "strict"
    dead_letters = _failed_run(one_bad_sample, output)
    assert [json.loads(line)["key"] for line in open(dead_letters)] == ["bad"]
    assert _tree(output) == {}


def test_a_failed_run_leaves_a_finished_dataset_exactly_as_it_was(one_bad_sample, tmp_path):
    output = tmp_path / "out"
    _failed_run(one_bad_sample, output)
    _run(one_bad_sample, output)
    # The successful run removed the failed one's temporary folder.
    assert not list(output.glob(".temp*"))
    finished = _tree(output)
    assert "manifest.json" in finished and "failures/failures.jsonl" in finished
    # Every sample fails this time: other dead letters, which must not replace the
    # dataset's own.
    dead_letters = _failed_run(one_bad_sample, output, "--features", FEATURES + ",json.no:int64")
    assert _tree(output) == finished
    assert dead_letters.startswith(str(output / ".temp-datagen-"))
    assert len(open(dead_letters).readlines()) == 7


@pytest.mark.slow
def test_a_killed_run_leaves_the_dataset_whole_and_the_next_run_clears_its_debris(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for shard in range(8):  # 8 x 12 MiB: seconds of writing to kill the job in
        (corpus / f"s{shard}.tar").write_bytes(_tar(_samples(f"k{shard}_", 4000)))
    output = tmp_path / "out"
    _run(f"{corpus}/s0.tar", output)
    finished = _tree(output)
    job = subprocess.Popen(
        [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", f"{corpus}/*.tar",
         "--output", str(output), "--features", FEATURES, "--split_by", "json.speaker",
         "--splits", "train=1", "--shard_size_mb", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list(output.glob(".temp-datagen-*/*.tfrecord")):
            assert job.poll() is None and time.monotonic() < deadline, "no shard to kill it at"
            time.sleep(0.05)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    assert list(output.glob(".temp-datagen-*/*"))  # it was killed mid-write
    assert _tree(output) == finished                # and the dataset is as it was
    info = _run(f"{corpus}/s0.tar", output)
    assert not list(output.glob(".temp-datagen-*"))
    assert {str(p.relative_to(output)) for p in output.glob("*/data-*")} == (
        DatasetInfo(info).stored_files())


# -- memory ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_huge_member_costs_at_most_three_times_its_size(tmp_path):
    """Peak PSS of the whole job over a corpus with one 64 MiB member, against
    the same job over the corpus without it (PSS: see test_stored_members'
    memory test)."""
    member = 64 << 20
    runs = {}
    for name, sizes in (("small", [1000] * 3), ("huge", [1000, member, 1000])):
        folder = tmp_path / name
        folder.mkdir()
        with tarfile.open(folder / "a.tar.gz", "w:gz", compresslevel=1) as tar:
            for i, size in enumerate(sizes):
                for ext, data in (("bin", np.random.default_rng(i).bytes(size)), ("cls", b"1")):
                    info = tarfile.TarInfo(f"k{i}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        runs[name] = measure([sys.executable, "-m", "pipelines.tar_to_tfrecord",
                              "--input", str(folder / "a.tar.gz"),
                              "--output", str(tmp_path / f"out_{name}"),
                              "--features", "payload=bin:bytes,label=cls:int64",
                              "--splits", "train=1"], pss_interval_s=0.05)
        assert "3 examples written" in runs[name].output, runs[name].output[-2000:]
    extra = runs["huge"].peak_pss - runs["small"].peak_pss
    assert extra <= 3 * member, f"a {member >> 20} MiB member cost {extra >> 20} MiB"

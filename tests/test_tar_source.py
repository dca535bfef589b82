"""Tests for transforms/sources/tar.py: tar shards -> Samples, nothing lost.

Fixtures are generated per test under tmp_path:
- a small tree `corpus/…` of sample files (one key with a member name over
  100 characters), packed by webdataset's TarWriter and by GNU tar
  (`--format=gnu`: ././@LongLink records; `--format=pax`: PaxHeaders records;
  `-C dir .`: `./`-prefixed names), all with `--sort=name` so a key's members
  are consecutive;
- broken archives cut out of a valid one built with Python's tarfile;
- a 2000-member archive generated on the fly, never held in memory.
"""

import bz2
import collections
import gzip
import io
import lzma
import os
import pickle
import random
import shutil
import subprocess
import tarfile
import tracemalloc

import apache_beam as beam
import pytest
import webdataset
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from transforms.format.dead_letters import FILE, SAMPLE
from transforms.format.sample import KEY, URL, data_fields
from transforms.recipe.units import Failed, Source, WorkUnit
from transforms.sources.file_match import match_files
from transforms.sources.input_files import StorageReadError
from transforms.sources.tar import ReadTarSamples, TarReader, plan_tar_units
from transforms.sources.tar_stream import Skipped, iter_tar
from transforms.sources.units import ReadUnits

LONG_KEY = "corpus/long_" + "x" * 100  # member names over 100 characters

# key -> {extension: bytes}: what every producer below must give back.
EXPECTED = {
    "corpus/spk1_0001": {"flac": b"fLaC" + bytes(range(256)) * 3, "cls": b"3",
                         "json": b'{"speaker": "spk1"}'},
    "corpus/spk1_0002": {"flac": b"fLaC" + b"\x00\xff" * 700, "cls": b"5"},
    LONG_KEY: {"flac": b"fLaC long", "cls": b"7"},
}

needs_gnu_tar = pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar not installed")


def _write_tree(root):
    """root/corpus/<key>.<ext> files for EXPECTED."""
    for key, fields in EXPECTED.items():
        for ext, data in fields.items():
            path = root / f"{key}.{ext}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return root


def _gnu_tar(out, root, *members, options=()):
    # GNU tar, sorted so a key's members are adjacent whatever readdir says.
    subprocess.run(["tar", "--sort=name", *options, "-cf", str(out), "-C", str(root), *members],
                   check=True)
    return out


def _wds_tar(out):
    # webdataset's own writer; PAX because a ustar header cannot hold LONG_KEY.
    with webdataset.TarWriter(str(out), encoder=False, format="PAX_FORMAT") as sink:
        for key, fields in EXPECTED.items():
            sink.write({"__key__": key, **fields})
    return out


def _py_tar(members, fmt=tarfile.GNU_FORMAT) -> bytes:
    """An uncompressed tar of (name, bytes) regular files, built with tarfile."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
            else:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data or b""))
    return buf.getvalue()


def _read(data: bytes, url="mem://x.tar"):
    """iter_tar over bytes -> (samples, skip reasons Counter, failures, stats)."""
    samples, skipped, failures = [], collections.Counter(), []
    stats = collections.Counter()
    for item in iter_tar(io.BytesIO(data), url, stats=stats, reopen=lambda: io.BytesIO(data)):
        if isinstance(item, Skipped):
            skipped[item.reason] += 1
        elif isinstance(item, Failed):
            failures.append(item.record)
        else:
            samples.append(item)
    return samples, skipped, failures, stats


def _by_key(samples):
    return {s[KEY]: {f: s[f] for f in data_fields(s)} for s in samples}


def _counter(result, name):
    found = result.metrics().query(
        MetricsFilter().with_namespace("datagen").with_name(name))["counters"]
    return sum(c.committed for c in found)


# --- producers agree ---------------------------------------------------------

@pytest.fixture
def tree(tmp_path):
    return _write_tree(tmp_path / "tree")


@needs_gnu_tar
@pytest.mark.parametrize("producer", ["webdataset", "gnu", "pax", "gnu_dot"])
def test_producers_give_identical_samples(tmp_path, tree, producer):
    out = tmp_path / f"{producer}.tar"
    if producer == "webdataset":
        _wds_tar(out)
    elif producer == "gnu":
        _gnu_tar(out, tree, "corpus", options=["--format=gnu"])
        assert b"././@LongLink" in out.read_bytes()  # the long name took the GNU route
    elif producer == "pax":
        _gnu_tar(out, tree, "corpus", options=["--format=pax"])
        assert b"PaxHeaders" in out.read_bytes()
    else:
        _gnu_tar(out, tree, ".", options=["--format=gnu"])
        with tarfile.open(out) as tar:
            assert "./corpus/spk1_0001.flac" in tar.getnames()

    with open(out, "rb") as f:
        samples, skipped, failures, stats = _read(f.read(), url=str(out))

    assert failures == []
    assert _by_key(samples) == EXPECTED
    assert all(s[URL] == str(out) for s in samples)
    assert set(skipped) <= {"directory"}  # GNU tar also stores "corpus/" (and "./")
    assert stats["bytes"] == sum(len(v) for f in EXPECTED.values() for v in f.values())


@needs_gnu_tar
@pytest.mark.parametrize("suffix", [".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"])
def test_compressed_archives_read_like_plain_tar(tmp_path, tree, suffix):
    plain = _gnu_tar(tmp_path / "plain.tar", tree, "corpus").read_bytes()
    out = tmp_path / f"shard{suffix}"
    if suffix == ".tgz":
        _gnu_tar(out, tree, "corpus", options=["-z"])  # compressed by tar itself
    else:
        compress = {".tar.gz": gzip.compress, ".tar.bz2": bz2.compress, ".tar.xz": lzma.compress}
        out.write_bytes(compress[suffix](plain))
    samples, _, failures, _ = _read(out.read_bytes())
    assert failures == []
    assert _by_key(samples) == _by_key(_read(plain)[0]) == EXPECTED


# --- grouping rules ------------------------------------------------------------

def test_webdataset_grouping_rules():
    data = _py_tar([
        ("a.flac", b"1"), ("a.CLS", b"2"),           # extension lower-cased
        ("b.seg.json", b"3"), ("b.flac", b"4"),      # extension = all after the first dot
        ("__meta__", b"m"),                          # WebDataset meta member: skipped
        ("corpus.v1/c.flac", b"5"),                  # dots in directories are not extensions
        ("./corpus.v1/c.cls", b"6"),                 # "./" stripped: same key as above
        ("README", b"no dot"),                       # no extension: skipped
        ("d.flac", b"7"),
    ])
    samples, skipped, failures, stats = _read(data, url="u")
    assert failures == []
    assert _by_key(samples) == {
        "a": {"flac": b"1", "cls": b"2"},
        "b": {"seg.json": b"3", "flac": b"4"},
        "corpus.v1/c": {"flac": b"5", "cls": b"6"},
        "d": {"flac": b"7"},
    }
    assert skipped == {"meta": 1, "no_extension": 1}
    assert stats["members"] == 9
    # Each sample is a fresh dict carrying its origin.
    assert [s[URL] for s in samples] == ["u"] * 4


def test_duplicate_extension_fails_that_sample_only():
    data = _py_tar([
        ("a.flac", b"1"), ("a.cls", b"2"),
        ("b.flac", b"3"), ("b.cls", b"4"), ("b.CLS", b"5"), ("b.json", b"6"),
        ("c.flac", b"7"),
    ])
    samples, _, failures, stats = _read(data, url="u.tar")
    assert _by_key(samples) == {"a": {"flac": b"1", "cls": b"2"}, "c": {"flac": b"7"}}
    assert len(failures) == 1
    failure = failures[0]
    assert tuple(failure[k] for k in ("unit", "stage", "url", "key", "member")) == (
        SAMPLE, "read_tar", "u.tar", "b", "b.CLS")
    assert "duplicate" in failure["message"] and "'cls'" in failure["message"]
    assert stats["members"] == 7  # the rest of the failed sample was still read past


# --- broken input --------------------------------------------------------------

# Three samples a, b, c of two members each (flac: 1500 seeded random bytes, so
# gzip cannot squeeze it to nothing; cls: 1 byte).
_MEMBERS = [(f"{k}.{ext}", (random.Random(i).randbytes(1500) if ext == "flac" else b"%d" % i))
            for i, k in enumerate("abc") for ext in ("flac", "cls")]


def _offsets(data):
    """member name -> (header offset, data offset)."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: (m.offset, m.offset_data) for m in tar.getmembers()}


@pytest.mark.parametrize("where, keys, failed_key, failed_member", [
    # cut inside b.flac's data: a is complete, b is not
    ("data:b.flac", ["a"], "b", "b.flac"),
    # cut inside c.flac's header: b may have had more members, so b fails
    ("header:c.flac", ["a"], "b", "b.cls"),
    # cut exactly between b.cls and c.flac: tarfile alone would call this a clean end
    ("boundary:c.flac", ["a"], "b", "b.cls"),
    # cut after the last member, before the end-of-archive blocks
    ("end", ["a", "b"], "c", "c.cls"),
])
def test_truncated_tar(where, keys, failed_key, failed_member):
    data = _py_tar(_MEMBERS)
    offsets = _offsets(data)
    kind, _, name = where.partition(":")
    cut = {"data": lambda: offsets[name][1] + 700,
           "header": lambda: offsets[name][0] + 100,
           "boundary": lambda: offsets[name][0],
           "end": lambda: offsets["c.cls"][1] + 512}[kind]()
    samples, _, failures, _ = _read(data[:cut], url="cut.tar")
    assert [s[KEY] for s in samples] == keys
    full = _by_key(_read(data)[0])
    assert all(_by_key([s]) == {s[KEY]: full[s[KEY]]} for s in samples)
    assert len(failures) == 1
    f = failures[0]
    assert (f["unit"], f["url"], f["key"], f["member"]) == (
        SAMPLE, "cut.tar", failed_key, failed_member)
    assert f["stage"] == "read_tar" and "truncated or corrupt" in f["message"]


def test_cut_before_any_sample_is_a_file_failure():
    data = _py_tar([("corpus", None), ("corpus/a.flac", b"1" * 600)])
    offsets = _offsets(data)
    # Inside the first header: tarfile.open itself fails.
    _, _, failures, _ = _read(data[:300], url="x.tar")
    assert [(f["unit"], f["key"], f["member"]) for f in failures] == [(FILE, None, None)]
    # After the directory member, inside the first file's header.
    samples, skipped, failures, _ = _read(data[:offsets["corpus/a.flac"][0] + 10], url="x.tar")
    assert samples == [] and skipped == {"directory": 1}
    assert [(f["unit"], f["url"], f["key"], f["member"]) for f in failures] == [
        (FILE, "x.tar", None, "corpus")]


_CODECS = {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}


def _incompressible_tar() -> bytes:
    """Random payloads: deflate stores them as they are, so a flipped byte
    changes one payload byte and the stream still inflates - only gzip's CRC
    can tell."""
    rng = random.Random(7)
    return _py_tar([(f"{k}.bin", rng.randbytes(4000)) for k in "abc"])


@pytest.mark.parametrize("codec", sorted(_CODECS))
def test_a_flipped_byte_in_a_compressed_tar_gives_no_sample(codec):
    packed = bytearray(_CODECS[codec](_incompressible_tar()))
    packed[len(packed) // 2] ^= 0x01
    samples, _, failures, _ = _read(bytes(packed), url="flipped.tar.x")
    assert samples == []
    [failure] = failures
    assert (failure["unit"], failure["url"], failure["error_type"]) == (
        FILE, "flipped.tar.x", "StreamCorrupt")
    assert failure["message"].startswith(
        f"compressed file corrupt, none of its samples used: {codec} stream fails its checks")


def test_the_flipped_gzip_byte_still_inflates():
    """The case above is the dangerous one: tarfile alone reads it as good data."""
    data = _incompressible_tar()
    packed = bytearray(gzip.compress(data))
    packed[len(packed) // 2] ^= 0x01
    with tarfile.open(fileobj=io.BytesIO(bytes(packed)), mode="r|gz") as tar:
        read = {m.name: tar.extractfile(m).read() for m in tar}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        original = {m.name: tar.extractfile(m).read() for m in tar}
    assert read.keys() == original.keys() and read != original


@pytest.mark.parametrize("codec", sorted(_CODECS))
def test_a_cut_compressed_tar_gives_no_sample(codec):
    packed = _CODECS[codec](_py_tar(_MEMBERS))
    for cut in (len(packed) // 2, len(packed) - 1):
        samples, _, failures, _ = _read(packed[:cut], url="t.tar.x")
        assert samples == []
        assert [(f["unit"], f["error_type"]) for f in failures] == [(FILE, "StreamCorrupt")]
        assert f"{codec} stream ends before its end-of-stream marker" in failures[0]["message"]


def test_concatenated_gzip_streams_read_whole():
    """`cat a.tar.gz b.gz` and pigz write several gzip members: all are read and checked."""
    data = _py_tar(_MEMBERS)
    half = len(data) // 1024 // 2 * 1024
    samples, _, failures, _ = _read(gzip.compress(data[:half]) + gzip.compress(data[half:]))
    assert failures == [] and _by_key(samples) == _by_key(_read(data)[0])


@pytest.mark.parametrize("content, error, message", [
    (b"", "ReadError", "empty file is not a tar archive"),
    (random.Random(0).randbytes(4096), "ReadError", "not a readable tar archive"),
    (b"\x1f\x8b" + random.Random(1).randbytes(600), "StreamCorrupt",  # "gzip" garbage
     "gzip stream fails its checks"),
    (gzip.compress(b"not a tar " * 100, mtime=0), "ReadError", "not a readable tar archive"),
], ids=["empty", "random", "gzip-garbage", "gzip-not-a-tar"])
def test_not_a_tar_is_one_file_failure(content, error, message):
    samples, _, failures, _ = _read(content, url="bad.tar")
    assert samples == []
    assert len(failures) == 1
    f = failures[0]
    assert (f["unit"], f["url"], f["key"], f["member"]) == (FILE, "bad.tar", None, None)
    assert message in f["message"]
    assert f["error_type"] == error


class _FailingFile(io.BytesIO):
    """A file whose reads fail after `good` bytes, the way a gs:// read fails
    once the storage client has given up (requests' ConnectionError is an OSError)."""

    def __init__(self, data: bytes, good: int):
        super().__init__(data)
        self._good = good

    def read(self, size=-1):
        if self.tell() + (size if size >= 0 else len(self.getbuffer())) > self._good:
            raise ConnectionError("Connection reset by peer")
        return super().read(size)


@pytest.mark.parametrize("compress", [lambda d: d, gzip.compress], ids=["tar", "tar.gz"])
@pytest.mark.parametrize("good", [0, 1000])
def test_storage_errors_propagate_instead_of_becoming_dead_letters(compress, good):
    data = compress(_py_tar(_MEMBERS))
    events = []
    with pytest.raises(StorageReadError,
                       match=r"gs://b/x\.tar .*ConnectionError: Connection reset") as info:
        for event in iter_tar(_FailingFile(data, good), "gs://b/x.tar"):
            events.append(event)
    assert isinstance(info.value.__cause__, ConnectionError)
    assert not any(isinstance(event, Failed) for event in events)


def test_valid_empty_tar_yields_nothing():
    assert _read(_py_tar([]))[:3] == ([], {}, [])


def test_no_exception_escapes_random_damage():
    # Flip a few bytes / cut at random in plain and compressed archives.
    data = _py_tar(_MEMBERS)
    rng = random.Random(42)
    for base in (data, gzip.compress(data), bz2.compress(data), lzma.compress(data)):
        for _ in range(60):
            damaged = bytearray(base)
            for _ in range(rng.randint(1, 4)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            damaged = damaged[: rng.randrange(len(damaged) + 1)]
            _, _, failures, _ = _read(bytes(damaged), url="d.tar")  # must not raise
            assert len(failures) <= 1  # reading stops at the first broken spot
            assert all(f["url"] == "d.tar" and f["unit"] in (FILE, SAMPLE) for f in failures)


# --- the DoFn and the PTransform ----------------------------------------------

def test_reader_directly(tmp_path):
    good = tmp_path / "good.tar"
    good.write_bytes(_py_tar(_MEMBERS))
    reader = TarReader()
    assert len(pickle.dumps(reader)) < 2000  # configuration only
    reader.setup()
    out = list(reader.read(WorkUnit(0, (str(good),), 0)))
    assert [s[KEY] for s in out] == ["a", "b", "c"]
    missing = list(reader.read(WorkUnit(1, (str(tmp_path / "missing.tar"),), 0)))
    assert len(missing) == 1 and isinstance(missing[0], Failed)
    record = missing[0].record
    assert (record["unit"], record["url"], record["key"], record["error_type"]) == (
        FILE, str(tmp_path / "missing.tar"), None, "FileNotFoundError")
    assert record["message"].startswith("cannot open file")


def _skip_tree(root):
    """EXPECTED plus one member of every kind a reader must step over."""
    _write_tree(root)
    corpus = root / "corpus"
    (root / "__meta__").write_bytes(b"webdataset meta")
    (corpus / "README").write_bytes(b"no extension")
    os.symlink("spk1_0001", corpus / "link")            # a link that names no field
    os.mkfifo(corpus / "pipe")
    return root


def _linked_tree(root):
    """Files whose second names GNU tar stores as links: `b.flac` a hard link to
    `a.flac`, `sub/c.flac` a symbolic link to it, `z.flac` one to a file outside
    the archive, and `0.flac` one to a member tar stores after it."""
    corpus = root / "corpus"
    (corpus / "sub").mkdir(parents=True)
    for key in ("0", "a", "b", "sub/c", "z"):
        (corpus / f"{key}.cls").write_bytes(key.encode())
    (corpus / "a.flac").write_bytes(b"fLaC the one recording")
    os.link(corpus / "a.flac", corpus / "b.flac")
    os.symlink("../a.flac", corpus / "sub" / "c.flac")
    os.symlink(str(root / "outside.flac"), corpus / "z.flac")
    os.symlink("a.flac", corpus / "0.flac")
    (root / "outside.flac").write_bytes(b"fLaC not in the archive")
    return root


@needs_gnu_tar
@pytest.mark.parametrize("options", [["--format=gnu"], ["--format=pax", "-z"], ["--format=ustar"]])
def test_links_are_read_as_the_members_they_link_to(tmp_path, options):
    root = _linked_tree(tmp_path / "tree")
    tar = _gnu_tar(tmp_path / "linked.tar", root, "corpus", options=options)
    with tarfile.open(tar) as archive:
        kinds = {m.name: m.type for m in archive.getmembers()}
    assert kinds["corpus/b.flac"] == tarfile.LNKTYPE and kinds["corpus/z.flac"] == tarfile.SYMTYPE
    reader = TarReader()
    reader.setup()
    out = list(reader.read(WorkUnit(0, (str(tar),), 0)))
    samples = _by_key(s for s in out if isinstance(s, dict))
    recording = b"fLaC the one recording"
    assert samples == {"corpus/a": {"cls": b"a", "flac": recording},
                       "corpus/b": {"cls": b"b", "flac": recording},
                       "corpus/sub/c": {"cls": b"sub/c", "flac": recording}}
    failures = {f.record["key"]: f.record for f in out if isinstance(f, Failed)}
    assert sorted(failures) == ["corpus/0", "corpus/z"]
    for key, target in (("corpus/0", "a.flac"), ("corpus/z", str(root / "outside.flac"))):
        record = failures[key]
        assert (record["unit"], record["member"]) == (SAMPLE, f"{key}.flac")
        assert record["message"] == (
            f"sample has a link that cannot be followed: member '{key}.flac' is a symbolic link "
            f"to '{target}', which is not a file earlier in the archive, where a streamed read "
            f"could follow it; pack the corpus with tar --dereference --hard-dereference")


def test_a_link_loop_is_a_dead_letter():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, target in (("a.flac", "b.flac"), ("b.flac", "a.flac")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    samples, _, failures, _ = _read(buf.getvalue())
    assert samples == [] and [f["key"] for f in failures] == ["a", "b"]


@needs_gnu_tar
def test_read_tar_samples_skips_and_counts(pipeline, tmp_path):
    root = _skip_tree(tmp_path / "tree")
    shards = tmp_path / "shards"
    shards.mkdir()
    tar = _gnu_tar(shards / "s0.tar", root, "__meta__", "corpus", options=["--format=gnu"])
    (shards / "s1.tar.gz").write_bytes(gzip.compress(tar.read_bytes()))
    _, skipped, _, stats = _read(tar.read_bytes())
    assert skipped == {"directory": 1, "symlink": 1, "fifo": 1, "meta": 1, "no_extension": 1}

    read = pipeline | ReadTarSamples([str(shards / "*.tar"), str(shards / "*.gz")])
    assert_that(read.samples | beam.Map(
                    lambda s: (os.path.basename(s[URL]), s[KEY], sorted(data_fields(s)))),
                equal_to([(shard, key, sorted(fields)) for shard in ("s0.tar", "s1.tar.gz")
                          for key, fields in EXPECTED.items()]), label="Samples")
    assert_that(read.failures, equal_to([]), label="Failures")
    result = pipeline.run()
    result.wait_until_finish()

    assert _counter(result, "tar_files_read") == 2
    assert _counter(result, "tar_members_read") == 2 * stats["members"] == 2 * (7 + 5)
    assert _counter(result, "tar_members_skipped") == 2 * 5
    assert _counter(result, "samples_read") == 2 * 3
    assert _counter(result, "tar_bytes_read") == 2 * sum(
        len(v) for f in EXPECTED.values() for v in f.values())


def test_failures_through_pipeline(pipeline, tmp_path):
    data = _py_tar(_MEMBERS)
    offsets = _offsets(data)
    paths = {name: str(tmp_path / name) for name in
             ("good.tar", "cut.tar", "dup.tar", "junk.tar", "empty.tar", "missing.tar")}
    (tmp_path / "good.tar").write_bytes(data)
    (tmp_path / "cut.tar").write_bytes(data[: offsets["b.flac"][1] + 700])
    (tmp_path / "dup.tar").write_bytes(_py_tar([("a.cls", b"1"), ("a.cls", b"2"), ("b.cls", b"3")]))
    (tmp_path / "junk.tar").write_bytes(random.Random(3).randbytes(2048))
    (tmp_path / "empty.tar").write_bytes(b"")

    # Two units of three files (the missing one among them), read on the runner.
    ordered = sorted(paths.values())
    units = (WorkUnit(0, tuple(ordered[:3]), 0), WorkUnit(1, tuple(ordered[3:]), 0))
    read = pipeline | ReadUnits(Source(lambda: units, TarReader()))
    assert_that(read.samples | beam.Map(lambda s: (os.path.basename(s[URL]), s[KEY])),
                equal_to([("good.tar", "a"), ("good.tar", "b"), ("good.tar", "c"),
                          ("cut.tar", "a"), ("dup.tar", "b")]), label="Samples")
    assert_that(read.failures | beam.Map(lambda f: (f["unit"], os.path.basename(f["url"]),
                                                     f["key"], f["member"])),
                equal_to([(SAMPLE, "cut.tar", "b", "b.flac"),
                          (SAMPLE, "dup.tar", "a", "a.cls"),
                          (FILE, "junk.tar", None, None),
                          (FILE, "empty.tar", None, None),
                          (FILE, "missing.tar", None, None)]), label="Failures")
    result = pipeline.run()
    result.wait_until_finish()
    # samples_read == samples yielded (5) + SAMPLE dead letters (2)
    assert _counter(result, "samples_read") == 7
    assert _counter(result, "tar_files_read") == 5  # the missing file never opened


def test_plan_tar_units_groups_small_files_in_path_order(tmp_path):
    for name, size in (("a.tar", 30), ("b.tar", 30), ("c.tar", 50), ("d.tar", 10),
                       ("e.tar", 20), ("f.tar", 5)):
        (tmp_path / name).write_bytes(b"x" * size)
    units = plan_tar_units(str(tmp_path / "*.tar"), target_bytes=50)
    assert [(u.index, [os.path.basename(p) for p in u.inputs], u.size) for u in units] == [
        (0, ["a.tar", "b.tar"], 60), (1, ["c.tar"], 50), (2, ["d.tar", "e.tar", "f.tar"], 35)]


def test_match_files(tmp_path):
    for name in ("b.tar", "a.tar", "c.tgz"):
        (tmp_path / name).write_bytes(b"")
    assert match_files(str(tmp_path / "*.tar")) == [str(tmp_path / "a.tar"),
                                                    str(tmp_path / "b.tar")]
    assert match_files([str(tmp_path / "*.t*"), str(tmp_path / "a.tar")]) == [
        str(tmp_path / n) for n in ("a.tar", "b.tar", "c.tgz")]
    with pytest.raises(ValueError, match=r"^file_pattern '.*nothing-\*\.tar' matches no file$"):
        match_files([str(tmp_path / "a.tar"), str(tmp_path / "nothing-*.tar")])
    with pytest.raises(ValueError):
        ReadTarSamples([])


# --- memory stays flat -----------------------------------------------------------

class _GeneratedTar:
    """A readable file producing a tar of `n` members of `size` bytes on the fly.

    Headers come from tarfile.TarInfo.tobuf, data from one shared payload, so
    the archive (n * size bytes) never exists in memory at once.
    """

    def __init__(self, n, size):
        assert size % tarfile.BLOCKSIZE == 0  # no padding to write
        self._payload = bytes(range(256)) * (size // 256)
        self._chunks = self._generate(n, size)
        self._buf = bytearray()

    def _generate(self, n, size):
        for i in range(n):
            info = tarfile.TarInfo(f"big/{i // 2:05d}.{('bin', 'cls')[i % 2]}")
            info.size = size
            yield info.tobuf(format=tarfile.GNU_FORMAT)
            yield self._payload
        yield bytes(2 * tarfile.BLOCKSIZE)

    def read(self, size=-1):
        while size < 0 or len(self._buf) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buf += chunk
        size = len(self._buf) if size < 0 else size
        out = bytes(self._buf[:size])
        del self._buf[:size]
        return out


def test_memory_stays_flat(monkeypatch):
    n, size = 2000, 64 * 1024  # a 128 MiB archive
    max_members = []
    real_next = tarfile.TarFile.next

    def recording_next(self):
        info = real_next(self)
        max_members.append(len(self.members))
        return info
    monkeypatch.setattr(tarfile.TarFile, "next", recording_next)

    stats = collections.Counter()
    samples = 0
    tracemalloc.start()
    try:
        for item in iter_tar(_GeneratedTar(n, size), "gen.tar", stats=stats):
            assert isinstance(item, dict), item
            samples += 1
            del item
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert samples == n // 2
    assert stats["members"] == n and stats["bytes"] == n * size
    # TarFile.members never holds more than the member just read...
    assert max(max_members) <= 1
    # ...and the peak is a few samples' worth, not the archive's 128 MiB.
    assert peak < 8 * 1024 * 1024, peak

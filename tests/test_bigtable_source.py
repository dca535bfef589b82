"""Tests for transforms/sources/bigtable/source.py against the real Cloud Bigtable emulator.

Tables are made in the session's emulator (tests/bigtable_emulator.py), one
per test or module so tests do not see each other's rows:
- a small table written with Google's `cbt` CLI (text values on its command
  line), read back through the pipeline;
- "bulk": 2,000 rows over 16 speaker prefixes, `raw:wav` of 1.5-4.5 KB made
  from the key by SHA-256 so any byte can be checked, `meta:cls`, written by
  the Python data client in batches of 250;
- small tables for versions, missing columns and binary keys.
Faults are real: a loopback TCP proxy resets the connection mid-scan (the
client sees UNAVAILABLE), or a wrapper around the real ReadRows stream raises
a gRPC error after some rows.
"""

import hashlib
import re
import selectors
import socket
import struct
import subprocess
import threading

import apache_beam as beam
import grpc
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to
from google.cloud.bigtable.data import BigtableDataClient, RowMutationEntry, SetCell

from transforms.format.dead_letters import SAMPLE
from transforms.format.sample import KEY, URL
from transforms.format.stable_hash import stable_hash64
from transforms.recipe.units import WorkUnit
from transforms.sources.bigtable.key_ranges import ByteKeyRange, ByteKeyRangeTracker
from transforms.sources.bigtable.read_config import BigtableReadConfig, row_filter
from transforms.sources.bigtable.rows import RowReader, is_transient, read_range
from transforms.sources.bigtable.source import BigtableReader, ReadBigtableSamples, plan_key_ranges
from transforms.sources.bigtable.table import BigtableTable

pytestmark = pytest.mark.filterwarnings("ignore:Connecting to Bigtable emulator:RuntimeWarning")

PROJECT, INSTANCE = "test-project", "test-instance"
BULK_ROWS = 2000


def _cbt(*args):
    """Google's cbt CLI against the emulator (it honours BIGTABLE_EMULATOR_HOST)."""
    subprocess.run(["cbt", "-project", PROJECT, "-instance", INSTANCE, *args], check=True,
                   capture_output=True, timeout=30)


def _create(table, *families):
    _cbt("createtable", table, "families=" + ",".join(families))


def _write(table_id, rows, batch=250):
    """rows: (key, [(family, qualifier, value[, timestamp_micros]), ...]) via mutate_rows."""
    with BigtableDataClient(project=PROJECT) as client:
        table = client.get_table(INSTANCE, table_id)
        entries = [RowMutationEntry(key, [SetCell(*cell) for cell in cells]) for key, cells in rows]
        for i in range(0, len(entries), batch):
            table.bulk_mutate_rows(entries[i:i + batch])


def _config(table, columns="raw:wav=wav,meta:cls=cls", **kwargs):
    return BigtableReadConfig(BigtableTable(PROJECT, INSTANCE, table), columns, **kwargs)


def _counter(result, name):
    found = result.metrics().query(
        MetricsFilter().with_namespace("datagen").with_name(name))["counters"]
    return sum(c.committed for c in found)


def _bulk_key(i: int) -> bytes:
    return b"spk%02d/%05d" % (i % 16, i)


def _bulk_wav(key: bytes) -> bytes:
    size = 1536 + int.from_bytes(hashlib.sha256(key).digest()[:2], "big") % 3072
    block = hashlib.sha256(b"wav" + key).digest()
    return (block * (size // len(block) + 1))[:size]


BULK_KEYS = sorted(_bulk_key(i) for i in range(BULK_ROWS))


@pytest.fixture(scope="module")
def bulk(bigtable_emulator):
    """The 2,000-row table; its id."""
    _create("bulk", "raw", "meta")
    _write("bulk", [(key, [("raw", b"wav", _bulk_wav(key)), ("meta", b"cls", key[3:5])])
                    for key in BULK_KEYS])
    return "bulk"


@pytest.fixture
def bulk_reader(bulk):
    """A RowReader of the bulk table."""
    reader = RowReader(_config(bulk).table)
    yield reader
    reader.close()


def _digest(sample):
    """(key, sha256 of wav, cls): checks every byte of the values, compactly."""
    return sample[KEY], hashlib.sha256(sample["wav"]).hexdigest(), sample["cls"]


def _expected_digest(key: bytes):
    return key.decode(), hashlib.sha256(_bulk_wav(key)).hexdigest(), key[3:5]


# --- through the pipeline ----------------------------------------------------

def test_rows_written_by_cbt_read_once(pipeline, bigtable_emulator, tmp_path):
    # cbt takes ~0.6 s a call, so most rows go in one `cbt import` of a CSV
    # (family row, qualifier row, then key,values) and two by `cbt set`.
    _create("cbt_rows", "raw", "meta")
    rows = {f"clip-{i:02d}": (f"RIFF-{i}", str(i % 3)) for i in range(12)}
    csv = tmp_path / "rows.csv"
    csv.write_text(",raw,meta\n,wav,label\n" + "".join(
        f"{key},{wav},{label}\n" for key, (wav, label) in list(rows.items())[:10]))
    _cbt("import", "cbt_rows", str(csv))
    for key, (wav, label) in list(rows.items())[10:]:
        _cbt("set", "cbt_rows", key, f"raw:wav={wav}", f"meta:label={label}")
    url = f"bigtable://{PROJECT}/{INSTANCE}/cbt_rows"
    expected = [{KEY: key, URL: url, "wav": wav.encode(), "cls": label.encode()}
                for key, (wav, label) in rows.items()]

    read = pipeline | ReadBigtableSamples(_config("cbt_rows", "raw:wav=wav,meta:label=cls",
                                                  max_ranges=4))
    assert_that(read.samples, equal_to(expected), label="Samples")
    assert_that(read.failures, equal_to([]), label="Failures")
    result = pipeline.run()
    result.wait_until_finish()
    assert _counter(result, "samples_read") == 12


def test_bulk_every_row_once_with_counters(pipeline, bulk):
    read = pipeline | ReadBigtableSamples(_config(bulk, max_ranges=8))
    assert_that(read.samples | beam.Map(_digest),
                equal_to([_expected_digest(k) for k in BULK_KEYS]), label="Samples")
    assert_that(read.failures, equal_to([]), label="Failures")
    result = pipeline.run()
    result.wait_until_finish()

    assert _counter(result, "bigtable_rows_read") == BULK_ROWS
    assert _counter(result, "samples_read") == BULK_ROWS
    # keys + newest values; the marker cell per row carries no value
    assert _counter(result, "bigtable_bytes_read") == sum(
        len(k) + len(_bulk_wav(k)) + 2 for k in BULK_KEYS)
    assert _counter(result, "bigtable_retries") == 0


def test_planned_key_ranges_tile_the_requested_range_in_key_order(bulk):
    units = plan_key_ranges(_config(bulk, max_ranges=8))
    # The emulator samples ~1% of keys at random, always including the last.
    assert 2 <= len(units) <= 8
    assert [u.index for u in units] == list(range(len(units)))
    assert units[0].inputs[0] == b"" and units[-1].inputs[1] == b""
    assert all(a.inputs[1] == b.inputs[0] for a, b in zip(units, units[1:]))
    assert sum(u.size for u in units) > 0
    limited = plan_key_ranges(_config(bulk, prefix="spk03/", max_rows=10))
    tenth = [k for k in BULK_KEYS if k.startswith(b"spk03/")][9]
    assert limited[0].inputs[0] == b"spk03/" and limited[-1].inputs[1] == tenth + b"\x00"


def _sampled(keys, fraction):
    return [k for k in keys if stable_hash64(k.decode(), b"datagen-sample") < fraction * 2 ** 64]


SELECTIONS = {
    "prefix": (dict(prefix="spk03/"), [k for k in BULK_KEYS if k.startswith(b"spk03/")]),
    "start_end": (dict(start_key=b"spk02/", end_key="spk05/00100"),
                  [k for k in BULK_KEYS if b"spk02/" <= k < b"spk05/00100"]),
    "prefix_and_start": (dict(prefix=b"spk03/", start_key=b"spk03/01000", end_key=b"spk09/"),
                         [k for k in BULK_KEYS if k.startswith(b"spk03/") and k >= b"spk03/01000"]),
    "empty_intersection": (dict(prefix=b"spk03/", end_key=b"spk02/"), []),
    "key_regex": (dict(key_regex=rb"spk0[12]/\d*7"),  # RE2, matched against the whole key
                  [k for k in BULK_KEYS if re.fullmatch(rb"spk0[12]/\d*7", k)]),
    "sample_fraction": (dict(sample_fraction=0.25), _sampled(BULK_KEYS, 0.25)),
    "max_rows": (dict(max_rows=37), BULK_KEYS[:37]),
    "max_rows_prefix_sampled": (dict(max_rows=20, prefix="spk07/", sample_fraction=0.5),
                                _sampled([k for k in BULK_KEYS if k.startswith(b"spk07/")],
                                         0.5)[:20]),
}


@pytest.mark.parametrize("name", list(SELECTIONS))
def test_key_selection(pipeline, bulk, name):
    options, keys = SELECTIONS[name]
    read = pipeline | ReadBigtableSamples(_config(bulk, max_ranges=8, **options))
    assert_that(read.samples | beam.Map(_digest), equal_to([_expected_digest(k) for k in keys]))
    result = pipeline.run()
    result.wait_until_finish()
    assert _counter(result, "samples_read") == len(keys)


def test_sample_fraction_is_deterministic_and_near_fraction():
    kept = _sampled(BULK_KEYS, 0.25)
    assert kept == _sampled(BULK_KEYS, 0.25)
    assert 400 <= len(kept) <= 600  # binomial(2000, 0.25): mean 500, sd 19
    assert set(_sampled(BULK_KEYS, 0.1)) <= set(kept)  # a smaller fraction is a subset


@pytest.fixture(scope="module")
def odd_rows(bigtable_emulator):
    """Versions, missing columns and a binary key; the table id."""
    _create("odd", "raw", "meta", "other")
    _write("odd", [
        # newest version written first: the timestamp decides, not write order
        (b"versions", [("raw", b"wav", b"new", 2_000_000), ("raw", b"wav", b"old", 1_000_000),
                       ("meta", b"cls", b"1")]),
        (b"no-wav", [("meta", b"cls", b"2")]),
        (b"nothing-mapped", [("other", b"x", b"ignored")]),
        (b"bin\xff\x00key", [("raw", b"wav", b"w"), ("meta", b"cls", b"3")]),
    ])
    return "odd"


def test_versions_missing_columns_and_binary_keys(pipeline, odd_rows):
    read = pipeline | ReadBigtableSamples(_config(odd_rows))
    assert_that(read.samples | beam.Map(lambda s: (s[KEY], s["wav"], s["cls"])),
                equal_to([("versions", b"new", b"1"), ("bin\\xff\x00key", b"w", b"3")]),
                label="Samples")
    assert_that(read.failures | beam.Map(lambda f: (f["unit"], f["stage"], f["key"],
                                                      f["member"], f["message"])),
                equal_to([(SAMPLE, "read_bigtable", "no-wav", "raw:wav",
                           "row 'no-wav' has no cell in required column raw:wav (field 'wav')"),
                          (SAMPLE, "read_bigtable", "nothing-mapped", "raw:wav, meta:cls",
                           "row 'nothing-mapped' has no cell in required columns "
                           "raw:wav (field 'wav'), meta:cls (field 'cls')")]),
                label="Failures")
    result = pipeline.run()
    result.wait_until_finish()
    assert _counter(result, "samples_read") == 4  # == 2 samples + 2 SAMPLE dead letters
    # only the newest version travels: "new", not "old"
    assert _counter(result, "bigtable_bytes_read") == sum(
        len(k) + len(v) for k, v in [(b"versions", b"new1"), (b"no-wav", b"2"),
                                     (b"nothing-mapped", b""), (b"bin\xff\x00key", b"w3")])


def test_optional_column_and_family_wildcard(pipeline, odd_rows):
    read = pipeline | ReadBigtableSamples(_config(odd_rows, "raw:wav=wav,meta:*,other:*",
                                                  required=("meta:*",)))
    url = f"bigtable://{PROJECT}/{INSTANCE}/odd"
    assert_that(read.samples | beam.Map(lambda s: sorted(s.items())), equal_to([
        sorted({KEY: key, URL: url, **fields}.items()) for key, fields in [
            ("versions", {"wav": b"new", "cls": b"1"}),
            ("no-wav", {"cls": b"2"}),  # wav is optional here
            ("bin\\xff\x00key", {"wav": b"w", "cls": b"3"})]]), label="Samples")
    assert_that(read.failures | beam.Map(lambda f: (f["key"], f["member"])),
                equal_to([("nothing-mapped", "meta:*")]), label="Failures")
    pipeline.run().wait_until_finish()


class _CuttingProxy:
    """A loopback TCP proxy to the emulator that resets connections mid-stream.

    The first `cuts` connections to carry more than `after_bytes` bytes toward
    the client are reset (RST), which the client reports as UNAVAILABLE, as
    it would for a server restart or a dropped network path. One thread per
    connection moves both directions, so the thread that closes the sockets
    is never blocked reading them (a socket closed under another thread's
    recv() is not released, and no RST would be sent).
    """

    def __init__(self, target_port: int, after_bytes: int, cuts: int):
        self._target = ("127.0.0.1", target_port)
        self._after = after_bytes
        self._cuts = cuts
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _cut_now(self, sent: int) -> bool:
        with self._lock:
            if sent <= self._after or self._cuts <= 0:
                return False
            self._cuts -= 1
            return True

    def _relay(self, client, upstream):
        peer = {client: upstream, upstream: client}
        sent = 0  # bytes toward the client
        with selectors.DefaultSelector() as selector:
            for s in peer:
                selector.register(s, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select():
                        data = key.fileobj.recv(65536)
                        if not data:
                            return
                        peer[key.fileobj].sendall(data)
                        if key.fileobj is upstream:
                            sent += len(data)
                            if self._cut_now(sent):
                                for s in peer:  # linger 0: close() sends RST
                                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                 struct.pack("ii", 1, 0))
                                return
            except OSError:
                return
            finally:
                for s in peer:
                    s.close()

    def close(self):
        self._listener.close()


def test_connection_reset_mid_scan_loses_and_repeats_nothing(pipeline, bulk, bigtable_emulator,
                                                             monkeypatch):
    proxy = _CuttingProxy(bigtable_emulator.port, after_bytes=400_000, cuts=3)
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", proxy.host)  # read in the DoFns' setup()
    try:
        read = pipeline | ReadBigtableSamples(_config(bulk, max_ranges=4))
        assert_that(read.samples | beam.Map(_digest),
                    equal_to([_expected_digest(k) for k in BULK_KEYS]))
        result = pipeline.run()
        result.wait_until_finish()
    finally:
        proxy.close()
    assert _counter(result, "bigtable_retries") == 3
    assert _counter(result, "samples_read") == BULK_ROWS


# --- the reader with injected stream errors ----------------------------------

class _RpcError(grpc.RpcError):
    """A gRPC error as a call raises it: `code()` and `details()`."""

    def __init__(self, code, details=""):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class _FlakyReader:
    """A real RowReader whose streams raise `error` after `after` rows, `times` times."""

    def __init__(self, reader, after, times, error=None):
        self._reader = reader
        self._after = after
        self.remaining = times
        self._error = error or _RpcError(grpc.StatusCode.UNAVAILABLE, "injected: tablet moved")

    def read(self, *args, **kwargs):
        for i, row in enumerate(self._reader.read(*args, **kwargs)):
            if i == self._after and self.remaining > 0:
                self.remaining -= 1
                raise self._error
            yield row


def _prefix_keys(prefix: bytes):
    return [k for k in BULK_KEYS if k.startswith(prefix)]


def test_read_range_resumes_after_last_row(bulk_reader):
    flaky = _FlakyReader(bulk_reader, after=40, times=3)
    retries = []
    rows = read_range(flaky, b"spk04/", b"spk05/", row_filter(_config("bulk")),
                      on_retry=retries.append)
    assert [r.row_key for r in rows] == _prefix_keys(b"spk04/")
    assert len(retries) == 3 and all(e.code() == grpc.StatusCode.UNAVAILABLE for e in retries)


def test_read_range_attempts_reset_on_progress(bulk_reader):
    # 125 rows, 30 per attempt: 4 failures in a row would exceed max_attempts=2
    # if the count did not restart after each delivered row.
    flaky = _FlakyReader(bulk_reader, after=30, times=4)
    rows = read_range(flaky, b"spk06/", b"spk07/", max_attempts=2)
    assert [r.row_key for r in rows] == _prefix_keys(b"spk06/")


def test_read_range_gives_up_and_fails_fast(bulk_reader):
    stuck = _FlakyReader(bulk_reader, after=0, times=100)
    with pytest.raises(grpc.RpcError) as raised:
        list(read_range(stuck, b"spk01/", b"spk02/", max_attempts=3))
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    assert stuck.remaining == 97

    denied = _FlakyReader(bulk_reader, after=5, times=1,
                          error=_RpcError(grpc.StatusCode.PERMISSION_DENIED,
                                          "no bigtable.tables.readRows"))
    retries = []
    with pytest.raises(grpc.RpcError) as raised:
        list(read_range(denied, b"spk01/", b"spk02/", on_retry=retries.append))
    assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert retries == []


def test_is_transient():
    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                 grpc.StatusCode.ABORTED):
        assert is_transient(_RpcError(code))
    assert is_transient(_RpcError(grpc.StatusCode.INTERNAL, "Received RST_STREAM with code 2"))
    assert not is_transient(_RpcError(grpc.StatusCode.INTERNAL, "checksum mismatch"))
    assert not is_transient(_RpcError(grpc.StatusCode.INVALID_ARGUMENT))
    assert not is_transient(_RpcError(grpc.StatusCode.NOT_FOUND))
    assert not is_transient(ValueError("x"))


# --- the DoFn directly, split while it reads --------------------------------

def _run_restriction(reader, tracker, split_after=None, fraction=0.5):
    """Keys a reader yields for a tracker's range; optionally splits after `split_after` outputs."""
    keys, residual = [], None
    unit = WorkUnit(0, (tracker.current_restriction().start, tracker.current_restriction().end), 0)
    for i, output in enumerate(reader.read(unit, tracker)):
        keys.append(output[KEY].encode())
        if split_after is not None and i + 1 == split_after:
            residual = tracker.try_split(fraction)[1]
    tracker.check_done()
    return keys, residual


@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.5])
def test_reader_split_mid_read_covers_range_once(bulk, fraction):
    reader = BigtableReader(_config(bulk))
    reader.setup()
    try:
        whole = ByteKeyRange(b"spk00/", b"spk08/")
        tracker = ByteKeyRangeTracker(whole)
        first, residual = _run_restriction(reader, tracker, split_after=100, fraction=fraction)
        assert tracker.current_restriction().end == residual.start
        second, _ = _run_restriction(reader, ByteKeyRangeTracker(residual))
    finally:
        reader.teardown()
    expected = [k for k in BULK_KEYS if whole.start <= k < whole.end]
    assert len(first) >= 100 and first + second == expected
    if fraction == 0:
        assert len(first) == 100  # a checkpoint: the rest goes to the residual


def test_reader_unbounded_range_split(bulk):
    reader = BigtableReader(_config(bulk))
    reader.setup()
    try:
        tracker = ByteKeyRangeTracker(ByteKeyRange(b"spk14/", b""))
        first, residual = _run_restriction(reader, tracker, split_after=10, fraction=0.5)
        second, _ = _run_restriction(reader, ByteKeyRangeTracker(residual))
    finally:
        reader.teardown()
    assert residual.end == b""
    assert first + second == [k for k in BULK_KEYS if k >= b"spk14/"]

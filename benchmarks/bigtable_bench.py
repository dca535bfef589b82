"""Bigtable -> Samples: a serial scan vs our split read, with and without 20 ms per response.

    python -m benchmarks.bigtable_bench [--rows 50000] [--value_kb 16] [--processes CORES]
                                        [--workers 8] [--latency_ms 20] [--latency_rows 4000]
                                        [--no_beam]

Starts a fresh Cloud Bigtable emulator (tests/bigtable_emulator.py), loads
--rows rows of --value_kb KB random bytes (mutate_rows, 128 rows a request,
4 loader threads), then times, in this process:

  serial (classic)   google.cloud.bigtable's `Table.read_rows()`, iterated;
  serial (data)      the data client's `read_rows_stream()` over the table, the
                     faster of the two plain scans and the baseline of the ratios;
  split, 1 thread    our read: `sample_row_keys` -> `key_ranges` (handed out
                     largest first, see `plan`) -> one thread with its own
                     RowReader (transforms/sources/bigtable/rows.py, like one DoFn
                     instance) reading the ranges through `read_samples`
                     with a ByteKeyRangeTracker claiming every key (the code
                     the splittable DoFn runs, Samples built and counted):
                     our per-row cost against the plain client's;
  split, N processes the same over --processes processes (spawned and warmed
                     up before the clock starts), as Beam runs workers: one
                     process per core, never sharing a GIL;
  beam, 1 / 2 workers ReadBigtableSamples in a pipeline on the local runner
                     (in-process, then --direct_num_workers 2 processes),
                     start-up included;
  job, 1 / 2 workers pipelines.bigtable_to_tfrecord end to end, each key
                     range converted and its shards written by the worker
                     that reads it, as a subprocess (start-up included, peak
                     RSS of its process tree noted): the 2-worker job's speed
                     over the 1-worker job's.

Then with --latency_ms added to every ReadRows *response* the client
receives, over the first --latency_rows rows: serial (data) vs split, 1
thread and --workers threads. The delay is a gRPC client interceptor on each client's channel:
the reader gets each response message --latency_ms after it asks for it, so
one stream pays it once per response, serially, while separate streams pay
it side by side. It models a server or path needing that long per response;
SampleRowKeys is not delayed. The emulator sends one row per response, so
here it costs 20 ms per row - real Bigtable packs many rows into a response,
so absolute rates under latency are pessimistic and the ratio is the point.

Every row of the table shows "cores busy": machine-wide CPU time over wall
time while it ran (/proc/stat), the emulator and every worker included. The
emulator runs on the same machine and competes for its cores, and the run
first prints how much pure-Python work 2 processes do vs 1 here: when one
stream already keeps most cores busy, no split of the work can be much faster.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import hashlib
import importlib.util
import json
import multiprocessing
import os
import pathlib
import shutil
import sys
import tempfile
import threading
import time
import warnings
from typing import NamedTuple

import apache_beam as beam
import grpc
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from google.cloud import bigtable
from google.cloud.bigtable.data import ReadRowsQuery, RowMutationEntry, RowRange, SetCell

from benchmarks.process_tree import measure, tree_rss
from transforms.recipe.units import units_in_order
from transforms.runner.runtime import make_pipeline
from transforms.sources.bigtable.key_ranges import ByteKeyRange, ByteKeyRangeTracker
from transforms.sources.bigtable.read_config import BigtableReadConfig
from transforms.sources.bigtable.rows import RowReader, open_channel
from transforms.sources.bigtable.source import (
    ReadBigtableSamples,
    open_table,
    plan_key_ranges,
    read_samples,
)
from transforms.sources.bigtable.table import BigtableTable

PROJECT, INSTANCE, TABLE = "bench", "bench", "media"
BENCH_TABLE = BigtableTable(PROJECT, INSTANCE, TABLE)
LOAD_BATCH = 128  # rows a MutateRows request: 2 MB at 16 KB, under gRPC's 4 MB default
# The data client warns on every client made for the emulator.
warnings.filterwarnings("ignore", "Connecting to Bigtable emulator", RuntimeWarning)


def _emulator_module():
    """tests/bigtable_emulator.py, loaded by path (tests/ is not a package)."""
    path = pathlib.Path(__file__).resolve().parent.parent / "tests" / "bigtable_emulator.py"
    sys.path.insert(0, str(path.parent))  # for the helpers it imports (tests/loopback.py)
    spec = importlib.util.spec_from_file_location("bigtable_emulator", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _key(i: int) -> bytes:
    # 64 speakers: key order differs from write order, as in a real corpus.
    return b"spk%02d/%07d" % (i % 64, i)


def load(rows: int, value_bytes: int) -> float:
    """Creates the table and writes `rows` rows; returns seconds taken."""
    admin = bigtable.Client(project=PROJECT, admin=True)
    admin.instance(INSTANCE).table(TABLE).create(column_families={"raw": None})
    admin.close()
    client, table = open_table(BENCH_TABLE)
    start = time.perf_counter()

    def batch(first: int):
        table.bulk_mutate_rows([
            RowMutationEntry(_key(i), [SetCell("raw", b"wav", os.urandom(value_bytes))])
            for i in range(first, min(rows, first + LOAD_BATCH))])

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(batch, range(0, rows, LOAD_BATCH)))
    client.close()
    return time.perf_counter() - start


class _DelayReadRows(grpc.UnaryStreamClientInterceptor):
    """Hands each ReadRows response to the reader `delay_s` after it asks for it."""

    def __init__(self, delay_s: float):
        self._delay_s = delay_s

    def intercept_unary_stream(self, continuation, client_call_details, request):
        call = continuation(client_call_details, request)
        if not client_call_details.method.endswith("/ReadRows"):
            return call
        return _DelayedStream(call, self._delay_s)


class _DelayedStream:
    """A response stream (grpc Call and iterator) whose every message comes late."""

    def __init__(self, call, delay_s: float):
        self._call = call
        self._delay_s = delay_s

    def __iter__(self):
        return self

    def __next__(self):
        response = next(self._call)
        time.sleep(self._delay_s)
        return response

    def __getattr__(self, name):  # cancel(), code(), trailing_metadata(), ...
        return getattr(self._call, name)


def _data_table(delay_s: float, opened: list):
    """A plain data client Table, its ReadRows responses delayed if asked.

    Everything to close later is appended to `opened`: closing a gRPC channel
    while other threads are in calls can deadlock the process (grpc/grpc
    #42247: Channel.close holds the GIL), so `_close_all` runs after the reads.
    """
    client, table = open_table(BENCH_TABLE)
    opened.append(client)
    if delay_s:
        channel = grpc.intercept_channel(
            grpc.insecure_channel(os.environ["BIGTABLE_EMULATOR_HOST"]), _DelayReadRows(delay_s))
        opened.append(client.transport.grpc_channel.swap_channel(channel))
        # What the client itself does after swapping in a refreshed channel.
        client._invalidate_channel_stubs()
    return table


def _reader(config: BigtableReadConfig, delay_s: float, opened: list) -> RowReader:
    """Our reader as the DoFn opens it, its ReadRows responses delayed if asked."""
    if not delay_s:
        reader = RowReader(config.table)
    else:
        channel = grpc.intercept_channel(open_channel(), _DelayReadRows(delay_s))
        reader = RowReader(config.table, channel=channel)
    opened.append(reader)
    return reader


def _close_all(opened: list) -> None:
    for closable in opened:
        closable.close()


def _row_bytes(row) -> int:
    return len(row.row_key) + sum(len(c.value) for c in row.cells)


def _busy_seconds() -> float:
    """CPU time all cores of the machine have spent busy so far (/proc/stat)."""
    with open("/proc/stat") as stat:
        ticks = [int(t) for t in stat.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait


class _Clock:
    """Wall time and machine-wide busy CPU (emulator, workers, all) since it started."""

    def __init__(self):
        self._wall, self._busy = time.perf_counter(), _busy_seconds()

    def read(self) -> tuple:
        seconds = time.perf_counter() - self._wall
        return seconds, (_busy_seconds() - self._busy) / seconds


class Measurement(NamedTuple):
    rows: int
    bytes: int
    seconds: float
    cores: float  # machine-wide CPU busy / wall time while it ran
    note: str = ""


def serial_classic(end_key: bytes) -> Measurement:
    """The classic client's scan of the table up to `end_key`."""
    client = bigtable.Client(project=PROJECT)
    table = client.instance(INSTANCE).table(TABLE)
    rows = nbytes = 0
    clock = _Clock()
    for row in table.read_rows(end_key=end_key or None):
        rows += 1
        nbytes += len(row.row_key) + sum(len(c.value) for columns in row.cells.values()
                                         for cells in columns.values() for c in cells)
    seconds, cores = clock.read()
    # Closed here, not by the garbage collector in the middle of later reads
    # (see _data_table).
    client.close()
    return Measurement(rows, nbytes, seconds, cores)


def serial_data(end_key: bytes, delay_s: float = 0.0) -> Measurement:
    """The data client's scan of the table up to `end_key`."""
    opened = []
    table = _data_table(delay_s, opened)
    rows = nbytes = 0
    clock = _Clock()
    for row in table.read_rows_stream(ReadRowsQuery(row_ranges=RowRange(end_key=end_key or None))):
        rows += 1
        nbytes += _row_bytes(row)
    seconds, cores = clock.read()
    _close_all(opened)
    return Measurement(rows, nbytes, seconds, cores)


def plan(config: BigtableReadConfig) -> list:
    """The key ranges the pipelines read (`plan_key_ranges`), largest first.

    Handed to the workers largest first by the samples' byte estimate, as the
    pipelines hand out units (transforms.sources.units.units_in_order), so one big
    range started last does not decide the time. The emulator samples about 1%
    of keys at random, so its ranges vary in size far more than Bigtable's.
    """
    return [u.inputs for u in units_in_order(plan_key_ranges(config))]


def split_threads(config: BigtableReadConfig, workers: int, delay_s: float = 0.0) -> Measurement:
    """Our split read: `workers` threads, one reader each, taking ranges as they finish one.

    Each range is read as the DoFn reads a restriction: through
    `read_samples`, claiming every key on a ByteKeyRangeTracker. Timed from
    planning on, readers (a DoFn's setup()) included.
    """
    clock = _Clock()
    ranges = plan(config)
    local = threading.local()
    lock = threading.Lock()
    opened = []  # closed after every thread is done
    totals = collections.Counter()

    def read(span) -> None:
        if not hasattr(local, "reader"):
            with lock:
                local.reader = _reader(config, delay_s, opened)
        tracker = ByteKeyRangeTracker(ByteKeyRange(*span))
        stats = collections.Counter()
        for _ in read_samples(local.reader, config, *span, claim=tracker.try_claim, stats=stats):
            pass
        tracker.check_done()
        with lock:
            totals.update(stats)

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(read, ranges))
    seconds, cores = clock.read()
    _close_all(opened)
    return Measurement(totals["samples"], totals["bytes"], seconds, cores, f"{len(ranges)} ranges")


_process_reader = None  # one reader per worker process, made on first use


def _read_in_process(config: BigtableReadConfig, span) -> tuple:
    global _process_reader
    if _process_reader is None:
        _process_reader = RowReader(config.table)
    if span is None:
        return 0, 0
    stats = collections.Counter()
    for _ in read_samples(_process_reader, config, *span, stats=stats):
        pass
    return stats["samples"], stats["bytes"]


def split_processes(config: BigtableReadConfig, workers: int) -> Measurement:
    """Our split read over `workers` spawned processes, timed after their warm-up."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        # Warm-up outside the clock: imports and one client per process.
        list(pool.map(_read_in_process, [config] * workers * 4, [None] * workers * 4))
        clock = _Clock()
        ranges = plan(config)
        results = list(pool.map(_read_in_process, [config] * len(ranges), ranges))
        seconds, cores = clock.read()
    return Measurement(sum(r for r, _ in results), sum(b for _, b in results), seconds, cores,
                       f"{len(ranges)} ranges")


def beam_read(config: BigtableReadConfig, workers: int) -> Measurement:
    """ReadBigtableSamples on the local runner, start-up included; counts from its counters."""
    clock = _Clock()
    options = PipelineOptions(direct_num_workers=workers)
    with make_pipeline(options) as p:
        read = p | "Read" >> ReadBigtableSamples(config)
        (read.samples
         | "Size" >> beam.Map(lambda sample: len(sample["wav"]))
         | "Total" >> beam.CombineGlobally(sum))
    seconds, cores = clock.read()
    metrics = p.result.metrics()

    def total(name):
        found = metrics.query(MetricsFilter().with_namespace("datagen").with_name(name))
        return sum(c.committed for c in found["counters"])

    return Measurement(total("samples_read"), total("bigtable_bytes_read"), seconds, cores,
                       f"{len(plan(config))} ranges")


def dataset_job(workers: int) -> Measurement:
    """pipelines.bigtable_to_tfrecord over the table as a subprocess, start-up included."""
    output = tempfile.mkdtemp(prefix="datagen-bt-job-")
    try:
        clock = _Clock()
        run = measure([sys.executable, "-m", "pipelines.bigtable_to_tfrecord",
                       "--project", PROJECT, "--instance", INSTANCE, "--table", TABLE,
                       "--columns", "raw:wav=wav", "--features", "wav:bytes",
                       "--output", output, "--direct_num_workers", str(workers)])
        seconds, cores = clock.read()
        with open(os.path.join(output, "manifest.json")) as f:
            info = json.load(f)
    finally:
        shutil.rmtree(output, ignore_errors=True)
    written = sum(s["num_bytes"] for s in info["splits"].values())
    return Measurement(info["accounting"]["samples_written"], written, seconds, cores,
                       f"peak RSS {run.peak_rss / 2**20:.0f} MiB")


def _burn(n: int) -> None:
    digest = b"x"
    for _ in range(n):
        digest = hashlib.sha256(digest).digest()


def cpu_scaling() -> float:
    """Work done per second by 2 processes / by 1, for pure Python CPU work."""
    n = 1_000_000
    start = time.perf_counter()
    _burn(n)
    one = time.perf_counter() - start
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=spawn) as pool:
        list(pool.map(_burn, [1, 1]))
        start = time.perf_counter()
        list(pool.map(_burn, [n, n]))
        two = time.perf_counter() - start
    return 2 * one / two


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--value_kb", type=int, default=16)
    parser.add_argument("--processes", type=int, default=os.cpu_count(),
                        help="worker processes of the plain split read (default: one per core)")
    parser.add_argument("--workers", type=int, default=8,
                        help="reader threads of the split read under latency")
    parser.add_argument("--latency_ms", type=float, default=20.0)
    parser.add_argument("--latency_rows", type=int, default=4000)
    parser.add_argument("--no_beam", action="store_true", help="skip the pipeline runs")
    args = parser.parse_args(argv)

    emulators = _emulator_module()
    binary = emulators.find_cbtemulator()
    if binary is None:
        raise SystemExit("cbtemulator not found (install the Google Cloud CLI's Bigtable emulator)")
    emulator = emulators.Emulator(binary)
    os.environ["BIGTABLE_EMULATOR_HOST"] = emulator.host
    try:
        seconds = load(args.rows, args.value_kb * 1024)
        print(f"loaded {args.rows} rows x {args.value_kb} KB in {seconds:.1f} s "
              f"({args.rows / seconds:.0f} rows/s); emulator RSS "
              f"{tree_rss(emulator.process.pid) / 2**20:.0f} MiB")
        config = BigtableReadConfig(BENCH_TABLE, "raw:wav=wav")
        print(f"ranges planned: {len(plan(config))} (max_ranges {config.max_ranges}); "
              f"2 processes do {cpu_scaling():.2f}x the CPU work of 1 on this machine")

        results = []  # (conditions, method, Measurement)

        def run(conditions, method, function, *fn_args):
            measured = function(*fn_args)
            results.append((conditions, method, measured))
            print(f"  {conditions}: {method}: {measured.rows} rows in {measured.seconds:.2f} s",
                  flush=True)

        run("no latency", "serial (classic read_rows)", serial_classic, b"")
        run("no latency", "serial (data read_rows_stream)", serial_data, b"")
        run("no latency", "split, 1 thread", split_threads, config, 1)
        run("no latency", f"split, {args.processes} processes", split_processes, config,
            args.processes)
        if not args.no_beam:
            run("no latency", "beam, 1 worker", beam_read, config, 1)
            run("no latency", "beam, 2 worker processes", beam_read, config, 2)
            run("no latency", "job, 1 worker", dataset_job, 1)
            run("no latency", "job, 2 worker processes", dataset_job, 2)

        keys = sorted(_key(i) for i in range(args.rows))
        end = keys[args.latency_rows] if args.latency_rows < args.rows else b""
        delay_s = args.latency_ms / 1000
        conditions = f"{args.latency_ms:g} ms/response, first {args.latency_rows} rows"
        slow = BigtableReadConfig(BENCH_TABLE, "raw:wav=wav", end_key=end)
        run(conditions, "serial (data read_rows_stream)", serial_data, end, delay_s)
        run(conditions, "split, 1 thread", split_threads, slow, 1, delay_s)
        run(conditions, f"split, {args.workers} threads", split_threads, slow, args.workers,
            delay_s)
    finally:
        emulator.stop()

    baseline = {conditions: m.rows / m.seconds for conditions, method, m in results
                if method.startswith("serial (data")}
    print()
    print("| conditions | method | rows | s | rows/s | MB/s | cores busy | x serial (data) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for conditions, method, m in results:
        rate = m.rows / m.seconds
        print(f"| {conditions} | {method}{f' ({m.note})' if m.note else ''} | {m.rows} | "
              f"{m.seconds:.2f} | {rate:,.0f} | {m.bytes / m.seconds / 1e6:,.1f} | "
              f"{m.cores:.2f} | {rate / baseline[conditions]:.2f}x |")
    jobs = {method: m for _, method, m in results if method.startswith("job")}
    if len(jobs) == 2:
        one, two = jobs.values()
        print(f"\nbigtable_to_tfrecord: 2 workers {one.seconds / two.seconds:.2f}x the speed "
              f"of 1 (target >= 1.6x)")


if __name__ == "__main__":
    main()

"""Writing Samples and examples to Bigtable, and the tar -> Bigtable load, on the real emulator.

Fixtures are made in the tests: the AV demo corpus by
`transforms.testing.corpus.write_corpus(kind="av")`, small tars with `tarfile`,
Samples as dicts. Tables are read back with the plain google-cloud-bigtable
client and with Google's `cbt` CLI, both pointed at the emulator by
BIGTABLE_EMULATOR_HOST (the `bigtable_emulator` fixture). Every test uses its
own table, since the emulator is shared by the session.
"""

import datetime
import io
import json
import shutil
import subprocess
import tarfile
import uuid

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from google.cloud.bigtable import Client

import transforms
from pipelines import tar_to_bigtable
from transforms.format.dead_letters import FAILURES
from transforms.recipe.examples import Example
from transforms.runner.counters import NAMESPACE
from transforms.sources.bigtable import sink as bigtable_sink
from transforms.sources.bigtable.admin import ensure_table
from transforms.sources.bigtable.sink import (
    MAX_CELL_BYTES,
    RowRefused,
    WriteExamplesToBigtable,
    WriteSamplesToBigtable,
    example_row,
    example_row_key,
    sample_to_row,
)
from transforms.sources.bigtable.table import BigtableTable
from transforms.testing.corpus import write_corpus

PROJECT = "datagen-test"
INSTANCE = "sink"
TOO_BIG = b"\0" * (MAX_CELL_BYTES + 1)


def _config() -> BigtableTable:
    return BigtableTable(PROJECT, INSTANCE, f"t{uuid.uuid4().hex[:10]}")


def _table(config: BigtableTable):
    return Client(project=config.project, admin=True).instance(config.instance).table(config.table)


def _read_table(config: BigtableTable) -> dict:
    """{row key: {(family, qualifier): (value, timestamp)}} for the newest cell of each column."""
    rows = {}
    for row in _table(config).read_rows():
        rows[row.row_key] = {(family, qualifier): (cells[0].value, cells[0].timestamp)
                             for family, columns in row.cells.items()
                             for qualifier, cells in columns.items()}
    return rows


def _values(rows: dict) -> dict:
    return {key: {column: value for column, (value, _) in cells.items()}
            for key, cells in rows.items()}


def _tar_members(paths) -> dict:
    """{key: {ext: bytes}} read with plain tarfile (keys have no dots in the demo corpus)."""
    samples = {}
    for path in paths:
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                key, _, ext = member.name.partition(".")
                samples.setdefault(key, {})[ext] = tar.extractfile(member).read()
    return samples


def _counter(result, name: str) -> int:
    counters = result.metrics().query(
        MetricsFilter().with_namespace(NAMESPACE).with_name(name))["counters"]
    return sum(c.committed for c in counters)


def _cbt(*args: str) -> str:
    return subprocess.run(["cbt", "-project", PROJECT, "-instance", INSTANCE, *args],
                          capture_output=True, text=True, check=True, timeout=60).stdout


def _write_tar(path, members) -> str:
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


# --- pure functions -----------------------------------------------------------------------

def test_sample_to_row_lays_out_one_cell_per_field():
    sample = {"__key__": "spk01_0001", "__url__": "a.tar", "flac": b"\x01\x02",
              "cls": b"3", "txt": "héllo"}
    key, cells = sample_to_row(sample, "raw", {"txt": "meta:caption"})
    assert key == b"spk01_0001"
    assert cells == [("raw", b"flac", b"\x01\x02"), ("raw", b"cls", b"3"),
                     ("meta", b"caption", "héllo".encode())]


@pytest.mark.parametrize("sample, columns, member, message", [
    ({"flac": b"x"}, None, None, "no usable __key__"),
    ({"__key__": "k" * 5000, "flac": b"x"}, None, None, "row key is 5000 bytes"),
    ({"__key__": "k", "cls": 3}, None, "cls", "holds int, not bytes or str"),
    ({"__key__": "k", "mp4": TOO_BIG}, None, "mp4", "over Bigtable's recommended"),
    ({"__key__": "k", "a": b"1", "b": b"2"}, {"b": "raw:a"}, "b", "both map to column raw:a"),
    ({"__key__": "k", "__url__": "u"}, None, None, "no data field"),
])
def test_sample_to_row_refuses(sample, columns, member, message):
    with pytest.raises(RowRefused, match=message) as e:
        sample_to_row(sample, "raw", columns)
    assert e.value.member == member


def test_sample_to_row_refuses_rows_over_the_row_limit(monkeypatch):
    monkeypatch.setattr(bigtable_sink, "MAX_ROW_BYTES", 3)
    with pytest.raises(RowRefused, match="holds 4 bytes"):
        sample_to_row({"__key__": "k", "a": b"12", "b": b"34"})


def test_example_rows_are_split_prefixed_hex_order_keys():
    assert example_row_key("train", 0x0123456789ABCDEF) == b"train#0123456789abcdef"
    assert example_row_key("eval", 5) == b"eval#0000000000000005"
    assert example_row("test", 2**64 - 1, b"ex") == (
        b"test#ffffffffffffffff", [("ex", b"example", b"ex"), ("ex", b"split", b"test")])


def test_rows_fn_directly():
    fn = bigtable_sink._SampleRowsFn(datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc),
                                     "raw", {})
    fn.setup()
    [row] = fn.process({"__key__": "k", "__url__": "u.tar", "cls": b"1"})
    assert row.row_key == b"k" and row.get_mutations_size() > 0
    [refused] = fn.process({"__key__": "k2", "__url__": "u.tar", "cls": 1})
    assert refused.tag == FAILURES
    assert (refused.value["stage"], refused.value["key"], refused.value["member"]) == (
        "write_bigtable", "k2", "cls")


def test_bad_configuration_is_refused_at_construction():
    with pytest.raises(ValueError, match="default app profile"):
        WriteSamplesToBigtable(BigtableTable("p", "i", "t", app_profile="batch"))
    with pytest.raises(ValueError, match="not a valid Bigtable column family"):
        WriteExamplesToBigtable(BigtableTable("p", "i", "t"), family="bad:family")
    with pytest.raises(ValueError, match="not 'family:qualifier'"):
        WriteSamplesToBigtable(BigtableTable("p", "i", "t"), columns={"flac": "audio"})


# --- transforms on the emulator -----------------------------------------------------------

def test_write_samples_refuses_oversized_cells_and_writes_the_rest(bigtable_emulator, pipeline):
    config = _config()
    assert ensure_table(config, ["raw", "meta"], create=True) == ["meta", "raw"]
    samples = [
        {"__key__": "a", "__url__": "s.tar", "flac": b"\x00\x01", "cls": b"1"},
        {"__key__": "b", "__url__": "s.tar", "mp4": TOO_BIG, "cls": b"2"},
        {"__key__": "c", "__url__": "s.tar", "json": '{"x": 1}', "cls": b"3"},
    ]
    refused = (pipeline | beam.Create(samples)
               | WriteSamplesToBigtable(config, columns={"json": "meta:json"}))
    assert_that(refused | beam.Map(lambda r: (r["unit"], r["stage"], r["url"], r["key"],
                                              r["member"], "10 MiB" in r["message"])),
                equal_to([("sample", "write_bigtable", "s.tar", "b", "mp4", True)]))
    result = pipeline.run()
    result.wait_until_finish()

    rows = _read_table(config)
    assert _values(rows) == {
        b"a": {("raw", b"flac"): b"\x00\x01", ("raw", b"cls"): b"1"},
        b"c": {("meta", b"json"): b'{"x": 1}', ("raw", b"cls"): b"3"},
    }
    # One timestamp for every cell of the job: a retried write repeats cells, adds no version.
    assert len({ts for cells in rows.values() for _, ts in cells.values()}) == 1
    assert _counter(result, "bigtable_rows_written") == 2
    assert _counter(result, "bigtable_cells_written") == 4
    assert _counter(result, "bigtable_bytes_written") == 2 + 1 + 8 + 1
    assert _counter(result, "bigtable_rows_refused") == 1


def test_write_examples_to_bigtable(bigtable_emulator, pipeline):
    config = _config()
    ensure_table(config, ["ex"], create=True)
    examples = [Example("train", 0x0123456789ABCDEF, b"example-1"),
                Example("eval", 5, b"example-2"),
                Example("train", 2**64 - 1, b"example-3"), Example("test", 7, TOO_BIG)]
    # Made by an untyped step, as BuildExamples' are: order keys up to 2**64 - 1 do not fit
    # the VarIntCoder Create would infer for them.
    refused = (pipeline | beam.Create(range(len(examples))) | beam.Map(examples.__getitem__)
               | WriteExamplesToBigtable(config))
    assert_that(refused | beam.Map(lambda r: (r["unit"], r["stage"], r["url"], r["key"],
                                              r["member"], r["split"])),
                equal_to([("example", "write_bigtable", config.url,
                           "test#0000000000000007", "example", "test")]))
    result = pipeline.run()
    result.wait_until_finish()

    assert _values(_read_table(config)) == {
        b"train#0123456789abcdef": {("ex", b"example"): b"example-1", ("ex", b"split"): b"train"},
        b"eval#0000000000000005": {("ex", b"example"): b"example-2", ("ex", b"split"): b"eval"},
        b"train#ffffffffffffffff": {("ex", b"example"): b"example-3", ("ex", b"split"): b"train"},
    }
    assert _counter(result, "bigtable_rows_written") == 3
    assert _counter(result, "bigtable_rows_refused") == 1


# --- the tar -> Bigtable pipeline ---------------------------------------------------------

@pytest.fixture
def cbt_available():
    if shutil.which("cbt") is None:
        pytest.skip("cbt (Google Cloud CLI) not found")


def _flags(tmp_path, config, *extra) -> list:
    return ["--input", str(tmp_path / "corpus" / "*.tar"), "--project", config.project,
            "--instance", config.instance, "--table", config.table, *extra]


def test_tar_to_bigtable_loads_the_av_corpus(bigtable_emulator, cbt_available, tmp_path,
                                             capsys):
    paths = write_corpus(str(tmp_path / "corpus"), shards=2, samples_per_shard=4, kind="av",
                         seconds=1.0)
    config = _config()
    failures = tmp_path / "failures.jsonl"
    result = tar_to_bigtable.run(_flags(tmp_path, config, "--create_table",
                                        "--failures_output", str(failures)))

    expected = _tar_members(paths)
    assert len(expected) == 8
    rows = _values(_read_table(config))
    assert rows == {key.encode(): {("raw", ext.encode()): data for ext, data in members.items()}
                    for key, members in expected.items()}
    assert failures.read_text() == ""
    assert (f"datagen: 8 samples read -> 8 rows written to {config.url}, "
            "0 samples + 0 files failed") in capsys.readouterr().out
    members = [data for m in expected.values() for data in m.values()]
    assert _counter(result, "samples_read") == 8
    assert _counter(result, "bigtable_rows_written") == 8
    assert _counter(result, "bigtable_cells_written") == len(members)
    assert _counter(result, "bigtable_bytes_written") == sum(len(d) for d in members)

    # Google's own CLI sees the same table.
    assert _cbt("count", config.table).strip() == "8"
    listed = _cbt("read", config.table, "prefix=spk01_", "columns=raw:cls")
    assert "spk01_00001" in listed and "raw:cls" in listed


def test_missing_table_fails_before_any_work(bigtable_emulator, tmp_path, monkeypatch):
    write_corpus(str(tmp_path / "corpus"), shards=1, samples_per_shard=1)
    config = _config()

    def no_pipeline(options):
        raise AssertionError("a pipeline was built")

    monkeypatch.setattr(transforms, "make_pipeline", no_pipeline)
    with pytest.raises(ValueError, match="does not exist.*pass --create_table"):
        tar_to_bigtable.run(_flags(tmp_path, config))
    assert not _table(config).exists()


@pytest.mark.parametrize("drop, message", [("--instance", "--instance required"),
                                           ("--input", "--input is required")])
def test_missing_flags_fail_early(tmp_path, drop, message):
    flags = _flags(tmp_path, BigtableTable("p", "i", "t"))
    i = flags.index(drop)
    with pytest.raises(ValueError, match=message):
        tar_to_bigtable.run(flags[:i] + flags[i + 2:])


def test_too_many_refusals_fail_the_load_after_writing_the_rest(bigtable_emulator, tmp_path):
    (tmp_path / "corpus").mkdir()
    _write_tar(tmp_path / "corpus" / "a.tar", [("good.cls", b"1"), ("huge.bin", TOO_BIG),
                                               ("huge.cls", b"2")])
    config = _config()
    failures = tmp_path / "failures.jsonl"
    with pytest.raises(Exception, match=r"1 of 2 inputs failed .*max_failure_fraction"):
        tar_to_bigtable.run(_flags(tmp_path, config, "--create_table", "--family", "data",
                                   "--failures_output", str(failures)))
    [record] = [json.loads(line) for line in failures.read_text().splitlines()]
    assert (record["stage"], record["key"], record["member"]) == ("write_bigtable", "huge", "bin")
    assert _values(_read_table(config)) == {b"good": {("data", b"cls"): b"1"}}


def test_pipeline_module_names_no_flag_twice():
    """Beam parses every loaded options class together: a duplicate flag breaks every job."""
    options = PipelineOptions(["--instance", "i"])
    assert options.get_all_options()["instance"] == "i"

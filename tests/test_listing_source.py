"""The CSV/JSONL listing source: row parsing, path resolution, launch checks, and
ReadListingSamples on the local runner over listings written here."""

import gzip
import io
import json
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from transforms.sources.input_files import StorageReadError
from transforms.sources.listing import (
    ReadListingSamples,
    inspect_listings,
    iter_samples,
    missing_fields,
    plan_listing_units,
    read_media,
)
from transforms.sources.listing_rows import (
    ListingLayout,
    MediaReadError,
    listing_format,
    parse_row,
    row_to_sample,
)
from transforms.sources.media_paths import resolve

# The first bytes of a FLAC and of a WAV file: a media column's file must start so.
FLAC, WAV = b"fLaC", b"RIFF\x24\x00\x00\x00WAVE"

CSV = ListingLayout("csv", ("path", "label", "note"), ("path",))


@pytest.mark.parametrize("line, row", [
    (b"a.wav,3,plain", {"path": "a.wav", "label": "3", "note": "plain"}),
    (b'a.wav,3,"x, y"', {"path": "a.wav", "label": "3", "note": "x, y"}),
    (b'a.wav,3,"say ""hi"""', {"path": "a.wav", "label": "3", "note": 'say "hi"'}),
    (b'"dir/a b.wav",,', {"path": "dir/a b.wav", "label": "", "note": ""}),
    ("é.wav,3,ü".encode(), {"path": "é.wav", "label": "3", "note": "ü"}),
])
def test_csv_rows_follow_rfc_4180_on_one_line(line, row):
    assert parse_row(line, CSV) == row


@pytest.mark.parametrize("line, message", [
    (b'a.wav,3,"starts a quoted', "not one CSV row"),    # a quoted field's first line
    (b'field ends",3,x', "not one CSV row"),             # ... and its last
    (b'a.wav,"3"x,y', "not one CSV row"),
    (b"a.wav,3", "has 2 fields, the header 3"),
    (b"a.wav,3,x,extra", "has 4 fields"),
    (b"a.wav,3,\xff", "not UTF-8"),
])
def test_lines_that_are_not_rows(line, message):
    with pytest.raises(ValueError, match=message):
        parse_row(line, CSV)


def test_tsv_and_jsonl_rows():
    tsv = ListingLayout("tsv", ("path", "text"), ("path",))
    assert parse_row(b'a.wav\t"some,\t""text"""', tsv) == {"path": "a.wav",
                                                            "text": 'some,\t"text"'}
    with pytest.raises(ValueError, match="not one CSV row"):
        parse_row(b'a.wav\tsome "text"', tsv)
    jsonl = ListingLayout("jsonl", ("path",), ("path",))
    assert parse_row(b'{"path": "a.wav", "n": [1, 2]}', jsonl) == {"path": "a.wav", "n": [1, 2]}
    with pytest.raises(ValueError, match="not a JSON object"):
        parse_row(b'["a.wav"]', jsonl)
    with pytest.raises(ValueError, match="not JSON"):
        parse_row(b'{"path": ', jsonl)


@pytest.mark.parametrize("manifest, path, resolved", [
    ("/data/lists/m.csv", "clips/a.wav", "/data/lists/clips/a.wav"),
    ("/data/lists/m.csv", "../clips/a.wav", "/data/clips/a.wav"),
    ("/data/lists/m.csv", "/elsewhere/a.wav", "/elsewhere/a.wav"),
    ("/data/lists/m.csv", "gs://b/a.wav", "gs://b/a.wav"),
    ("m.csv", "a.wav", "a.wav"),
    ("gs://bucket/lists/m.csv", "clips/a.wav", "gs://bucket/lists/clips/a.wav"),
    ("gs://bucket/lists/m.csv", "../clips/a.wav", "gs://bucket/clips/a.wav"),
])
def test_media_paths_resolve_against_the_manifest(manifest, path, resolved):
    assert resolve(manifest, path) == resolved


@pytest.mark.parametrize("path, fmt", [
    ("a.csv", "csv"), ("gs://b/a.CSV.gz", "csv"), ("a.tsv.bz2", "tsv"), ("a.jsonl", "jsonl"),
    ("a.ndjson.gz", "jsonl"),
])
def test_format_from_the_extension(path, fmt):
    assert listing_format(path) == fmt


@pytest.mark.parametrize("path", ["a.txt", "a.json", "a", "a.gz"])
def test_unknown_format_is_an_error(path):
    with pytest.raises(ValueError, match="cannot tell its format"):
        listing_format(path)


def test_row_to_sample_fields_and_keys():
    files = {"/m/clips/spk1_001.flac": FLAC, "/m/v/x.mp4": b"\x00\x00\x00\x18ftypisom"}
    layout = ListingLayout("jsonl", ("audio", "video"), ("audio", "video"))
    row = {"audio": "clips/spk1_001.flac", "video": "v/x.mp4", "label": 3, "tags": ["a", "b"],
           "meta": {"age": 30}, "text": "hé", "gone": None, "ok": True}
    sample = row_to_sample(row, "/m/list.jsonl", layout, files.__getitem__)
    assert sample == {"__key__": "clips/spk1_001", "__url__": "/m/list.jsonl", "audio": FLAC,
                      "video": files["/m/v/x.mp4"], "label": 3, "tags": ["a", "b"],
                      "meta": b'{"age": 30}', "text": "hé".encode(), "ok": True}
    keyed = ListingLayout("jsonl", ("audio", "id"), ("audio",), key_column="id")
    assert row_to_sample({"audio": "/m/clips/spk1_001.flac", "id": 17}, "/m/list.jsonl", keyed,
                         files.__getitem__)["__key__"] == "17"


def test_row_to_sample_failures_name_the_row_column_and_file():
    layout = ListingLayout("csv", ("path", "label"), ("path",))
    with pytest.raises(MediaReadError) as e:
        row_to_sample({"path": "gone.wav", "label": "1"}, "/m/list.csv", layout,
                      lambda p: open(p, "rb").read())
    assert (e.value.key, e.value.column, e.value.path) == ("gone", "path", "/m/gone.wav")
    assert "FileNotFoundError" in str(e.value)
    with pytest.raises(ValueError, match="media column 'path' holds no path"):
        row_to_sample({"path": "", "label": "1"}, "/m/list.csv", layout, bytes)
    with pytest.raises(ValueError, match="reserved"):
        row_to_sample({"path": "a.wav", "__key__": "x"}, "/m/list.csv", layout, bytes)


class _BrokenFile(io.BytesIO):
    """Opens, then fails to read, the way a gs:// read fails once the storage client
    has given up (requests' ConnectionError is an OSError)."""

    def read(self, size=-1):
        raise ConnectionError("Connection reset by peer")


def test_storage_errors_after_opening_propagate_instead_of_becoming_dead_letters(monkeypatch):
    monkeypatch.setattr(FileSystems, "open", lambda path, **kwargs: _BrokenFile())
    layout = ListingLayout("csv", ("path",), ("path",))
    with pytest.raises(StorageReadError, match="gs://b/a.wav at byte 0 failed: ConnectionError"):
        row_to_sample({"path": "a.wav"}, "gs://b/list.csv", layout, read_media)


def _write(path, lines, *, header="path,label,speaker", newline="\n", opener=open):
    with opener(path, "wt", encoding="utf-8", newline="") as f:
        f.write("".join(line + newline for line in ([header] if header else []) + lines))


def test_inspect_reads_headers_and_names_what_is_missing(tmp_path):
    _write(tmp_path / "a.csv", ["x.wav,1,s"], header="\ufeffpath,label,speaker")  # Excel's BOM
    _write(tmp_path / "b.csv", ["y.wav,2,s"])
    files, layout = inspect_listings([str(tmp_path / "*.csv")], ["path"])
    assert files == [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    assert layout == ListingLayout("csv", ("path", "label", "speaker"), ("path",))
    with pytest.raises(ValueError, match="no column 'audio' in the listing"):
        inspect_listings([str(tmp_path / "a.csv")], ["audio"])
    with pytest.raises(ValueError, match="no column 'id'"):
        inspect_listings([str(tmp_path / "a.csv")], ["path"], "id")
    with pytest.raises(ValueError, match="names no column"):
        inspect_listings([str(tmp_path / "a.csv")], [])
    _write(tmp_path / "c.csv", ["z.wav,s,3"], header="path,speaker,label")
    with pytest.raises(ValueError, match="differ in format or columns"):
        inspect_listings([str(tmp_path / "*.csv")], ["path"])
    _write(tmp_path / "d.tsv", ["z.wav\tz.wav"], header="path\tpath")
    with pytest.raises(ValueError, match="unique"):
        inspect_listings([str(tmp_path / "d.tsv")], ["path"])
    pandas = tmp_path / "pandas.csv"   # DataFrame.to_csv's default: its index, unnamed
    subprocess.run([sys.executable, "-c", "import pandas; pandas.DataFrame({'path': ['z.wav']})"
                    f".to_csv({str(pandas)!r})"], check=True)
    with pytest.raises(ValueError, match=r"first column with no name is the index pandas "
                                         r"writes: to_csv\(..., index=False\)"):
        inspect_listings([str(pandas)], ["path"])
    _write(tmp_path / "e.csv", ["z.wav,1"], header="path,__key__")
    with pytest.raises(ValueError, match="reserved: __key__"):
        inspect_listings([str(tmp_path / "e.csv")], ["path"])
    with pytest.raises(ValueError, match="matches no file"):
        inspect_listings([str(tmp_path / "none-*.csv")], ["path"])


def test_missing_fields():
    layout = ListingLayout("jsonl", ("audio", "label", "meta"), ("audio",))
    assert missing_fields(layout.columns, [("--features", "label"), ("--features", "meta.age"),
                                   ("--split_by", "__key__"), ("--split_column", None),
                                   ("--stratify_by", "cls"), ("--features", "metadata")]) == [
        "'cls' (--stratify_by)", "'metadata' (--features)"]


# A manifest of 300 rows in a nested folder, made here: media files media/NNN.bin
# holding a FLAC signature and b"payload NNN", every seventh missing; CRLF line
# ends and blank lines, read in short ranges so rows straddle many range boundaries.
ROWS = 300


def _corpus(tmp_path):
    (tmp_path / "media").mkdir()
    lines, missing = [], set()
    for i in range(ROWS):
        if i % 7 == 3:
            missing.add(f"media/{i:03d}")
        else:
            (tmp_path / "media" / f"{i:03d}.bin").write_bytes(FLAC + f"payload {i:03d}".encode())
        lines.append(f'media/{i:03d}.bin,{i % 5},"spk{i % 11}, ""the {i % 2}"""')
        if i % 50 == 0:
            lines.append("")
    _write(tmp_path / "list.csv", lines, newline="\r\n")
    return missing


def _counter(result, name):
    found = result.metrics().query(
        MetricsFilter().with_namespace("datagen").with_name(name))["counters"]
    return sum(c.committed for c in found)


def test_every_row_read_once_across_range_boundaries(tmp_path, pipeline):
    missing = _corpus(tmp_path)
    files, layout = inspect_listings([str(tmp_path / "list.csv")], ["path"])
    # 300 bytes of media a unit: rows of 15-byte files make ranges of about 700 bytes.
    units = plan_listing_units(files, layout, target_bytes=300)
    assert len(units) > 10 and sum(u.inputs[2] - u.inputs[1] for u in units) == (
        tmp_path / "list.csv").stat().st_size
    read = pipeline | ReadListingSamples(files, ["path"], target_bytes=300)
    assert_that(read.samples | "Keys" >> beam.Map(
        lambda s: (s["__key__"], s["path"], s["label"], s["speaker"])),
        equal_to([(f"media/{i:03d}", FLAC + f"payload {i:03d}".encode(), str(i % 5).encode(),
                   f'spk{i % 11}, "the {i % 2}"'.encode())
                  for i in range(ROWS) if f"media/{i:03d}" not in missing]),
        label="samples")
    manifest = str(tmp_path / "list.csv")
    assert_that(read.failures | "Letters" >> beam.Map(
        lambda r: (r["stage"], r["unit"], r["url"], r["key"], r["member"], r["column"])),
        equal_to([("read_media", "sample", manifest, key, str(tmp_path / f"{key}.bin"), "path")
                  for key in missing]), label="failures")
    result = pipeline.run()
    assert _counter(result, "samples_read") == _counter(result, "manifest_rows_read") == ROWS
    assert _counter(result, "media_files_read") == ROWS - len(missing)
    assert _counter(result, "media_bytes_read") == len(FLAC + b"payload 000") * (
        ROWS - len(missing))


@pytest.mark.parametrize("members", [1, 2])
def test_a_gzip_listing_is_cut_into_ranges_of_its_text(tmp_path, pipeline, members):
    """GNU gzip's file (or two members of it, cat'ed: the trailer then gives
    the last one's size alone): ranges of the text, the last running to the
    end, each row read once."""
    missing = _corpus(tmp_path)
    text = (tmp_path / "list.csv").read_bytes()
    header, rest = text.split(b"\r\n", 1)
    half = rest.index(b"\r\n", len(rest) // 2) + 2
    parts = [text] if members == 1 else [header + b"\r\n" + rest[:half], rest[half:]]
    for i, part in enumerate(parts):
        (tmp_path / f"part{i}").write_bytes(part)
        subprocess.run(["gzip", "-n", str(tmp_path / f"part{i}")], check=True)
    (tmp_path / "list.csv.gz").write_bytes(b"".join(
        (tmp_path / f"part{i}.gz").read_bytes() for i in range(len(parts))))
    files, layout = inspect_listings([str(tmp_path / "list.csv.gz")], ["path"])
    units = plan_listing_units(files, layout, target_bytes=300)
    assert len(units) > (10 if members == 1 else 4)
    assert [u.inputs[1] for u in units] == sorted(u.inputs[1] for u in units)
    assert units[-1].inputs[2] is None and all(u.inputs[2] for u in units[:-1])
    read = pipeline | ReadListingSamples(files, ["path"], target_bytes=300)
    assert_that(read.samples | "Keys" >> beam.Map(lambda s: s["__key__"]),
                equal_to([f"media/{i:03d}" for i in range(ROWS)
                          if f"media/{i:03d}" not in missing]), label="samples")
    result = pipeline.run()
    assert _counter(result, "manifest_rows_read") == ROWS


def test_units_name_the_version_of_their_listing(tmp_path):
    """What --resume compares (transforms/writer/ledger.py): the listing as planned."""
    _corpus(tmp_path)
    listing = tmp_path / "list.csv"
    files, layout = inspect_listings([str(listing)], ["path"])
    units = plan_listing_units(files, layout, target_bytes=300)
    stat = listing.stat()
    assert {u.versions for u in units} == {((str(listing), f"size={stat.st_size} mtime_ns="
                                             f"{stat.st_mtime_ns} ctime_ns={stat.st_ctime_ns}"),)}
    listing.write_bytes(listing.read_bytes().replace(b"spk1,", b"spk2,"))  # the same size
    again = plan_listing_units(files, layout, target_bytes=300)
    assert [u.inputs for u in again] == [u.inputs for u in units]
    assert all(a.versions != u.versions for a, u in zip(again, units))


def test_jsonl_gz_manifest_with_bad_lines(tmp_path, pipeline):
    (tmp_path / "a.wav").write_bytes(WAV)
    rows = [json.dumps({"file": "a.wav", "label": 1, "tags": ["x"]}),
            "not json", json.dumps({"file": 7}), json.dumps({"label": 2})]
    _write(tmp_path / "m.jsonl.gz", rows, header=None, opener=gzip.open)
    files, layout = inspect_listings([str(tmp_path / "m.jsonl.gz")], ["file"])
    assert layout.columns == ("file", "label", "tags")
    read = pipeline | ReadListingSamples(files, ["file"])
    assert_that(read.samples, equal_to([{"__key__": "a", "__url__": files[0], "file": WAV,
                                         "label": 1, "tags": ["x"]}]), label="samples")
    assert_that(read.failures | beam.Map(lambda r: (r["stage"], r["message"].split(":")[0])),
                equal_to([("read_manifest", "line is not JSON (Expecting value"),
                          ("read_manifest", "media column 'file' holds no path"),
                          ("read_manifest", "media column 'file' holds no path")]),
                label="failures")
    pipeline.run()


def test_a_jsonl_files_byte_order_mark_does_not_cost_its_first_row(tmp_path, pipeline):
    # Made here: a JSONL file as some Windows editors save it, a UTF-8 BOM first.
    (tmp_path / "a.wav").write_bytes(WAV)
    _write(tmp_path / "m.jsonl", ["\ufeff" + json.dumps({"file": "a.wav", "label": 1})],
           header=None)
    files, layout = inspect_listings([str(tmp_path / "m.jsonl")], ["file"])
    assert layout.columns == ("file", "label")
    expected = {"__key__": "a", "__url__": files[0], "file": WAV, "label": 1}
    assert list(iter_samples(files, layout)) == [expected]
    read = pipeline | ReadListingSamples(files, ["file"])
    assert_that(read.samples, equal_to([expected]), label="samples")
    assert_that(read.failures, equal_to([]), label="failures")
    pipeline.run()


def test_iter_samples_reads_lazily_and_skips_bad_rows(tmp_path):
    missing = _corpus(tmp_path)
    files, layout = inspect_listings([str(tmp_path / "list.csv")], ["path"])
    first = []
    for sample in iter_samples(files, layout):
        first.append(sample["__key__"])
        if len(first) == 5:
            break
    expected = [f"media/{i:03d}" for i in range(ROWS) if f"media/{i:03d}" not in missing][:5]
    assert first == expected


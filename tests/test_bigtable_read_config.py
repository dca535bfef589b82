"""What to read from a table and how a row becomes a Sample
(transforms/sources/bigtable/read_config.py): pure functions, no emulator."""

import codecs

import pytest

from transforms.format.sample import KEY, URL
from transforms.sources.bigtable.read_config import (
    BigtableReadConfig,
    MissingColumnError,
    parse_columns,
    row_to_sample,
)
from transforms.sources.bigtable.rows import Cell, Row
from transforms.sources.bigtable.table import BigtableTable


def _config(table, columns="raw:wav=wav,meta:cls=cls", **kwargs):
    return BigtableReadConfig(BigtableTable("test-project", "test-instance", table), columns,
                              **kwargs)


def _cell(family, qualifier, value, ts=1000, labels=None):
    return Cell(family, qualifier, ts, tuple(labels or ()), value)


def test_row_to_sample():
    config = _config("t", "raw:wav=wav,meta:*", required=("wav",))
    row = Row(b"spk1/\xe2\x82\xac", [
        _cell("raw", b"wav", b"old", ts=1), _cell("raw", b"wav", b"new", ts=2),
        _cell("meta", b"cls", b"3"), _cell("meta", b"lang", b"en"),
        _cell("raw", b"wav", b"", ts=2, labels=["datagen-row"]),  # the marker cell
        _cell("raw", b"unmapped", b"x"),
    ])
    assert row_to_sample(row, config) == {
        KEY: "spk1/\u20ac", URL: "bigtable://test-project/test-instance/t",
        "wav": b"new", "cls": b"3", "lang": b"en"}

    with pytest.raises(MissingColumnError, match="row 'k' has no cell in required column "
                                                 "raw:wav") as error:
        row_to_sample(Row(b"k", [_cell("meta", b"cls", b"3")]), config)
    assert error.value.columns == ["raw:wav"]
    with pytest.raises(ValueError, match="columns meta:wav and raw:wav both map to field 'wav'"):
        row_to_sample(Row(b"k", [_cell("raw", b"wav", b"1"), _cell("meta", b"wav", b"2")]), config)
    with pytest.raises(ValueError, match="reserved"):
        row_to_sample(Row(b"k", [_cell("raw", b"wav", b"1"), _cell("meta", b"__key__", b"2")]),
                      config)


def _key_of(row_key: bytes) -> str:
    """The `__key__` of the Sample read from a row with this key."""
    row = Row(row_key, [_cell("raw", b"wav", b"x")])
    return row_to_sample(row, _config("t", "raw:wav=wav"))[KEY]


def test_row_keys_are_escaped_losslessly():
    assert _key_of(b"spk1/0001") == "spk1/0001"
    assert _key_of("caf\u00e9".encode()) == "caf\u00e9"
    assert _key_of(b"\x8a\xffspk1/0001") == "\\x8a\\xffspk1/0001"
    assert _key_of(b"caf\xc3") == "caf\\xc3"  # a cut multi-byte sequence
    # Lossless: a key holding a backslash never reads like a binary one.
    assert _key_of(b"a\\xff") == "a\\\\xff" != _key_of(b"a\xff")
    for key in (b"a\\xff", b"a\xff", b"\\", b"caf\xc3\\"):
        assert codecs.escape_decode(_key_of(key).encode())[0] == key


def test_parse_columns():
    assert parse_columns("raw:wav=wav, raw:label=cls,meta:*,raw:mp4") == {
        "raw:wav": "wav", "raw:label": "cls", "meta:*": "*", "raw:mp4": "raw:mp4"}
    for bad, message in [("rawwav", "not family:qualifier"), ("raw:", "not family:qualifier"),
                         ("r@w:x", "not family:qualifier"), ("raw:x=", "empty field name"),
                         ("raw:*=x", "cannot be renamed"), ("raw:x=__key__", "reserved"),
                         ("raw:x,raw:x=y", "twice")]:
        with pytest.raises(ValueError, match=message):
            parse_columns(bad)


def test_config_validation():
    config = _config("t", {"raw:wav": "wav", "meta:*": "*"}, start_key="a", prefix="p")
    assert config.required == ("wav", "meta:*") and config.families == ("meta", "raw")
    assert config.start_key == b"a" and config.key_range() == (b"p", b"q")
    assert _config("t", prefix=b"a\xff\xff").key_range() == (b"a\xff\xff", b"b")
    assert _config("t", prefix=b"\xff").key_range() == (b"\xff", b"")
    for kwargs, message in [(dict(columns="raw:a=x,raw:b=x"), "two columns to field 'x'"),
                            (dict(columns=""), "not family:qualifier"),
                            (dict(columns={}), "at least one column"),
                            (dict(required=("nope",)), "not mapped columns"),
                            (dict(sample_fraction=0), "sample_fraction"),
                            (dict(max_rows=-1), "max_rows"), (dict(max_ranges=0), "max_ranges")]:
        with pytest.raises(ValueError, match=message):
            _config("t", **kwargs)

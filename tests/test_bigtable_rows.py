"""Tests for transforms/sources/bigtable/rows.py: the ReadRows chunk merge and RowReader.

The merge is fed responses built by hand (the emulator always sends whole
cells, one row per response, so split cells and resets need hand-made
streams); RowReader is checked against the real emulator, row for row equal to
the data client's own reader.
"""

import pytest
from google.cloud import bigtable
from google.cloud.bigtable.data import (
    BigtableDataClient,
    ReadRowsQuery,
    RowMutationEntry,
    RowRange,
    SetCell,
    row_filters,
)
from google.cloud.bigtable.data.exceptions import InvalidChunk
from google.cloud.bigtable_v2.types import ReadRowsResponse

from transforms.sources.bigtable.rows import Cell, Row, RowReader, merge_rows
from transforms.sources.bigtable.table import BigtableTable

PROJECT, INSTANCE = "test-project", "test-instance"
_Response = ReadRowsResponse.pb()


def _response(*chunks):
    """A ReadRowsResponse from chunk dicts; family/qualifier as plain values."""
    response = _Response()
    for fields in chunks:
        chunk = response.chunks.add()
        for name, value in fields.items():
            if name in ("family_name", "qualifier"):
                getattr(chunk, name).value = value
            elif name == "labels":
                chunk.labels.extend(value)
            else:
                setattr(chunk, name, value)
    return response


def test_whole_cells_family_and_qualifier_carry_over():
    rows = list(merge_rows([
        _response({"row_key": b"a", "family_name": "raw", "qualifier": b"wav",
                   "timestamp_micros": 2000, "value": b"A1"},
                  {"timestamp_micros": 1000, "value": b"A0"},  # older version, same column
                  {"qualifier": b"flac", "value": b"F", "labels": ["x"]},
                  {"family_name": "meta", "qualifier": b"cls", "value": b"3", "commit_row": True}),
        _response({"row_key": b"b", "family_name": "meta", "qualifier": b"cls", "value": b"4",
                   "commit_row": True})]))
    assert rows == [
        Row(b"a", [Cell("raw", b"wav", 2000, (), b"A1"), Cell("raw", b"wav", 1000, (), b"A0"),
                   Cell("raw", b"flac", 0, ("x",), b"F"), Cell("meta", b"cls", 0, (), b"3")]),
        Row(b"b", [Cell("meta", b"cls", 0, (), b"4")])]


def test_a_cell_split_over_chunks_and_responses_is_joined():
    rows = list(merge_rows([
        _response({"row_key": b"a", "family_name": "raw", "qualifier": b"wav",
                   "timestamp_micros": 7, "labels": ["l"], "value": b"he", "value_size": 9}),
        _response({"value": b"llo w", "value_size": 9},
                  {"value": b"ld", "commit_row": True})]))
    assert rows == [Row(b"a", [Cell("raw", b"wav", 7, ("l",), b"hello wld")])]


def test_reset_row_drops_the_partial_row():
    rows = list(merge_rows([_response(
        {"row_key": b"a", "family_name": "raw", "qualifier": b"wav", "value": b"stale"},
        {"reset_row": True},
        {"row_key": b"a", "family_name": "raw", "qualifier": b"wav", "value": b"fresh",
         "commit_row": True})]))
    assert rows == [Row(b"a", [Cell("raw", b"wav", 0, (), b"fresh")])]


@pytest.mark.parametrize("chunks, message", [
    ([{"family_name": "raw", "qualifier": b"q", "value": b"v", "commit_row": True}],
     "no row key"),
    ([{"row_key": b"a", "value": b"v", "commit_row": True}], "without a family"),
    ([{"row_key": b"a", "family_name": "raw", "value": b"v", "commit_row": True}],
     "without a qualifier"),
    ([{"row_key": b"b", "family_name": "f", "qualifier": b"q", "commit_row": True},
      {"row_key": b"a", "family_name": "f", "qualifier": b"q", "commit_row": True}],
     "does not follow"),
    ([{"row_key": b"a", "family_name": "f", "qualifier": b"q"},
      {"row_key": b"b", "value": b"v", "commit_row": True}], "changed key"),
    ([{"row_key": b"a", "family_name": "f", "qualifier": b"q", "value_size": 4,
       "commit_row": True}], "middle of a cell"),
    ([{"row_key": b"a", "family_name": "f", "qualifier": b"q"},
      {"reset_row": True, "value": b"v"}], "carries data"),
    ([{"row_key": b"a", "family_name": "f", "qualifier": b"q", "value": b"v"}],
     "ended inside row"),
])
def test_broken_streams_raise_invalid_chunk(chunks, message):
    with pytest.raises(InvalidChunk, match=message):
        list(merge_rows([_response(*chunks)]))


@pytest.fixture(scope="module")
def table(bigtable_emulator):
    """A table of 300 rows, two families, a 200 KB cell and versions."""
    admin = bigtable.Client(project=PROJECT, admin=True)
    admin.instance(INSTANCE).table("rows").create(column_families={"raw": None, "meta": None})
    admin.close()
    with BigtableDataClient(project=PROJECT) as client:
        table = client.get_table(INSTANCE, "rows")
        table.bulk_mutate_rows([
            RowMutationEntry(b"k%03d" % i, [
                SetCell("raw", b"wav", bytes([i % 251]) * (200_000 if i == 7 else 100 + i),
                        timestamp_micros=1000),
                SetCell("raw", b"wav", b"newer", timestamp_micros=2000),
                SetCell("meta", b"cls", str(i % 5).encode())])
            for i in range(300)])
        yield table


@pytest.mark.parametrize("start, end, limit", [(b"", b"", 0), (b"k010", b"k200", 0),
                                               (b"k250", b"", 7)])
def test_read_rows_matches_the_data_client(table, start, end, limit):
    newest = row_filters.CellsColumnLimitFilter(1)
    expected = [
        Row(row.row_key, [Cell(c.family, c.qualifier, c.timestamp_micros, tuple(c.labels),
                               c.value) for c in row.cells])
        for row in table.read_rows(ReadRowsQuery(
            row_ranges=RowRange(start_key=start or None, end_key=end or None),
            row_filter=newest, limit=limit or None))]
    reader = RowReader(BigtableTable(PROJECT, INSTANCE, "rows"))
    got = list(reader.read(start, end, newest, limit, timeout=60))
    reader.close()
    assert got == expected
    assert len(got) == (limit or (int(end[1:] or 300) - int(start[1:] or 0)))
    # Newest version only: one cell per column.
    assert all([c.value for c in row.cells if c.family == "raw"] == [b"newer"] for row in got)

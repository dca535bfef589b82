"""Bigtable ReadRows on the raw protobuf: one call, its chunks merged into rows.

Measured on the emulator (benchmarks/bigtable_bench.py), the data client's
`read_rows_stream` spends about 85 us of client CPU a row, mostly handing each
response from gRPC's polling thread to the reader's thread and wrapping it in
retry, metrics and proto-plus layers - our reader does its own retries anyway
(transforms/sources/bigtable/source.py `read_range`). `RowReader` makes ReadRows calls
on a channel of its own with gRPC's single-threaded unary-stream mode (the
reading thread drives the call: no hand-off), decodes the upb messages as
they are and merges their chunks into rows by the ReadRows rules; about 40 us
a row. The chunk rules:

- a row's first chunk carries its key, later ones may repeat it; keys rise;
- a chunk naming a family names a qualifier too; both carry over to the
  next cells of the row;
- a cell may come in pieces: `value_size > 0` means more of it follows;
- `reset_row` drops the row so far; `commit_row` ends it.

A stream that breaks them raises the client's `InvalidChunk`.

The channel goes where the data client's would: BIGTABLE_EMULATOR_HOST if
set, else bigtable.googleapis.com:443 with Application Default Credentials.
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator, NamedTuple

import grpc
from google.api_core.gapic_v1 import routing_header
from google.cloud.bigtable.data.exceptions import InvalidChunk
from google.cloud.bigtable_v2.services.bigtable.transports.grpc import BigtableGrpcTransport
from google.cloud.bigtable_v2.types import ReadRowsRequest, ReadRowsResponse, RowFilter

__all__ = ["Cell", "Row", "RowReader", "merge_rows", "open_channel"]

_METHOD = "/google.bigtable.v2.Bigtable/ReadRows"
_REQUEST = ReadRowsRequest.pb()  # the upb message classes, not the proto-plus wrappers
_RESPONSE = ReadRowsResponse.pb()
_CHANNEL_OPTIONS = [
    (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
    ("grpc.max_receive_message_length", -1),  # a row may exceed gRPC's 4 MB default
]


class Cell(NamedTuple):
    """One cell; the attribute names are the data client's `Cell`'s."""

    family: str
    qualifier: bytes
    timestamp_micros: int
    labels: tuple
    value: bytes


class Row(NamedTuple):
    """One row: its key and cells in the order the server sent them."""

    row_key: bytes
    cells: list


def open_channel() -> grpc.Channel:
    """A channel for ReadRows: the emulator's if BIGTABLE_EMULATOR_HOST is set, else Bigtable's."""
    emulator = os.environ.get("BIGTABLE_EMULATOR_HOST")
    if emulator:
        return grpc.insecure_channel(emulator, options=_CHANNEL_OPTIONS)
    return BigtableGrpcTransport.create_channel(f"{BigtableGrpcTransport.DEFAULT_HOST}:443",
                                                options=_CHANNEL_OPTIONS)


class RowReader:
    """ReadRows calls on one table, rows merged from the raw responses; no retries.

    `table_name` is `projects/P/instances/I/tables/T`. The reader owns its
    channel (`open_channel()` unless one is given) and closes it in `close()`.
    """

    def __init__(self, table_name: str, app_profile_id: str = "",
                 channel: grpc.Channel | None = None):
        self._table_name = table_name
        self._app_profile_id = app_profile_id
        self._channel = channel or open_channel()
        self._call = self._channel.unary_stream(
            _METHOD, request_serializer=_REQUEST.SerializeToString,
            response_deserializer=_RESPONSE.FromString)
        # Bigtable routes a request by these (what the generated client sends).
        self._metadata = (routing_header.to_grpc_metadata(
            {"table_name": table_name, "app_profile_id": app_profile_id}),)

    def read(self, start: bytes, end: bytes, row_filter=None, limit: int = 0, *,
             timeout: float | None = None) -> Iterator[Row]:
        """The rows of [start, end) (b"" end = table end), up to `limit` (0 = all).

        `row_filter` is a `google.cloud.bigtable.data.row_filters` filter.
        gRPC errors (`grpc.RpcError`) propagate; closing the iterator cancels
        the call.
        """
        request = _REQUEST(table_name=self._table_name, app_profile_id=self._app_profile_id,
                           rows_limit=limit)
        span = request.rows.row_ranges.add()
        span.start_key_closed = start
        if end:
            span.end_key_open = end
        if row_filter is not None:
            request.filter.CopyFrom(RowFilter.pb(row_filter._to_pb()))
        responses = self._call(request, timeout=timeout, metadata=self._metadata)
        try:
            yield from merge_rows(responses)
        finally:
            responses.cancel()

    def close(self) -> None:
        self._channel.close()


# One state machine, as the ReadRows chunk rules are written (C901: read it whole).
def merge_rows(responses: Iterable) -> Iterator[Row]:  # noqa: C901
    """ReadRowsResponse messages (raw protobuf) -> Rows, by the chunk rules above."""
    row_key = family = qualifier = None
    cells, pieces = [], []
    timestamp, labels = 0, ()
    last_key = b""
    for response in responses:
        for chunk in response.chunks:
            if chunk.reset_row:
                if (chunk.row_key or chunk.HasField("family_name") or chunk.HasField("qualifier")
                        or chunk.value or chunk.timestamp_micros or chunk.labels):
                    raise InvalidChunk("reset_row chunk carries data")
                if row_key is None:
                    raise InvalidChunk("reset_row outside a row")
                row_key = family = qualifier = None
                cells, pieces = [], []
                continue
            key = chunk.row_key
            if row_key is None:
                if not key:
                    raise InvalidChunk("a row's first chunk has no row key")
                if key <= last_key:
                    raise InvalidChunk(f"row key {key!r} does not follow {last_key!r}")
                row_key = key
            elif key and key != row_key:
                raise InvalidChunk(f"row {row_key!r} changed key to {key!r} before its commit")
            if chunk.HasField("family_name"):
                if not chunk.HasField("qualifier"):
                    raise InvalidChunk(f"row {row_key!r}: new family without a qualifier")
                family = chunk.family_name.value
                qualifier = chunk.qualifier.value
            elif chunk.HasField("qualifier"):
                if family is None:
                    raise InvalidChunk(f"row {row_key!r}: qualifier without a family")
                qualifier = chunk.qualifier.value
            elif family is None:
                raise InvalidChunk(f"row {row_key!r}: cell without a family")
            if not pieces:  # a cell starts here
                timestamp, labels = chunk.timestamp_micros, chunk.labels
                labels = tuple(labels) if labels else ()
            if chunk.value_size:  # more of this cell follows
                pieces.append(chunk.value)
            else:
                value = b"".join((*pieces, chunk.value)) if pieces else chunk.value
                cells.append(Cell(family, qualifier, timestamp, labels, value))
                pieces = []
            if chunk.commit_row:
                if pieces:
                    raise InvalidChunk(f"row {row_key!r} committed in the middle of a cell")
                yield Row(row_key, cells)
                last_key = row_key
                row_key = family = qualifier = None
                cells = []
    if row_key is not None:
        raise InvalidChunk(f"stream ended inside row {row_key!r}")

"""Bigtable ReadRows on the raw protobuf: calls whose chunks are merged into rows,
retried after the last row delivered.

Why our own: the data client's `read_rows_stream` spends most of its client
CPU a row handing each response from gRPC's polling thread to the reader's
thread and wrapping it in retry, metrics and proto-plus layers - and our
retries are our own (`read_range`). `RowReader` makes ReadRows calls on a
channel of its own with gRPC's single-threaded unary-stream mode (the reading
thread drives the call: no hand-off), decodes the upb messages as they are and
merges their chunks into rows by the ReadRows rules, in about half the CPU a
row (docs/performance.md). The chunk rules:

- a row's first chunk carries its key, later ones may repeat it; keys rise;
- a chunk naming a family names a qualifier too; both carry over to the
  next cells of the row;
- a cell may come in pieces: `value_size > 0` means more of it follows;
- `reset_row` drops the row so far; `commit_row` ends it.

A stream that breaks them raises the client's `InvalidChunk`.

`read_range` retries UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED (and reset
streams) itself, with exponential backoff, resuming just after the last row
delivered - so none is lost or repeated, and a splittable read's claims stay
the truth about what was read. Attempts are bounded per stretch without
progress; then the error is raised, as is any other error.

The channel goes where the data client's would: BIGTABLE_EMULATOR_HOST if
set, else bigtable.googleapis.com:443 with Application Default Credentials.
"""

from __future__ import annotations

import os
import random
import time
from typing import Callable, Iterable, Iterator, NamedTuple

import grpc
from google.api_core.gapic_v1 import routing_header
from google.cloud.bigtable.data.exceptions import InvalidChunk
from google.cloud.bigtable_v2.services.bigtable.transports.grpc import BigtableGrpcTransport
from google.cloud.bigtable_v2.types import ReadRowsRequest, ReadRowsResponse, RowFilter

from transforms.sources.bigtable.table import BigtableTable

__all__ = ["Cell", "Row", "RowReader", "is_transient", "merge_rows", "open_channel",
           "read_range"]

_METHOD = "/google.bigtable.v2.Bigtable/ReadRows"
_REQUEST = ReadRowsRequest.pb()  # the upb message classes, not the proto-plus wrappers
_RESPONSE = ReadRowsResponse.pb()
_CHANNEL_OPTIONS = [
    (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
    ("grpc.max_receive_message_length", -1),  # a row may exceed gRPC's 4 MB default
]

# Backoff between attempts at one range: base * 2**n, capped, with jitter.
_BACKOFF_BASE_S = 0.1
_BACKOFF_CAP_S = 10.0
# Deadline of one ReadRows call. A range taking longer is resumed after its
# last row like any transient error, so this bounds a stalled stream, not a
# range's size.
_ATTEMPT_TIMEOUT_S = 600.0
# What an INTERNAL error says when a connection was reset under the stream;
# the data client retries these too (google.cloud.bigtable.data._helpers).
_RESET_MESSAGES = ("rst_stream", "rst stream", "received unexpected eos on data frame from server")
_TRANSIENT_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                              grpc.StatusCode.ABORTED})


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

    The reader owns its channel (`open_channel()` unless one is given) and
    closes it in `close()`.
    """

    def __init__(self, table: BigtableTable, channel: grpc.Channel | None = None):
        self._table_name = table_name = table.resource_name
        self._app_profile_id = app_profile_id = table.app_profile or ""
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


def is_transient(error: BaseException) -> bool:
    """True for UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED and reset streams: retry these."""
    code = getattr(error, "code", None)
    if not (isinstance(error, grpc.RpcError) and callable(code)):
        return False
    if code() == grpc.StatusCode.INTERNAL:
        return any(m in (error.details() or "").lower() for m in _RESET_MESSAGES)
    return code() in _TRANSIENT_CODES


def _backoff(failures: int) -> float:
    delay = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (failures - 1))
    return delay / 2 + random.uniform(0, delay / 2)


def read_range(reader: RowReader, start: bytes, end: bytes, row_filter=None, *,
               limit: int = 0, max_attempts: int = 8,
               on_retry: Callable[[BaseException], None] | None = None) -> Iterator[Row]:
    """The rows of [start, end) (b"" end = table end) in key order, each exactly once.

    Transient errors are retried here: a
    new ReadRows call starts just after the last row delivered (last key +
    b"\\x00"), after an exponential backoff, and `on_retry(error)` is called
    for each retry. After `max_attempts` consecutive failures with no row
    delivered, the error is raised; any other error is raised at once.
    `limit` (0 = none) caps the rows delivered.
    """
    resume, delivered, failures = start, 0, 0
    while not (end and resume >= end) and not (limit and delivered >= limit):
        rows = reader.read(resume, end, row_filter, limit - delivered if limit else 0,
                           timeout=_ATTEMPT_TIMEOUT_S)
        try:
            for row in rows:
                resume = row.row_key + b"\x00"
                delivered += 1
                failures = 0
                yield row
            return
        except Exception as e:  # noqa: BLE001 - sorted by is_transient, the rest re-raised
            failures += 1
            if not is_transient(e) or failures >= max_attempts:
                raise
            if on_retry is not None:
                on_retry(e)
            time.sleep(_backoff(failures))
        finally:
            # Ends the call now when the caller stops early or an error is
            # handled, rather than whenever the generator is collected - an
            # error's traceback keeps it alive.
            rows.close()


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

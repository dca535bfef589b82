"""The process local SDK workers are forked from: Beam and the project imported
once, before the job needs a worker (transforms/runner/worker_pool.py starts it).

    python -m transforms.runner.worker_zygote REPORT_FD

or forked from a launcher that has imported its job (`serve`, what the
module's `main` runs too). Its first message on its requests stream (each a
4-byte length, then the message) is a JSON `Preparation`: the project's
modules the launcher has loaded (those its steps come from), which it
imports, and the launcher's logging levels. Every later message is one of
Beam's StartWorkerRequests: it forks a child per request that runs Beam's own
SDK harness against the runner's endpoints, and writes a line to the
`reports` stream (the pipe REPORT_FD) for every child that ends badly
("<worker id> <exit status>"). Its children log what the launcher's loggers
would, to its stderr; what Beam prints to sys.stderr (a failed bundle's
traceback) is logged at DEBUG.

A child inherits every module imported here, so it is ready in milliseconds
where a fresh interpreter spends a second importing Beam; and it leaves with
`os._exit` once its harness is done, skipping the half second an interpreter
holding Beam's 2,000 modules takes to tear them down. At the end of its
requests the zygote waits for its children and leaves.

The same harness runs in a Dataflow worker; only how it was started differs.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import sys
import traceback
from typing import IO, NamedTuple, NoReturn

from apache_beam.portability.api import beam_fn_api_pb2

from transforms.runner import beam_internals

__all__ = ["Preparation", "framed", "main", "serve"]


class Preparation(NamedTuple):
    """What a zygote does before its first worker: import `modules`, and log as
    the launcher's loggers would (`levels`, by logger name, "" the root)."""
    modules: tuple
    levels: dict

    def message(self) -> bytes:
        return framed(json.dumps(self._asdict()).encode())


def framed(message: bytes) -> bytes:
    """`message` as the zygote reads it: its 4-byte length first."""
    return len(message).to_bytes(4, "big") + message


def _read_message(stream: IO[bytes]) -> bytes | None:
    header = stream.read(4)
    if len(header) < 4:
        return None
    return stream.read(int.from_bytes(header, "big"))


def _read_request(stream: IO[bytes]) -> beam_fn_api_pb2.StartWorkerRequest | None:
    """The next length-prefixed StartWorkerRequest on `stream`; None at its end."""
    message = _read_message(stream)
    return None if message is None else beam_fn_api_pb2.StartWorkerRequest.FromString(message)


def _run_worker(request: beam_fn_api_pb2.StartWorkerRequest) -> int:
    """A forked child's life: Beam's SDK harness until the runner closes it."""
    try:
        beam_internals.serve(beam_internals.sdk_harness(request))
        return 0
    except BaseException:  # noqa: BLE001 - a child must never return into the loop
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


class _LauncherLevels(logging.Filter):
    """Passes a record the launcher's loggers would log: the level of the
    nearest logger named in `levels` ("" the root). Beam's harness sets its own
    levels as it starts, so the filter sits on the handler."""

    def __init__(self, levels: dict):
        super().__init__()
        self._levels = levels

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        while name not in self._levels:
            name = name.rpartition(".")[0]
        return record.levelno >= self._levels[name]


class _DebugLog:
    """A stream whose text goes to a logger at DEBUG: where Beam's harness prints
    a failed bundle's traceback (to sys.stderr, besides logging it at ERROR),
    so that a job's error is the launcher's one line unless it logs DEBUG."""

    def __init__(self, logger: logging.Logger, stream):
        self._logger = logger
        self._stream = stream   # for what else is asked of a stream (fileno, isatty)

    def write(self, text: str) -> int:
        if text.strip():
            self._logger.debug("%s", text.rstrip())
        return len(text)

    def flush(self) -> None:
        pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def serve(requests: IO[bytes], reports: IO[str]) -> NoReturn:
    """The zygote's life (module docstring), in this process: it prepares as its
    first message says, forks a worker for each request after it, and leaves
    (`os._exit`) once `requests` ends and its workers have."""
    preparation = _read_message(requests)
    if preparation is None:   # the launcher needed no worker
        os._exit(0)
    preparation = Preparation(**json.loads(preparation))
    for module in preparation.modules:
        importlib.import_module(module)
    beam_internals.remember_dofn_specs()   # as the launcher does: each stage's DoFns
    levels = {"": logging.WARNING, **preparation.levels}
    handler = logging.StreamHandler()   # the zygote's stderr, whatever sys.stderr becomes
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_LauncherLevels(levels))
    # A zygote forked from the launcher holds its handlers: this one replaces them.
    logging.getLogger().handlers[:] = [handler]
    sys.stderr = _DebugLog(logging.getLogger("transforms.runner.worker"), sys.stderr)
    children: dict = {}

    def reap(block: bool) -> None:
        # A child that dies while the job runs is reported at once: the runner
        # would otherwise wait for its answer for ever.
        while children:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            if pid == 0:
                return
            worker_id = children.pop(pid)
            if status:
                print(worker_id, os.waitstatus_to_exitcode(status), file=reports, flush=True)

    signal.signal(signal.SIGCHLD, lambda *_: reap(block=False))
    while (request := _read_request(requests)) is not None:
        # SIGCHLD waits until the child is on the books.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            requests.close()
            reports.close()
            os._exit(_run_worker(request))
        children[pid] = request.worker_id
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    reap(block=True)
    os._exit(0)


def main() -> NoReturn:
    serve(sys.stdin.buffer, os.fdopen(int(sys.argv[1]), "w"))


if __name__ == "__main__":
    main()

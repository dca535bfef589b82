"""Local worker processes, ready before the job needs them.

Beam's FnApiRunner starts its worker processes (`--direct_running_mode
multi_processing`) when the first step runs, each a fresh interpreter that
spends about a second importing Beam; at the end it closes them one after the
other, each taking half a second to tear its modules down (the timeline in
docs/performance.md). Both are fixed costs of every local run of more than
one worker, and they grow with the worker count on a machine with fewer
cores than workers.

`LocalWorkerPool` serves Beam's external worker pool protocol
(`BeamFnExternalWorkerPool`, what an EXTERNAL environment asks for its
workers) on loopback. Its workers are forked, one for each StartWorker, from
one process (transforms/runner/worker_zygote.py) that holds Beam and the
project's modules the launcher has loaded: ready in milliseconds, gone the
moment the runner closes them. The workers run Beam's own SDK harness, as on
Dataflow. That process is either

- forked from the launcher by `fork_ahead`, which a job's command line calls
  once the job's modules are imported and before it does anything else: it
  has Beam at once, at no cost, and the pool takes it when one is made; or
- started as the pool is made (a job built from Python, where this process
  may hold threads or gRPC connections a fork would copy half-way): it
  imports Beam and those modules while the launcher builds the job.

A worker that dies while the job runs (a crash in a codec, the OOM killer)
would leave the runner waiting for its answer for ever: the pool logs which
one died and how, and interrupts the job (`interrupting`): with SIGINT,
heard even where the launcher's shell ignores it (a job started in the
background), and sent again each second until the run has stopped, as one
may land where Beam catches it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
from concurrent import futures
from typing import IO, Callable, Iterator, NamedTuple

import grpc
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
from apache_beam.transforms.environments import ExternalEnvironment

from transforms.runner import worker_zygote

__all__ = ["LocalWorkerPool", "discard_ahead", "fork_ahead"]

_LOG = logging.getLogger(__name__)
# How often a death interrupts the run again, until it has stopped.
_INTERRUPT_AGAIN_S = 1.0


def _log_levels() -> dict:
    """The launcher's logging levels, root's ("") and each set on a logger: a
    worker logs what the launcher would."""
    levels = {"": logging.getLogger().level}
    for name, found in logging.root.manager.loggerDict.items():
        if isinstance(found, logging.Logger) and found.level != logging.NOTSET:
            levels[name] = found.level
    return levels


class _Zygote(NamedTuple):
    """A zygote as the pool drives it: `requests` to it, `reports` from it
    (worker_zygote.py), and `wait()` for its end."""
    requests: IO[bytes]
    reports: IO[str]
    wait: Callable[[], object]


_AHEAD: list = []   # the zygote fork_ahead made, until a pool takes it


def fork_ahead() -> None:
    """Forks the zygote from this process now, for the next LocalWorkerPool.

    Call it where the process holds nothing a fork would copy half-way: the
    job's modules imported and no thread of its own started, no gRPC channel
    opened (a job's command line, before its flags are read). If no pool
    takes it, it leaves when this process does, or at `discard_ahead()`."""
    if _AHEAD or threading.active_count() > 1:   # a thread's lock could be copied held
        return
    requests_in, requests_out = os.pipe()
    reports_in, reports_out = os.pipe()
    gc.freeze()   # the objects so far are shared, and no collection copies their pages
    sys.stdout.flush()   # what is buffered is the launcher's to write, not a worker's too
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(requests_out)
            os.close(reports_in)
            worker_zygote.serve(os.fdopen(requests_in, "rb"), os.fdopen(reports_out, "w"))
        except BaseException:  # noqa: BLE001 - never back into the launcher's code
            traceback.print_exc()
        os._exit(1)
    os.close(requests_in)
    os.close(reports_out)
    _AHEAD.append(_Zygote(os.fdopen(requests_out, "wb"), os.fdopen(reports_in),
                          lambda: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])))


def discard_ahead() -> None:
    """Ends the zygote fork_ahead made, when the job will not need it (one
    worker, or a service runner)."""
    while _AHEAD:
        zygote = _AHEAD.pop()
        zygote.requests.close()
        zygote.reports.close()
        zygote.wait()


def _spawned_zygote() -> _Zygote:
    reports, report_fd = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "transforms.runner.worker_zygote", str(report_fd)],
        stdin=subprocess.PIPE, pass_fds=(report_fd,),
        # What the launcher can import, a worker can: a user's modules beside
        # their script, a test's beside it.
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path))})
    os.close(report_fd)
    return _Zygote(process.stdin, os.fdopen(reports), process.wait)


class _StartWorkers(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
    """Passes each StartWorker on to the zygote; a worker stops when the runner
    closes its control stream, so StopWorker has nothing to do."""

    def __init__(self, requests: IO[bytes]):
        self._requests = requests
        self._lock = threading.Lock()

    def StartWorker(self, request, context):  # noqa: N802, ARG002 - gRPC's names
        try:
            with self._lock:
                self._requests.write(worker_zygote.framed(request.SerializeToString()))
                self._requests.flush()
        except (BrokenPipeError, ValueError) as e:  # the zygote is gone
            return beam_fn_api_pb2.StartWorkerResponse(error=f"no local worker pool: {e}")
        return beam_fn_api_pb2.StartWorkerResponse()

    def StopWorker(self, request, context):  # noqa: N802, ARG002
        return beam_fn_api_pb2.StopWorkerResponse()


class LocalWorkerPool:
    """Worker processes for the FnApiRunner, forked on request from the zygote
    fork_ahead made or one started now (module docstring); `environment` is
    the Beam environment that asks it for them. `close()` once the run is over."""

    def __init__(self):
        self._zygote = _AHEAD.pop() if _AHEAD else _spawned_zygote()
        # The project's modules loaded here are those the job's steps come from.
        modules = sorted(name for name in sys.modules
                         if name.startswith(("transforms.", "pipelines.")))
        self._zygote.requests.write(
            worker_zygote.Preparation(tuple(modules), _log_levels()).message())
        self._zygote.requests.flush()
        self._closing = threading.Event()
        self._stopped = threading.Event()   # the run is over: no more interrupts
        self.died: str | None = None  # how the first worker that died ended
        self._watcher = threading.Thread(target=self._watch, name="worker-pool-watch",
                                         daemon=True)
        self._watcher.start()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(
            _StartWorkers(self._zygote.requests), self._server)
        port = self._server.add_insecure_port("localhost:0")
        self._server.start()
        self.environment = ExternalEnvironment(f"localhost:{port}")

    def _watch(self) -> None:
        for line in self._zygote.reports:
            worker_id, status = line.split()
            if self._closing.is_set():
                _LOG.warning("local worker %s ended with exit status %s", worker_id, status)
                continue
            how = f"signal {-int(status)}" if int(status) < 0 else f"exit status {status}"
            self.died = self.died or f"local worker {worker_id} died ({how}) while the job ran"
            _LOG.error("%s; stopping the job", self.died)
            # The runner waits on the dead worker's answer; only a signal ends that wait.
            while not self._stopped.is_set():
                os.kill(os.getpid(), signal.SIGINT)
                self._stopped.wait(_INTERRUPT_AGAIN_S)

    @contextlib.contextmanager
    def interrupting(self) -> Iterator[None]:
        """The block (the run, in the main thread) is interrupted with
        KeyboardInterrupt when a worker dies, SIGINT heard though it was
        ignored; after it, nothing more is sent."""
        previous = signal.getsignal(signal.SIGINT)
        heard = previous is signal.SIG_IGN and threading.current_thread() is threading.main_thread()
        if heard:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            yield
        finally:
            self._stopped.set()
            if heard:
                signal.signal(signal.SIGINT, previous)

    def close(self) -> None:
        """Ends the pool: the zygote waits for its workers (the runner has closed
        them) and leaves."""
        self._closing.set()
        self._stopped.set()
        self._server.stop(None)
        self._zygote.requests.close()
        self._zygote.wait()
        self._watcher.join()
        self._zygote.reports.close()

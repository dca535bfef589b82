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
workers) on loopback. It starts one process when the pipeline is made
(transforms/runner/worker_zygote.py), which imports Beam and the project's
modules the launcher has loaded while the launcher builds the job, and forks
a worker from it for each StartWorker: ready in milliseconds, gone the moment
the runner closes it. The workers run Beam's own SDK harness, as on Dataflow.

A worker that dies while the job runs (a crash in a codec, the OOM killer)
would leave the runner waiting for its answer for ever: the pool logs which
one died and how, and interrupts the job (`interrupting`): with SIGINT,
heard even where the launcher's shell ignores it (a job started in the
background), and sent again each second until the run has stopped, as one
may land where Beam catches it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from concurrent import futures
from typing import Iterator

import grpc
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
from apache_beam.transforms.environments import ExternalEnvironment

__all__ = ["LocalWorkerPool"]

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


class _StartWorkers(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
    """Passes each StartWorker on to the zygote; a worker stops when the runner
    closes its control stream, so StopWorker has nothing to do."""

    def __init__(self, zygote_stdin):
        self._requests = zygote_stdin
        self._lock = threading.Lock()

    def StartWorker(self, request, context):  # noqa: N802, ARG002 - gRPC's names
        message = request.SerializeToString()
        try:
            with self._lock:
                self._requests.write(len(message).to_bytes(4, "big") + message)
                self._requests.flush()
        except (BrokenPipeError, ValueError) as e:  # the zygote is gone
            return beam_fn_api_pb2.StartWorkerResponse(error=f"no local worker pool: {e}")
        return beam_fn_api_pb2.StartWorkerResponse()

    def StopWorker(self, request, context):  # noqa: N802, ARG002
        return beam_fn_api_pb2.StopWorkerResponse()


class LocalWorkerPool:
    """Worker processes for the FnApiRunner, forked on request from one process
    started now (module docstring); `environment` is the Beam environment that
    asks it for them. `close()` once the run is over."""

    def __init__(self):
        levels = [f"{name}={level}" for name, level in _log_levels().items()]
        reports, report_fd = os.pipe()
        # The project's modules loaded here are those the job's steps come from.
        modules = ",".join(sorted(name for name in sys.modules
                                  if name.startswith(("transforms.", "pipelines."))))
        self._zygote = subprocess.Popen(
            [sys.executable, "-m", "transforms.runner.worker_zygote", str(report_fd), modules,
             *levels],
            stdin=subprocess.PIPE, pass_fds=(report_fd,),
            # What the launcher can import, a worker can: a user's modules beside
            # their script, a test's beside it.
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path))})
        os.close(report_fd)
        self._reports = os.fdopen(reports)
        self._closing = threading.Event()
        self._stopped = threading.Event()   # the run is over: no more interrupts
        self.died: str | None = None  # how the first worker that died ended
        self._watcher = threading.Thread(target=self._watch, name="worker-pool-watch",
                                         daemon=True)
        self._watcher.start()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(
            _StartWorkers(self._zygote.stdin), self._server)
        port = self._server.add_insecure_port("localhost:0")
        self._server.start()
        self.environment = ExternalEnvironment(f"localhost:{port}")

    def _watch(self) -> None:
        for line in self._reports:
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
        self._zygote.stdin.close()
        self._zygote.wait()
        self._watcher.join()
        self._reports.close()

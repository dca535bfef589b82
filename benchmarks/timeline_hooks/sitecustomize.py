"""Trace points for benchmarks/workers_bench.py's timeline, in every Python
process a timed job starts (launcher, zygote, workers) when this folder leads
PYTHONPATH and DATAGEN_TIMELINE names a file: each event a JSON line
{"t": unix time, "pid", "what", ...} appended to it.

Events: a process's start ("interpreter") and exit ("exit"); the runner's
run ("run_start", "run_end"), each stage it runs ("stage", with its start and
name) and its closing of the workers ("close_start"); each unit a worker
converts ("unit", with its start and index). Benchmark-only: the hooks wrap
Beam's runner and the project's conversion DoFn once they are imported.
"""

import atexit
import builtins
import functools
import json
import os
import sys
import time

_PATH = os.environ.get("DATAGEN_TIMELINE")


def _note(what, **fields):
    with open(_PATH, "a") as f:
        f.write(json.dumps({"t": time.time(), "pid": os.getpid(), "what": what, **fields}) + "\n")


def _wrap_runner(fn_runner):
    runner = fn_runner.FnApiRunner
    run_pipeline, execute_bundle = runner.run_pipeline, runner._execute_bundle
    close_all = fn_runner.WorkerHandlerManager.close_all

    def traced_run(self, *args, **kwargs):
        _note("run_start")
        try:
            return run_pipeline(self, *args, **kwargs)
        finally:
            _note("run_end")

    def traced_bundle(self, context, bundle_context_manager, bundle_input):
        start = time.time()
        result = execute_bundle(self, context, bundle_context_manager, bundle_input)
        _note("stage", start=start, name=bundle_context_manager.stage.name[:60])
        return result

    def traced_close(self):
        _note("close_start")
        close_all(self)

    runner.run_pipeline, runner._execute_bundle = traced_run, traced_bundle
    fn_runner.WorkerHandlerManager.close_all = traced_close


def _wrap_convert(convert):
    process = convert._ConvertFn.process

    @functools.wraps(process)  # Beam reads the side inputs from its signature
    def traced_process(self, unit, *args, **kwargs):
        start = time.time()
        yield from process(self, unit, *args, **kwargs)
        _note("unit", start=start, index=unit.index)

    convert._ConvertFn.process = traced_process


# module -> (a name it defines once fully loaded, its wrapper)
_WRAPS = {"apache_beam.runners.portability.fn_api_runner.fn_runner": ("FnApiRunner", _wrap_runner),
          "transforms.writer.convert": ("_ConvertFn", _wrap_convert)}
_import = builtins.__import__


def _importing(name, *args, **kwargs):
    module = _import(name, *args, **kwargs)
    for wrapped, (defined, wrap) in list(_WRAPS.items()):
        if hasattr(sys.modules.get(wrapped), defined):
            del _WRAPS[wrapped]
            wrap(sys.modules[wrapped])
    if not _WRAPS:
        builtins.__import__ = _import
    return module


if _PATH:
    _note("interpreter", argv=" ".join(sys.argv)[:60])
    atexit.register(_note, "exit")
    builtins.__import__ = _importing

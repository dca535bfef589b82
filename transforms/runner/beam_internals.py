"""Every use of Apache Beam's internals, in one place, checked against the Beam
version it was written for.

Beam's public API offers no way to see a local run's counters while it runs,
or to declare an options class's flags on a parser of one's own; the project
needs both, and reaches into Beam here and nowhere else:

- `watching_bundles`: the FnApiRunner's `ProgressRequester` (it asks worker
  processes how far each bundle has got, then keeps the answers to itself) and
  `EmbeddedWorkerHandler` (an in-process worker, which the runner never asks),
  for the progress lines (transforms/runner/progress.py);
- `declare_flags`: `PipelineOptions._add_argparse_args`, the hook an options
  class declares its flags in, called for Beam's own classes on the command
  line's parser, so that it takes --runner, --project, ... (pipelines/cli.py;
  the project's own flags are its tables, pipelines/flag_types.py);
- `BeamArgumentParser`: the parser Beam parses options with (it takes
  ValueProvider flags), which the command line's parser extends;
- `given_flags`: `PipelineOptions._flags`, the command line options were
  parsed from: `get_all_options(drop_default=True)` cannot tell a flag given
  its default value from one not given (pipelines/dataset_job.py);
- `sdk_harness`: `sdk_worker_main.create_harness`, which builds Beam's SDK
  harness from the environment variables Beam's worker boot program sets,
  for the local worker pool's workers (transforms/runner/worker_zygote.py);
  `serve`: the harness's data channels, to leave only once the runner has
  closed them;
- `remember_dofn_specs`: `userstate.get_dofn_specs`, which inspects every
  method of a DoFn for state and timer parameters, and which Beam calls
  three times or more for each ParDo of a graph (874 times on a small job:
  a tenth of its wall time), and again for each copy a stage unpickles; the
  answer depends only on the DoFn's class and the methods its instance holds
  (Map's function), so it is kept for those and given again;
- `remember_option_views`: `PipelineOptions.view_as`, which builds an
  argparse parser of every flag of the view's class and parses the flags
  again each time it is called; Beam calls it for each transform it applies
  and each stage it runs (1,713 calls, a quarter of a small tf.Transform
  job's profile). A view holds no values of its own: it reads and writes its
  source's shared flags and option values, so each source's view of a class
  is kept, weakly, and given again while it shares them;
- `raised_in_worker`: a worker process's exception reaches the FnApiRunner as
  a RuntimeError holding the worker's traceback as text; the project's own
  exception (a DatasetFailed: too many dead letters) is raised again from
  its last line, so a job's exit code and one-line error do not depend on
  how many worker processes it ran;
- `OneWorkerStages`: `FnApiRunner._execute_bundle`, which gives every stage
  as many workers as the run has (--direct_num_workers), each stage's input
  split over that many handlers of its environment; a stage run in the
  launcher's own process (transforms/runner/launcher_steps.py) is given one,
  not two threads that each build the stage again.

`SUPPORTED` says whether the installed Beam is the one these were written for
(setup.py pins it). On another version the jobs still run: the progress
lines are left out, with one warning saying why.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import logging
import re
import types
import weakref
from typing import Callable, Iterator

import apache_beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import _BeamArgumentParser as BeamArgumentParser
from apache_beam.portability.api import (
    beam_fn_api_pb2,
    beam_provision_api_pb2,
    beam_provision_api_pb2_grpc,
)
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
from apache_beam.runners.worker import sdk_worker_main
from apache_beam.runners.worker.channel_factory import GRPCChannelFactory
from apache_beam.transforms import core as beam_core
from apache_beam.transforms import userstate
from google.protobuf import json_format, text_format

from transforms.runner.beam_import import BEAM_VERSION

__all__ = ["BEAM_VERSION", "BeamArgumentParser", "OneWorkerStages", "SUPPORTED", "declare_flags",
           "given_flags", "raised_in_worker", "remember_dofn_specs", "remember_option_views",
           "sdk_harness", "serve", "watching_bundles"]

# Whether the installed Beam is the release these internals were read from
# and tested with.
SUPPORTED = apache_beam.__version__.startswith(BEAM_VERSION + ".")

_LOG = logging.getLogger(__name__)


def declare_flags(options_class, parser) -> None:
    """Declares an options class's flags (its `_add_argparse_args`) on `parser`."""
    options_class._add_argparse_args(parser)


def given_flags(options) -> frozenset:
    """The names of the flags `options` were made from (`--x=1` and `--x 1` give "x")."""
    return frozenset(flag[2:].split("=", 1)[0] for flag in options._flags
                     if isinstance(flag, str) and flag.startswith("--"))


_DOFN_SPECS = userstate.get_dofn_specs
# A class's answer, for its instances that hold no method of their own; False
# for a class whose instances are each asked.
_CLASS_SPECS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# What a class's attributes may be for its instances' answers to be the
# class's: none of these gives a method made per instance.
_PLAIN_ATTRIBUTES = (types.FunctionType, classmethod, staticmethod, types.BuiltinFunctionType,
                     types.WrapperDescriptorType, types.MethodDescriptorType,
                     types.GetSetDescriptorType, types.MemberDescriptorType)


def _plain(cls: type) -> bool:
    # Beam's DoFn itself is read for this version: its properties say whether
    # methods are defined, never give one.
    return all(not hasattr(value, "__get__") or isinstance(value, _PLAIN_ATTRIBUTES)
               for klass in cls.__mro__[:-1] if klass is not beam_core.DoFn
               for value in vars(klass).values())


def _remembered_dofn_specs(dofn) -> tuple:
    # Beam's answer depends on the methods `dir` finds on the DoFn and their
    # parameters' defaults: the class's, unless the instance holds a method
    # itself (Map of a bound method) or a class attribute (a property) could
    # give one that differs.
    cls = type(dofn)
    own = getattr(dofn, "__dict__", None)
    if own is None or any(isinstance(value, types.MethodType) for value in own.values()):
        return _DOFN_SPECS(dofn)
    specs = _CLASS_SPECS.get(cls)
    if specs is None:
        specs = _CLASS_SPECS[cls] = _DOFN_SPECS(dofn) if _plain(cls) else False
    return specs or _DOFN_SPECS(dofn)


def remember_dofn_specs() -> None:
    """Beam's DoFn spec check, each DoFn's answer kept (the module docstring);
    on another Beam version, left as it is."""
    if SUPPORTED:
        userstate.get_dofn_specs = _remembered_dofn_specs


_VIEW_AS = PipelineOptions.view_as
_KNOWN_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _remembered_view(options, cls):
    views = _KNOWN_VIEWS.setdefault(options, {})
    view = views.get(cls)
    # A view made before its source's flags or values were replaced is made again.
    if view is None or view._all_options is not options._all_options or (
            view._flags is not options._flags):
        view = views[cls] = _VIEW_AS(options, cls)
    return view


def remember_option_views() -> None:
    """Beam's options views, each source's view of a class kept (the module
    docstring); on another Beam version, left as it is."""
    if SUPPORTED:
        PipelineOptions.view_as = _remembered_view


def sdk_harness(request: beam_fn_api_pb2.StartWorkerRequest):
    """Beam's SDK harness for a worker pool's StartWorkerRequest (`.run()` serves
    the runner until it closes the worker): the pipeline options from the
    runner's provision service, then the environment Beam's boot program gives
    `sdk_worker_main`. No logging endpoint: the runner's logging service would
    print each record as a raw proto, so a worker logs to its own stderr."""
    channel = GRPCChannelFactory.insecure_channel(request.provision_endpoint.url)
    try:
        info = beam_provision_api_pb2_grpc.ProvisionServiceStub(channel).GetProvisionInfo(
            beam_provision_api_pb2.GetProvisionInfoRequest(),
            metadata=[("worker_id", request.worker_id)]).info
    finally:
        channel.close()
    # Its start-up chatter warns of a main session a local worker never has.
    start_up_log = logging.getLogger(sdk_worker_main.__name__)
    level, _ = start_up_log.level, start_up_log.setLevel(logging.ERROR)
    try:
        _, harness, _ = sdk_worker_main.create_harness({
            "CONTROL_API_SERVICE_DESCRIPTOR": text_format.MessageToString(request.control_endpoint),
            "PIPELINE_OPTIONS": json_format.MessageToJson(info.pipeline_options),
            "WORKER_ID": request.worker_id,
        })
    finally:
        start_up_log.setLevel(level)
    return harness


def serve(harness, timeout_s: float = 10) -> None:
    """Runs `harness` until the runner closes its control stream, then waits
    (up to `timeout_s`) until the runner has closed each data stream too. A
    worker process that left sooner would cut the streams the runner is still
    closing, and the runner would log the cut as an error; Beam's own worker
    processes hide that race behind their half second of interpreter exit."""
    factory = harness._data_channel_factory
    channels: list = []
    close = factory.close

    def closing():
        channels.extend(factory._data_channel_cache.values())
        close()

    factory.close = closing
    harness.run()
    for channel in channels:
        channel.wait(timeout_s)


@contextlib.contextmanager
def watching_bundles(on_answer: Callable[[int, list], None]) -> Iterator[Callable[[], list]]:
    """While the block runs a pipeline on the FnApiRunner: each progress answer of
    a worker process reaches `on_answer(bundle run number, monitoring infos)`,
    and the function yielded lists the bundles in-process workers are running
    now, as ((descriptor id, instruction id), monitoring infos) pairs. On a Beam
    other than BEAM_VERSION, nothing is watched (a warning says so)."""
    if not SUPPORTED:
        _LOG.warning("progress lines are off: they read Beam %s's runner internals, and this "
                     "is Beam %s", BEAM_VERSION, apache_beam.__version__)
        yield list
        return
    embedded: list = []  # in-process workers, which the runner cannot ask (below)
    runs = itertools.count()
    requester = fn_runner.ProgressRequester
    embedded_init = worker_handlers.EmbeddedWorkerHandler.__init__

    class _Recording(requester):
        # The runner's call; the callback is this class's own.
        def __init__(self, worker_handler, instruction_id, frequency, callback=None):  # noqa: ARG002
            run = next(runs)
            super().__init__(worker_handler, instruction_id, frequency,
                             callback=lambda r: on_answer(run, list(r.monitoring_infos)))

    def recording_init(handler, *args, **kwargs):
        embedded_init(handler, *args, **kwargs)
        embedded.append(handler)

    def active_bundles() -> list:
        # An in-process worker runs a bundle inside the runner's request, before
        # the runner would ask it anything: its bundles are read here instead.
        found = []
        for handler in list(embedded):
            cache = handler.bundle_processor_cache
            with cache._lock:
                active = list(cache.active_bundle_processors.items())
            found += [((descriptor_id, instruction_id), processor.monitoring_infos())
                      for instruction_id, (descriptor_id, processor) in active]
        return found

    fn_runner.ProgressRequester = _Recording
    worker_handlers.EmbeddedWorkerHandler.__init__ = recording_init
    try:
        yield active_bundles
    finally:
        fn_runner.ProgressRequester = requester
        worker_handlers.EmbeddedWorkerHandler.__init__ = embedded_init


class OneWorkerStages:
    """A mixin for an FnApiRunner: the stages of the environment
    `one_worker_environment` run on one worker of it (module docstring). On
    another Beam, they run as Beam gives them (as many workers as the run)."""

    one_worker_environment = ""

    def _execute_bundle(self, context, bundle_context_manager, bundle_input):
        # The stage's handlers are made on first use, from this count.
        if SUPPORTED and bundle_context_manager.stage.environment == self.one_worker_environment:
            bundle_context_manager.num_workers = 1
        return super()._execute_bundle(context, bundle_context_manager, bundle_input)


# The last line of a worker's traceback: `module.Class: message [while running 'step']`.
_RAISED = re.compile(r"^(transforms(?:\.\w+)+)\.(\w+): (.*?)(?: \[while running '[^']*'\])?$")


def raised_in_worker(error: BaseException) -> BaseException | None:
    """The exception of the project's (a class of `transforms`, taking its
    message alone) that a worker process raised, when `error` is the
    runner's RuntimeError carrying its traceback; None otherwise."""
    if type(error) is not RuntimeError or not error.args or not isinstance(error.args[0], str):
        return None
    lines = error.args[0].rstrip().splitlines()
    found = _RAISED.match(lines[-1]) if lines else None
    if found is None:
        return None
    module, name, message = found.groups()
    try:
        kind = getattr(importlib.import_module(module), name)
        raised = kind(message)
    except Exception:  # noqa: BLE001 - not a class made from its message alone: left as it is
        return None
    return raised if isinstance(raised, Exception) else None

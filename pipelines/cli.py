"""A job's command line: strict flags, a real --help, one-line errors, exit codes.

    def run(argv=None):
        argv = cli.checked_flags("tar_to_tfrecord", argv)   # first, before any work
        ...

    if __name__ == "__main__":
        cli.main(run)

Every job takes exactly the flags of the options classes it reads (its
`Template` in pipelines/template_metadata.py, which its flex template offers
too) and Beam's own (--runner, --direct_num_workers, --project, ...). Anything
else - a typo'd flag, a second file of an unquoted glob the shell expanded - is
refused before any work, in one line, with a "did you mean" when a flag is
close: Beam alone would only log a warning and run without it.

Exit codes (`main`):

    0  the job finished, or was submitted (--no_wait_until_finish)
    1  a bug: the traceback is printed
    2  the command line: an unknown flag or stray argument, a bad value, inputs
       that match nothing, an output it cannot write
    3  the data: more dead letters than --max_failure_fraction, split leakage,
       an empty split
    4  the infrastructure: storage, Bigtable or credentials failed

Each error but a bug is one line on stderr; `--verbose` prints the full trace
and Beam's INFO logging. A local run prints a progress line every few seconds
(transforms/runner/progress.py); a Dataflow one, the job's console URL.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import gc
import importlib
import logging
import os
import re
import sys
import traceback
import warnings
from typing import Callable, Iterator, Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.flag_types import GROUPS_ATTRIBUTE, Flag, flag_group
from pipelines.template_metadata import TEMPLATES
from transforms.format.arguments import ArgumentError
from transforms.format.dead_letters import DatasetFailed
from transforms.runner import progress, worker_pool
from transforms.runner.beam_internals import BeamArgumentParser, declare_flags

__all__ = ["EXIT_BUG", "EXIT_DATA", "EXIT_FLAGS", "EXIT_INFRASTRUCTURE", "FlagError",
           "checked_flags", "command_parser", "in_job_terms", "job_parser", "main",
           "native_stderr_silenced"]

EXIT_BUG, EXIT_FLAGS, EXIT_DATA, EXIT_INFRASTRUCTURE = 1, 2, 3, 4
# A local run prints a progress line this often (transforms/runner/progress.py).
_PROGRESS_S = 5.0

# --help lists the groups in data-flow order.
_GROUPS = ("input", "bigtable", "features", "cutting", "splits", "sample operations", "output",
           "preprocessing", "verification", "command line")
_BEAM_FLAGS = """\
Beam's own flags pass through: --runner (DirectRunner, the default, or DataflowRunner),
--direct_num_workers N for N local worker processes, and on Dataflow --project, --region,
--temp_location, --setup_file ./setup.py and the rest of
https://cloud.google.com/dataflow/docs/reference/pipeline-options

Exit codes: 0 done, 2 a flag error, 3 failed data (see the dead letters), 4 storage,
Bigtable or credentials failed, 1 a bug. --verbose prints full traces."""


class FlagError(ValueError):
    """A command line the job cannot run: exit 2."""


class _JobParser(BeamArgumentParser):
    """Beam's parser (it takes ValueProvider flags), raising FlagError instead of
    printing usage and exiting, grouping flags for --help, and knowing its own
    flags (`flags`) for the "did you mean" of a typo."""

    flags: tuple = ()

    def error(self, message: str):
        raise FlagError(message)


class _Unlisted:
    """Stands in for a parser while Beam's options classes declare their flags:
    they are parsed, but --help does not list them."""

    def __init__(self, parser: argparse.ArgumentParser):
        self._parser = parser

    def add_argument(self, *args, **kwargs):
        return self._parser.add_argument(*args, **{**kwargs, "help": argparse.SUPPRESS})

    def add_value_provider_argument(self, *args, **kwargs):
        return self._parser.add_value_provider_argument(
            *args, **{**kwargs, "help": argparse.SUPPRESS})

    def __getattr__(self, name: str):
        return getattr(self._parser, name)


def command_parser(job: str, doc: str, flags: Sequence[Flag], usage: str = "[flags]",
                   positional: Callable | None = None) -> argparse.ArgumentParser:
    """The parser of `python -m pipelines.<job>`: `flags` (pipelines/flag_types.py)
    in their groups, and whatever `positional(parser)` declares, with Beam's
    own flags accepted but not listed, and --help made of `doc` (the module
    docstring: its first paragraph and its command lines)."""
    parser = _JobParser(prog=f"python -m pipelines.{job}", usage=f"%(prog)s {usage}",
                        add_help=False, allow_abbrev=False,
                        description=doc.split("\n\n")[0] + "\n\n" + _usage_examples(doc),
                        epilog=_BEAM_FLAGS, formatter_class=argparse.RawDescriptionHelpFormatter)
    for cls in PipelineOptions.__subclasses__():
        if cls.__module__.startswith("apache_beam."):
            declare_flags(cls, _Unlisted(parser))
    setattr(parser, GROUPS_ATTRIBUTE, {})
    for title in _GROUPS:
        flag_group(parser, title)
    if positional:
        positional(parser)
    parser.flags = tuple(flags)
    for flag in parser.flags:
        flag.declare(parser)
    line = flag_group(parser, "command line")
    line.add_argument("-h", "--help", action="help", help="Show this help and exit.")
    line.add_argument("--verbose", action="store_true",
                      help="On an error, print the full trace; log Beam's INFO lines.")
    return parser


def job_parser(job: str) -> argparse.ArgumentParser:
    """The parser of every flag `job` (e.g. 'tar_to_tfrecord') takes, grouped, with
    Beam's own flags accepted but not listed."""
    doc = importlib.import_module(f"pipelines.{job}").__doc__ or ""
    return command_parser(job, doc, TEMPLATES[job].flags)


def _usage_examples(doc: str) -> str:
    """The command lines of a job's docstring (their backslash-newlines were
    joined when Python read it), one flag group per line again."""
    blocks = [re.sub(r"\s{2,}", " \\\n        ", block.strip())
              for block in re.findall(r"(?m)^    (python -m .+)$", doc)]
    return "examples:\n" + "\n\n".join(f"  {b}" for b in blocks) if blocks else ""


def checked_flags(job: str, argv: Sequence[str] | None,
                  parser: argparse.ArgumentParser | None = None) -> list:
    """`argv` (None: the process's) once every argument is one the job takes
    (those of `parser`, by default `job_parser(job)`); FlagError in one line
    otherwise."""
    argv = _negative_values_joined(list(sys.argv[1:] if argv is None else argv))
    parser = parser or job_parser(job)
    _, rest = parser.parse_known_args(argv)
    if rest:
        arg = rest[0]
        if arg.startswith("-"):
            name = arg.split("=", 1)[0]
            known = [f.option for f in parser.flags] + ["--help", "--verbose"]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise FlagError(f"unknown flag {name}{hint} (python -m pipelines.{job} --help "
                            f"lists every flag)")
        raise FlagError(f"unexpected argument {arg!r}: every flag takes one value; quote a "
                        f"pattern so the shell does not expand it, e.g. --input 'data/*.tar'")
    return argv


# A value that starts with a minus sign: argparse would read `--gain_db -6,6`'s
# value as a flag of its own.
_NEGATIVE_VALUE = re.compile(r"^-[0-9.]+(,-?[0-9.]+)*$")


def _negative_values_joined(argv: list) -> list:
    """`--flag -6,6` as `--flag=-6,6`, so argparse takes the value for one."""
    joined = []
    for arg in argv:
        if (_NEGATIVE_VALUE.match(arg) and joined and joined[-1].startswith("--")
                and "=" not in joined[-1]):
            joined[-1] = f"{joined[-1]}={arg}"
        else:
            joined.append(arg)
    return joined


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Silences what is written to the process's stderr (file descriptor 2) in the block.

    TensorFlow 2.21's C++ lines (oneDNN and CUDA probing at start-up, once per
    library that loads them; CUDA again at the first op; dataset defaults) go
    straight to descriptor 2: TF_CPP_MIN_LOG_LEVEL no longer reaches them. An
    exception raised in the block still reaches sys.stderr, after it.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _infrastructure_failures() -> tuple:
    import grpc
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError

    from transforms.sources.input_files import StorageReadError
    return GoogleAuthError, GoogleAPIError, grpc.RpcError, StorageReadError, OSError


_HINTS = {
    "GoogleAuthError": "run `gcloud auth application-default login`, or for the emulators set "
                       "BIGTABLE_EMULATOR_HOST / STORAGE_EMULATOR_HOST",
}


def flag_options(flags: Sequence[Flag]) -> dict:
    """{Python parameter: the option of the flag that sets it} (the flag table's
    `parameters`, and each flag's own name)."""
    return {name: flag.option for flag in flags for name in (flag.name, *flag.parameters)}


def flag_names(flags: Sequence[Flag]) -> Callable[[str], str]:
    """A Python parameter's name -> the option of the flag that sets it."""
    options = flag_options(flags)
    return lambda parameter: options.get(parameter, parameter)


@contextlib.contextmanager
def in_flag_terms(flags: Sequence[Flag]) -> Iterator[None]:
    """An ArgumentError raised in the block (a public constructor's, naming its
    Python parameter) raised again as a FlagError naming the flag instead; one
    of a parameter none of `flags` sets is left for an outer block (a job's
    reader, whose `file_pattern` is the job's --input) to name."""
    options = flag_options(flags)
    try:
        yield
    except ArgumentError as e:
        if e.parameter not in options:
            raise
        raise FlagError(e.said(flag_names(flags))) from e


def in_job_terms(job: str):
    """`in_flag_terms` of every flag `job` (e.g. 'tar_to_tfrecord') takes: a
    reader's ArgumentError, made before the shared flags are read, names the
    job's flag (--input for a reader's `file_pattern`)."""
    return in_flag_terms(TEMPLATES[job].flags)


def _one_line(error: BaseException) -> str:
    """The error's message on one line, without the Beam step Beam appends."""
    text = re.sub(r"\s*\[while running '[^']*'\]", "", str(error) or type(error).__name__)
    return " ".join(text.split())


def exit_code(error: BaseException) -> int:
    """The exit code for an error that ended a job (module docstring)."""
    if isinstance(error, DatasetFailed):
        return EXIT_DATA
    if isinstance(error, _infrastructure_failures()):
        return EXIT_INFRASTRUCTURE
    if isinstance(error, ValueError) and "[while running '" not in str(error):
        return EXIT_FLAGS  # raised by the launcher's checks, before the job ran
    return EXIT_BUG


@contextlib.contextmanager
def _logger_levels(levels: dict):
    """Sets loggers' levels while the block runs: a launcher that runs a job in
    its own process (a flex template's) keeps its own afterwards."""
    before = {name: logging.getLogger(name).level for name in levels}
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)


def main(run: Callable, parser: Callable[[], argparse.ArgumentParser] | None = None) -> None:
    """Runs `run(argv)` for `python -m pipelines.X`: --help (from `parser()`, by
    default the job's template's flags), --verbose, exit codes."""
    module = run.__module__
    if module == "__main__":  # python -m pipelines.X
        module = sys.modules["__main__"].__spec__.name
    job = module.rsplit(".", 1)[-1]
    argv = sys.argv[1:]
    if "-h" in argv or "--help" in argv:
        (parser() if parser else job_parser(job)).print_help()
        sys.exit(0)
    verbose = "--verbose" in argv
    argv = [a for a in argv if a != "--verbose"]
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    levels = {"pipelines": logging.INFO}
    if not verbose:
        # Beam logs a failing step's traceback before it raises; the job prints
        # the dataset's summary and warnings itself, once.
        levels.update({"apache_beam": logging.CRITICAL,
                       "transforms.writer.finalise": logging.ERROR})
        # Every Bigtable client warns that BIGTABLE_EMULATOR_HOST, which the user set, is set.
        warnings.filterwarnings("ignore", "Connecting to Bigtable emulator", RuntimeWarning)
    progress.INTERVAL_S = _PROGRESS_S
    try:
        with _logger_levels(levels):
            if job in TEMPLATES:
                # A Beam job: the zygote of its local workers, should it take
                # more than one, forked while nothing but imports has happened.
                worker_pool.fork_ahead()
            run(argv)
    except Exception as e:  # noqa: BLE001 - every error ends here, as an exit code
        code = exit_code(e)
        if code == EXIT_BUG:
            raise
        if verbose:
            traceback.print_exc()
        hint = next((h for name, h in _HINTS.items()
                     if any(c.__name__ == name for c in type(e).__mro__)), None)
        kind = {EXIT_FLAGS: "error", EXIT_DATA: "failed",
                EXIT_INFRASTRUCTURE: f"infrastructure error: {type(e).__name__}"}[code]
        print(f"{kind}: {_one_line(e)}" + (f"\n  try: {hint}" if hint else ""),
              file=sys.stderr)
        sys.exit(code)
    finally:
        worker_pool.discard_ahead()
        # The interpreter's exit would collect every object Beam and the job
        # made, over and over as it tears the modules down: ~0.6 s of every
        # run. Frozen, they are left to the process's end (atexit still runs).
        gc.freeze()

"""Progress lines for a job on the local runner, from its counters while it runs.

    with progress.reporting(interval_s=5, input_bytes=total):
        pipeline.run().wait_until_finish()

    progress 0:25  37 samples read, 560 examples written, 1 failed;
                   11.3 of 52.0 MB read (22%), 0.45 MB/s       (one line)

Beam's FnApiRunner can ask its worker processes every few seconds how far
each bundle has got (`progress_request_frequency`): the answer holds the
bundle's counters so far. The runner keeps the answers to itself, so for the
length of a run `reporting` watches them (transforms/runner/beam_internals.py:
the latest answer of each bundle, and the bundles of an in-process worker,
one worker being the default), and a thread prints one line from their sums
every few seconds. "MB read" counts the media bytes the sources read (tar
members, listed files, Bigtable cells), against the input files' total size
when it is known: a tar's headers make the last line end a little short of
it. A finished bundle
counts with its last answer, so a line may lag the truth by a few seconds of
one bundle; the summary at the end is exact.
On Dataflow the service's console shows these counters live: the launcher
prints the job's console URL instead (pipelines/dataset_job.py).

`INTERVAL_S` is None (quiet: tests, library use) unless the command line
(pipelines/cli.py) sets it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterable, Iterator, Mapping

from apache_beam.metrics import monitoring_infos

from transforms.runner import beam_internals
from transforms.runner.counters import NAMESPACE

__all__ = ["INTERVAL_S", "counter_totals", "progress_line", "reporting"]

INTERVAL_S: float | None = None

# The counters of every source that count the input's bytes as they are read.
_BYTES_READ = ("tar_bytes_read", "media_bytes_read", "bigtable_bytes_read")


def counter_totals(bundles: Iterable[Iterable]) -> dict:
    """{counter name: sum} of the `datagen` counters in bundles' MonitoringInfos."""
    totals: dict = {}
    for infos in bundles:
        for info in infos:
            if (info.urn == monitoring_infos.USER_COUNTER_URN
                    and info.labels.get(monitoring_infos.NAMESPACE_LABEL) == NAMESPACE):
                name = info.labels[monitoring_infos.NAME_LABEL]
                totals[name] = totals.get(name, 0) + monitoring_infos.extract_counter_value(info)
    return totals


def progress_line(totals: Mapping[str, int], seconds: float, input_bytes: int | None) -> str:
    """One line: samples read, examples written, failures, input MB and MB/s."""
    minutes, secs = divmod(int(seconds), 60)
    read = sum(totals.get(name, 0) for name in _BYTES_READ)
    line = (f"progress {minutes}:{secs:02d}  {totals.get('samples_read', 0)} samples read, "
            f"{totals.get('examples_written', 0)} examples written, "
            f"{totals.get('samples_failed', 0)} failed; {read / 1e6:.1f}")
    if input_bytes:
        line += f" of {input_bytes / 1e6:.1f} MB read ({min(read / input_bytes, 1):.0%})"
    else:
        line += " MB read"
    return line + f", {read / 1e6 / max(seconds, 1e-9):.2f} MB/s"


@contextlib.contextmanager
def reporting(interval_s: float, input_bytes: int | None = None,
              write: Callable[[str], None] = print) -> Iterator[None]:
    """Writes a progress line every `interval_s` seconds while the block runs a
    pipeline on a FnApiRunner made with progress_request_frequency set."""
    # One entry per bundle run: its latest monitoring infos. Instruction ids
    # restart with every stage, so they alone would let a later bundle's
    # counters replace an earlier one's.
    latest: dict = {}
    done = threading.Event()
    start = time.monotonic()
    with beam_internals.watching_bundles(latest.__setitem__) as active_bundles:

        def report():
            while not done.wait(interval_s):
                latest.update(active_bundles())
                write(progress_line(counter_totals(list(latest.values())),
                                    time.monotonic() - start, input_bytes))

        thread = threading.Thread(target=report, name="datagen-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

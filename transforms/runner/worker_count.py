"""How many local workers a job gets when its user does not say.

A unit is read whole by one worker, and the local runner deals a stage's
units to its workers once, in turn, in the order they come (largest first,
transforms/sources/units.py PlanUnits): a worker with nothing dealt to it adds only
its cost. Each extra worker process costs about a second before the first
unit (the pool's one import of Beam) on top of the runner's own start-up;
one worker converts 128 MiB of FLAC speech in about 1.7 s. So more workers
pay when they take at least `WORTH_BYTES` of input off the busiest one.
The figures behind this are in docs/performance.md ("Local workers").

    >>> MiB = 1 << 20
    >>> local_workers([600 * MiB, 600 * MiB, 500 * MiB], cores=2).workers
    2
    >>> local_workers([148 * MiB, 50 * MiB], cores=2).workers   # one would do most
    1
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

__all__ = ["WORTH_BYTES", "WorkerChoice", "busiest_share", "local_workers"]

WORTH_BYTES = 128 << 20


class WorkerChoice(NamedTuple):
    workers: int
    units: int
    input_bytes: int

    def line(self, cores: int) -> str:
        """The one line a job prints of it."""
        size = f"{self.units} work unit{'s' * (self.units != 1)}, {_megabytes(self.input_bytes)}"
        if self.workers == 1:
            return (f"local workers: 1 ({size}: more would not pay; "
                    "--direct_num_workers N to choose)")
        return (f"local workers: {self.workers} of {cores} cores ({size}; "
                "--direct_num_workers N to choose)")


def _megabytes(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def busiest_share(sizes: Sequence[int], workers: int) -> int:
    """The input bytes of the busiest of `workers` when units of `sizes` are
    dealt to them in turn, largest first (as the local runner deals them)."""
    shares = [0] * workers
    for i, size in enumerate(sorted(sizes, reverse=True)):
        shares[i % workers] += size
    return max(shares)


def local_workers(sizes: Sequence[int], cores: int) -> WorkerChoice:
    """The workers for units of `sizes` on `cores` cores: the most, up to one a
    core and one a unit, that take WORTH_BYTES off the busiest worker's share
    for each worker added."""
    total, chosen = sum(sizes), 1
    for workers in range(2, min(cores, len(sizes)) + 1):
        if total - busiest_share(sizes, workers) >= (workers - 1) * WORTH_BYTES:
            chosen = workers
    return WorkerChoice(chosen, len(sizes), total)

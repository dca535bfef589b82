"""The final step's memory against the number of groups: a simulation, no media.

    python -m benchmarks.final_step_bench [--units 400] [--groups_per_unit 50,500]

A Source of synthetic units (each yields `groups_per_unit` tiny samples, every
one its own group: `--split_by __key__`, the worst case) goes through
WriteDataset on the local runner with one worker, as a subprocess whose
process tree's peak RSS is sampled (benchmarks/process_tree.py). Converting a
unit holds one unit at a time, so what grows with the corpus is what the
final step holds: every unit's receipt as one in-memory list (a side input),
each with one (group, split) pair per distinct group, and the ledger built as
one string. The same units with more groups each show the growth per
million groups; scaled, what a corpus of 40M clips (10 TB of 10 s speech at
--split_by __key__, ~80k units) would ask of one worker.

On the local runner the leakage check's shuffle (transforms/checks/leakage.py:
Distinct, GroupByKey) holds the (group, split) pairs too, as its GroupByKey
holds a whole PCollection in memory; on Dataflow that shuffle is spread over
the workers. So this figure is the whole job on one machine, an upper bound
of the final step's own share.

Target (issue #26): memory O(units + shards), not O(groups): the peak RSS
should not grow with the groups.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import transforms as dg
from benchmarks.process_tree import measure

__all__ = ["SyntheticReader", "main"]


class SyntheticReader(dg.UnitReader):
    """A UnitReader (transforms/sources/units.py) of made-up samples: unit u gives
    `per_unit` samples keyed u-0, u-1, ..., with a label."""

    def __init__(self, per_unit: int):
        self._per_unit = per_unit

    # UnitReader.read: a synthetic unit is never split.
    def read(self, unit, tracker=None):  # noqa: ARG002
        for i in range(self._per_unit):
            yield {"__key__": f"{unit.index}-{i}", "label": i % 10}


def _plan(units: int) -> list:
    return [dg.WorkUnit(i, (i,), 1) for i in range(units)]


def _child(output: str, units: int, per_unit: int) -> None:
    """Runs the job (in the measured subprocess)."""
    import functools

    from apache_beam.options.pipeline_options import PipelineOptions

    source = dg.Source(functools.partial(_plan, units), SyntheticReader(per_unit))
    with dg.make_pipeline(PipelineOptions(["--direct_num_workers", "1"])) as p:
        _ = p | dg.WriteDataset(output, source, features="label:int64", split_by="__key__")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=400)
    parser.add_argument("--groups_per_unit", default="50,500", help="Groups of each run.")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # output units per_unit
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]), int(args.child[2]))
        return
    workdir = tempfile.mkdtemp(prefix="datagen-final-step-bench-")
    print(f"final step: {args.units} units of one-sample groups, 1 worker")
    print(f"{'units':>7s} {'groups':>9s} {'seconds':>8s} {'peak RSS':>9s}")
    rows = []
    try:
        for per_unit in (int(n) for n in args.groups_per_unit.split(",")):
            output = os.path.join(workdir, f"out-{per_unit}")
            run = measure([sys.executable, "-m", "benchmarks.final_step_bench", "--child",
                           output, str(args.units), str(per_unit)])
            groups = args.units * per_unit
            rows.append((groups, run.peak_rss))
            print(f"{args.units:7d} {groups:9d} {run.seconds:8.1f} "
                  f"{run.peak_rss / 2**20:5.0f} MiB")
            shutil.rmtree(output)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    (g0, r0), (g1, r1) = rows[0], rows[-1]
    per_million = (r1 - r0) / max(g1 - g0, 1) * 1e6
    print(f"growth: {per_million / 2**20:.0f} MiB per million groups; at 40M groups "
          f"about {(r0 + per_million * (40e6 - g0) / 1e6) / 2**30:.1f} GiB in one worker")
    print("target (O(units + shards)): " + ("met" if per_million < 2**20 else "MISSED"))


if __name__ == "__main__":
    main()

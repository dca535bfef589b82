"""The final step alone, at internet scale: its steps fed synthetic inputs, no runner.

    python -m benchmarks.final_step_alone_bench [--units 10000,100000] [--groups_per_unit 400]

A corpus of 40M 10 s clips split by clip (10 TB of speech) is ~100k units of
~400 one-clip groups, a shard and a few dead letters each. Where the job runs
on Dataflow, the final step's pieces run on single workers, and the leakage
check's (group, split) pairs are a shuffle spread over all of them. This bench
calls each piece's DoFn (transforms/writer/finalise.py) directly, in a process
of its own, on synthetic inputs of that shape, and reports the peak RSS of
that process and its time:

  check      `_CheckFn`: every unit's (index, span) and planned entry, every
             shard record, the summed tallies and the dead letters' part
             files (joined into one) -> the names of all shards;
  ledger     `_WriteLedgerPartFn`: one ledger part, 100 units' receipts with
             their (group, split) pairs (groups_per_unit each), written with
             the final name of every shard;
  failures   `_WriteFailurePartFn`: one part of the dead letters, 100 units';
  publish    `PublishFn` (transforms/writer/publish.py): the manifest of every
             shard, the ledger's parts joined (tiny parts here: joining streams a part at a time).

The dead letters are 4 a unit (1% of 400 samples). Inputs are built inside
the measured process, so its peak includes them, as a worker holding those
side inputs would. Target (issue #26): O(units + shards), never O(samples or
groups): check and publish grow with the units, the parts stay flat.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from benchmarks.process_tree import measure

PIECES = ("check", "ledger", "failures", "publish")
_FAILURES_PER_UNIT = 4
_PART_UNITS = 100


def _shard(temp: str, unit: int, groups_per_unit: int):
    """Unit `unit`'s one shard record (its kept samples, an example each)."""
    from transforms.writer.shard_files import ShardRecord

    kept = groups_per_unit - _FAILURES_PER_UNIT
    return ShardRecord("train", (unit, 0), f"{temp}/shards/{unit:08d}-train-0.tfrecord",
                       kept, kept * 40, "0badcafe")


def _receipt(temp: str, unit: int, groups_per_unit: int):
    """Unit `unit`'s receipt: its groups, its shard, its dead letters."""
    from transforms.format.dead_letters import dead_letter
    from transforms.recipe.accounting import Kind, Tally
    from transforms.writer.ledger import UnitReceipt

    return UnitReceipt(
        unit, None, (f"gs://bucket/shards/{unit:08d}.tar",), ((Tally(Kind.READ), groups_per_unit),),
        (_shard(temp, unit, groups_per_unit),),
        tuple(dead_letter("decode_audio", ValueError("cannot decode"), url=f"{unit}.tar",
                          key=f"clip-{unit}-{i}", member="flac")
              for i in range(_FAILURES_PER_UNIT)),
        observed=(("groups", tuple((f"clip-{unit}-{i}", "train")
                                   for i in range(groups_per_unit))),))


def _check_inputs(output: str, temp: str, units: int, groups_per_unit: int) -> tuple:
    """(config, planned, shards, tallies, spans) of the whole synthetic job."""
    import transforms as dg
    from transforms.recipe.accounting import Kind, Tally

    samples, failed = units * groups_per_unit, units * _FAILURES_PER_UNIT
    tallies = {Tally(Kind.READ): samples, Tally(Kind.WRITTEN, "train"): samples - failed,
               Tally(Kind.EXAMPLES, "train"): samples - failed,
               Tally(Kind.FAILED, "sample"): failed}
    return (dg.WriteDataset(output, features="label:int64", splits="train=1").config,
            [(u, None) for u in range(units)],
            [_shard(temp, u, groups_per_unit) for u in range(units)],
            tallies, [(u, None) for u in range(units)])


def _child(piece: str, workdir: str, units: int, groups_per_unit: int) -> None:
    """Runs one piece (in the measured process); prints its seconds as JSON."""
    from apache_beam.io.filesystems import FileSystems

    from transforms.format.dead_letters import dead_letter
    from transforms.storage.folders import write_text
    from transforms.writer import finalise, publish

    output, temp = os.path.join(workdir, "out"), os.path.join(workdir, "out", ".temp-run")
    os.makedirs(temp, exist_ok=True)
    if piece == "failures":
        lines = [entry for u in range(_PART_UNITS)
                 for _, entry in finalise._unit_failure_lines(_receipt(temp, u, groups_per_unit))]
        start = time.perf_counter()
        list(finalise._WriteFailurePartFn(temp).process((0, lines)))
        print(json.dumps({"seconds": time.perf_counter() - start}))
        return
    config, planned, shards, tallies, spans = _check_inputs(output, temp, units,
                                                            groups_per_unit)
    parts = range(0, units, _PART_UNITS)
    failure_parts = []
    for part in parts:  # a file a part, as the failure parts' DoFn leaves them
        path = FileSystems.join(temp, "failures", f"{part:020d}.jsonl")
        line = json.dumps(dead_letter("decode_audio", ValueError("cannot decode"),
                                      url=f"{part}.tar", key=f"clip-{part}")) + "\n"
        write_text(path, line * (_PART_UNITS * _FAILURES_PER_UNIT))
        failure_parts.append(finalise.FailurePart(path, _PART_UNITS * _FAILURES_PER_UNIT, line))
    start = time.perf_counter()
    found = {"leakage": [("groups", "train", units * groups_per_unit)], "keys": []}
    [plan] = finalise._CheckFn(config, temp).process(
        None, planned, shards, tallies, failure_parts, spans, ({}, [], []), found, {})
    if piece == "ledger":
        receipts = [_receipt(temp, u, groups_per_unit) for u in range(_PART_UNITS)]
        start = time.perf_counter()
        list(finalise._WriteLedgerPartFn(temp).process((0, receipts), plan))
    elif piece == "publish":
        ledger_parts = []
        for part in parts:
            path = finalise._ledger_part_path(temp, part)
            write_text(path, "{}\n")
            ledger_parts.append(path)
        start = time.perf_counter()
        list(publish.PublishFn(config, temp, None).process(plan, None, ledger_parts))
    print(json.dumps({"seconds": time.perf_counter() - start}))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", default="10000,100000")
    parser.add_argument("--groups_per_unit", type=int, default=400)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)  # piece dir units groups
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]), int(args.child[3]))
        return
    print(f"the final step's pieces alone, {args.groups_per_unit} one-clip groups and "
          f"{_FAILURES_PER_UNIT} dead letters a unit, a shard a unit")
    print(f"{'piece':9s} {'units':>8s} {'groups':>12s} {'seconds':>8s} {'peak RSS':>9s}")
    peaks: dict = {}
    for units in (int(n) for n in args.units.split(",")):
        for piece in PIECES:
            workdir = tempfile.mkdtemp(prefix="datagen-final-step-alone-")
            try:
                run = measure([sys.executable, "-m", "benchmarks.final_step_alone_bench",
                               "--child", piece, workdir, str(units),
                               str(args.groups_per_unit)])
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            result = json.loads(run.output.strip().splitlines()[-1])
            peaks.setdefault(piece, []).append((units, run.peak_rss))
            print(f"{piece:9s} {units:8d} {units * args.groups_per_unit:12d} "
                  f"{result['seconds']:8.1f} {run.peak_rss / 2**20:5.0f} MiB", flush=True)
    for piece, rows in peaks.items():
        (u0, r0), (u1, r1) = rows[0], rows[-1]
        per_unit = (r1 - r0) / max(u1 - u0, 1)
        print(f"{piece}: {per_unit / 1024:.1f} KiB more per unit")


if __name__ == "__main__":
    main()

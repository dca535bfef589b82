"""What a WriteDataset does, decided once: `plan_write` gives its `WritePlan`.

Everything that depends on the DatasetConfig and the way in is decided here,
before any step is built, and what cannot be done is refused here in one
line; WriteDataset (transforms/writer/write.py) then only builds the steps
the plan names:

- the layout: examples rolled into shards where they are built (the
  default), or shuffled by a stable hash into balanced shards (`global`),
  and whether they also leave the converter (the global layout, an
  examples sink);
- tf.Transform's mode: where the examples are written where they are built,
  the transform is fitted on the train examples' analyzed features as they
  are built, and published for readers to apply (`AT_READ`, the default:
  the shards hold the raw examples) or applied to the written shards
  (`ON_SHARDS`, materialized: TFX's shape); where they leave the converter,
  it is fitted by a pass of its own first and applied as each example is
  built (`FIRST`);
- the passes over a Source's units before converting, which every later
  pass takes alike: the keys given twice (always), the strata
  (stratify_by), the copies to drop (duplicates 'drop');
- whether earlier work is reused and the ledger kept.
"""

from __future__ import annotations

from typing import NamedTuple

from transforms.format.arguments import ArgumentError
from transforms.format.manifest import AT_READ

__all__ = ["AT_READ", "COPIES", "FIRST", "KEYS", "ON_SHARDS", "STRATA", "WritePlan",
           "plan_write"]

# tf.Transform's modes.
ON_SHARDS, FIRST = "on_shards", "first"
# The passes over a Source's units before converting.
KEYS, STRATA, COPIES = "keys", "strata", "copies"


class WritePlan(NamedTuple):
    """What one WriteDataset does (module docstring)."""

    from_source: bool
    write_shards: bool     # rolled where the examples are built
    emit_examples: bool    # they leave the converter too
    global_shards: bool    # shuffled into balanced shards
    transform: str         # "" (none), AT_READ, ON_SHARDS or FIRST
    pre_passes: tuple      # of KEYS, STRATA, COPIES, in order
    reuse: bool            # earlier work units' receipts stand for them
    keep_ledger: bool      # a rerun plans the same units: their receipts are published


def plan_write(config, from_source: bool, examples_sink: bool, reuse: bool) -> WritePlan:
    """The WritePlan of `config` over a Source (`from_source`) or a
    PCollection, with an examples sink or not, reusing earlier work or not;
    ArgumentError when a PCollection is asked what only a Source's units,
    read twice or planned again, can do."""
    stratified = bool(config.recipe.split_plan.stratify_by)
    drop = config.duplicates == "drop"
    if not from_source:
        needs_source = {"stratify_by": stratified, "preprocessing": config.preprocessing,
                        "run": reuse, "duplicates": drop}
        for parameter, asked in needs_source.items():
            if asked:
                raise ArgumentError(parameter, "(stratified splits, tf.Transform, duplicates "
                                               "'drop', reused work) reads a Source's units "
                                               "again: give WriteDataset a Source, not a "
                                               "PCollection")
    global_shards = config.shuffle == "global"
    write_shards = config.write_tfrecords and not global_shards
    emit_examples = global_shards or examples_sink
    transform = ""
    if config.preprocessing is not None:
        if not write_shards or emit_examples:
            transform = FIRST
        else:
            transform = ON_SHARDS if config.preprocessing.materialize else AT_READ
    pre_passes = ((KEYS,) + ((STRATA,) if stratified else ()) + ((COPIES,) if drop else ())
                  if from_source else ())
    return WritePlan(from_source, write_shards, emit_examples,
                     global_shards and config.write_tfrecords, transform, pre_passes, reuse,
                     from_source and config.write_tfrecords and not global_shards)

"""Bigtable rows of raw media -> a sharded TFRecord dataset (and/or an examples table).

Locally (DirectRunner, against the emulator: export BIGTABLE_EMULATOR_HOST=localhost:8086):

    python -m pipelines.bigtable_to_tfrecord \
        --project p --instance i --table raw --columns 'raw:*' \
        --output out/ --cut frames --video_field mp4 --audio_fields flac \
        --fps 2 --frame_size 112x112 --features 'label=cls:int64' --split_by json.speaker

On Dataflow:

    python -m pipelines.bigtable_to_tfrecord \
        --project PROJECT --instance media --table clips --columns 'raw:wav=wav,raw:label=cls' \
        --output gs://BUCKET/datasets/v1 --features 'label=cls:int64' \
        --runner DataflowRunner --region REGION --temp_location gs://BUCKET/tmp \
        --setup_file ./setup.py

Rows are read natively with the Python client, the table cut into key ranges
(at the table's tablet boundaries, when the job is launched) that workers
convert and write in parallel (`transforms.sources.bigtable.source`); every other step
— cutting, splits, shards, manifest, dead letters — is the same composite the
tar pipeline uses. Tablet boundaries move as a table grows, so two runs may
cut it differently: each split holds the same examples on every run, in
shards that may differ. `--examples_table` also writes the encoded examples to a
Bigtable table (`--examples_only`: only there).
"""

from __future__ import annotations

import dataclasses

from apache_beam.options.pipeline_options import PipelineOptions

import transforms as dg
from pipelines import cli
from pipelines.dataset_job import dataset_config, run_dataset_job
from pipelines.job_options import BigtableReadOptions, bigtable_table
from transforms.sources.bigtable import WriteExamplesToBigtable

__all__ = ["run"]


def _examples_sink(bt: BigtableReadOptions, read: dg.ReadBigtableSamples):
    """--examples_table's sink, its table checked (or made) now; None without it."""
    if bt.examples_only and not bt.examples_table:
        raise ValueError("--examples_only needs --examples_table")
    if not bt.examples_table:
        return None
    sink = WriteExamplesToBigtable(
        dataclasses.replace(read.config.table, table=bt.examples_table, app_profile=None),
        family=bt.examples_family)
    sink.ensure_table(create=bt.create_examples_table, create_flag="--create_examples_table")
    return sink


def run(argv=None) -> dict | None:
    """Builds and runs the job; returns the manifest once it has finished."""
    options = PipelineOptions(cli.checked_flags("bigtable_to_tfrecord", argv))
    bt = options.view_as(BigtableReadOptions)
    read = dg.ReadBigtableSamples(
        bigtable_table(options, ("--columns", bt.columns), app_profile=bt.app_profile or None),
        bt.columns, start_key=bt.start_key, end_key=bt.end_key,
        prefix=bt.prefix, key_regex=bt.key_regex, max_rows=bt.max_rows,
        sample_fraction=bt.sample_fraction, max_ranges=bt.max_ranges)
    config = dataset_config(options, read)
    sink = _examples_sink(bt, read)
    if bt.examples_only:
        config = dataclasses.replace(config, write_tfrecords=False)
    return run_dataset_job(options, config, read.source, examples_sink=sink)


if __name__ == "__main__":
    cli.main(run)

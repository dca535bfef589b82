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

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

from pipelines import cli
from pipelines.dataset_job import dataset_config, feature_spec, run_dataset_job
from pipelines.job_options import BigtableReadOptions, BigtableTableOptions
from transforms.sources.bigtable.admin import ensure_table
from transforms.sources.bigtable.read_config import BigtableReadConfig
from transforms.sources.bigtable.rows import RowReader
from transforms.sources.bigtable.sink import WriteExamplesToBigtable
from transforms.sources.bigtable.source import ReadBigtableSamples, read_samples
from transforms.sources.bigtable.table import BigtableTable
from transforms.sources.units import Failed

__all__ = ["run"]


def _read_config(options: PipelineOptions) -> BigtableReadConfig:
    bt = options.view_as(BigtableReadOptions)
    table = options.view_as(BigtableTableOptions)
    project = options.view_as(GoogleCloudOptions).project
    missing = [flag for flag, value in (("--project", project), ("--instance", table.instance),
                                        ("--table", table.table), ("--columns", bt.columns))
               if not value]
    if missing:
        raise ValueError(f"{', '.join(missing)} required")
    return BigtableReadConfig(
        BigtableTable(project, table.instance, table.table, bt.app_profile or None),
        columns=bt.columns, start_key=bt.start_key, end_key=bt.end_key,
        prefix=bt.prefix, key_regex=bt.key_regex, max_rows=bt.max_rows,
        sample_fraction=bt.sample_fraction, max_ranges=bt.max_ranges)


def _first_samples(config: BigtableReadConfig):
    """The table's first readable samples, in key order (for --features auto)."""
    reader = RowReader(config.table)
    try:
        for item in read_samples(reader, config, *config.key_range()):
            if not isinstance(item, Failed):
                yield item
    finally:
        reader.close()


def _examples_sink(options: PipelineOptions, read: BigtableReadConfig):
    bt = options.view_as(BigtableReadOptions)
    if bt.examples_only and not bt.examples_table:
        raise ValueError("--examples_only needs --examples_table")
    if not bt.examples_table:
        return None
    target = dataclasses.replace(read.table, table=bt.examples_table, app_profile=None)
    ensure_table(target, [bt.examples_family], create=bt.create_examples_table,
                 create_flag="--create_examples_table")
    return WriteExamplesToBigtable(target, family=bt.examples_family)


def run(argv=None) -> dict | None:
    """Builds and runs the job; returns the manifest once it has finished."""
    argv = cli.checked_flags("bigtable_to_tfrecord", argv)
    options = PipelineOptions(argv)
    read = _read_config(options)
    ensure_table(read.table, read.families)
    sink = _examples_sink(options, read)
    spec = feature_spec(options, _first_samples(read))
    config = dataset_config(options, spec, source={
        "type": "bigtable", "table": read.table.url, "columns": options.view_as(
            BigtableReadOptions).columns})
    if options.view_as(BigtableReadOptions).examples_only:
        config = dataclasses.replace(config, write_tfrecords=False)
    return run_dataset_job(options, config, ReadBigtableSamples(read).source,
                           examples_sink=sink)


if __name__ == "__main__":
    cli.main(run)

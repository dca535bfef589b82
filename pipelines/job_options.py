"""The jobs' own flags, beside the shared ones (pipelines/dataset_options.py).

They live here, not in the job modules, because a job runs as `__main__`
(`python -m pipelines.X`): an options class defined there would exist twice
once anything imports the job module by name, and Beam, which parses every
loaded options class together, would meet each of its flags twice. For the
same reason a flag is defined once and shared (`--input` by three jobs,
`--instance`/`--table` by two). Which job reads which classes:
pipelines/template_metadata.py `TEMPLATES`.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

from pipelines.flag_types import BIGTABLE_ID, GS_PATH, Flag, FlagTable
from transforms.format.text import comma_list
from transforms.sources.bigtable import BigtableTable

__all__ = [
    "BigtableLoadOptions",
    "bigtable_table",
    "input_patterns",
    "BigtableReadOptions",
    "BigtableTableOptions",
    "InputOptions",
    "ListingOptions",
]


class InputOptions(FlagTable, PipelineOptions):
    """The input files of the tar and listing jobs."""

    FLAGS = (
        Flag("input", "input", example="gs://my-bucket/raw/train-*.tar",
             regex="^gs://[^,]+(,gs://[^,]+)*$", label="Input files",
             parameters=("file_pattern",),
             help="Tar shards (CSV/JSONL manifests for manifest_to_tfrecord, Parquet files for "
                  "parquet_to_tfrecord): a file pattern (local or gs://), or several comma "
                  "separated, e.g. 'data/train-*.tar.gz'. Required."),
    )


class ListingOptions(FlagTable, PipelineOptions):
    """How manifest_to_tfrecord and parquet_to_tfrecord read their rows (the files are
    --input)."""

    FLAGS = (
        Flag("media_columns", "input", default="", example="audio",
             help="Columns holding media, comma separated, e.g. 'audio,video': file paths or "
                  "URIs (relative to the manifest or Parquet file, absolute, or gs://), or in "
                  "Parquet the bytes themselves (a Hugging Face audio struct of bytes and "
                  "path); each is read into the field named by its column. Required."),
        Flag("key_column", "input", default="", example="clip_id",
             help="Column holding each row's sample key; default: the first media column's path up "
                  "to the first dot of its file name (Parquet: the file's name and the row's "
                  "number)."),
    )


class BigtableTableOptions(FlagTable, PipelineOptions):
    """Which Bigtable table (the project is Beam's own --project)."""

    FLAGS = (
        Flag("instance", "bigtable", example="media-instance",
             regex="^[a-z][-a-z0-9]{4,31}[a-z0-9]$",
             help="Bigtable instance id. Required."),
        Flag("table", "bigtable", example="raw", regex=BIGTABLE_ID,
             help="Bigtable table id. Required."),
    )


class BigtableReadOptions(FlagTable, PipelineOptions):
    """What bigtable_to_tfrecord reads, and where else its examples go."""

    FLAGS = (
        Flag("columns", "bigtable", example="raw:wav=wav,raw:label=cls",
             help="Which cells become which fields: 'family:qualifier=field' comma separated, or "
                  "'family:*' for every qualifier of a family, e.g. 'raw:wav=wav,raw:label=cls'. "
                  "Required."),
        Flag("app_profile", "bigtable", default="", example="batch-reads",
             label="Bigtable app profile",
             help="Bigtable app profile id."),
        Flag("start_key", "bigtable", default="", example="spk00",
             help="First row key to read."),
        Flag("end_key", "bigtable", default="", example="spk10",
             help="Row key to stop before."),
        Flag("prefix", "bigtable", default="", example="spk01/",
             help="Only rows whose key starts so."),
        Flag("key_regex", "bigtable", default="", example="spk0[0-4]/.*", label="Row key regex",
             help="Only rows whose whole key matches this RE2 regex."),
        Flag("max_rows", "bigtable", type=int, default=0, example="1000",
             help="At most this many rows, the first in key order (0 = all)."),
        Flag("sample_fraction", "bigtable", type=float, default=1.0,
             help="Keep this fraction of rows, chosen by a hash of the key: the same rows on every "
                  "run."),
        Flag("max_ranges", "bigtable", type=int, default=64,
             help="Key ranges read in parallel (cut at the table's sample keys)."),
        Flag("examples_table", "bigtable", default="", example="examples", regex=BIGTABLE_ID,
             help="Also write the encoded examples to this table (same instance)."),
        Flag("examples_family", "bigtable", default="ex", example="ex", regex=BIGTABLE_ID,
             help="Column family of --examples_table (default ex)."),
        Flag("create_examples_table", "bigtable", switch=True,
             help="Create --examples_table and its family when missing."),
        Flag("examples_only", "bigtable", switch=True,
             help="Write examples to --examples_table only, no TFRecord files (the manifest and "
                  "dead letters still go to --output)."),
    )


class BigtableLoadOptions(FlagTable, PipelineOptions):
    """How tar_to_bigtable loads the tar shards (the input is --input)."""

    FLAGS = (
        Flag("family", "bigtable", default="raw", example="raw", regex=BIGTABLE_ID,
             help="Column family holding the fields: one cell per field, qualifier = the field "
                  "name (default raw)."),
        Flag("create_table", "bigtable", switch=True,
             help="Create the table and the family when missing (else the job stops before any "
                  "work)."),
        Flag("failures_output", "bigtable", default="",
             example="gs://my-bucket/loads/raw_failures.jsonl", regex=GS_PATH,
             label="Dead letters file",
             help="Write dead letters here as JSON lines (local or gs://); empty logs them."),
    )


def input_patterns(options: PipelineOptions, what: str) -> list:
    """--input's comma-separated patterns; ValueError saying it is required, and
    what it names (`what`), when it is empty."""
    patterns = comma_list(options.view_as(InputOptions).input or "")
    if not patterns:
        raise ValueError(f"--input is required ({what})")
    return patterns


def bigtable_table(options: PipelineOptions, *required: tuple,
                   app_profile: str | None = None) -> BigtableTable:
    """The table --project, --instance and --table name (its reads through
    `app_profile`); ValueError naming each of those and of the `required`
    (flag, value) pairs that is empty."""
    table = options.view_as(BigtableTableOptions)
    project = options.view_as(GoogleCloudOptions).project
    missing = [flag for flag, value in (("--project", project), ("--instance", table.instance),
                                        ("--table", table.table), *required) if not value]
    if missing:
        raise ValueError(f"{', '.join(missing)} required")
    return BigtableTable(project, table.instance, table.table, app_profile)

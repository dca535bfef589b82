"""Parquet files (Hugging Face `datasets` exports among them) -> a sharded TFRecord dataset.

Locally (DirectRunner):

    python -m pipelines.parquet_to_tfrecord \
        --input 'data/train-*.parquet' --media_columns audio --key_column id \
        --output out/ --cut utterances --audio_fields audio --audio_features fbank \
        --features 'text:string,speaker=speaker_id:int64' --text_field text \
        --split_by speaker_id

On Dataflow:

    python -m pipelines.parquet_to_tfrecord \
        --input 'gs://BUCKET/parquet/train-*.parquet' --media_columns audio \
        --output gs://BUCKET/datasets/v1 --cut audio_windows --audio_fields audio \
        --features 'label:int64' \
        --runner DataflowRunner --project PROJECT --region REGION \
        --temp_location gs://BUCKET/tmp --setup_file ./setup.py

Each row is a sample: its media columns' bytes (embedded, a Hugging Face
audio struct's `bytes`, or the file its `path` names) in fields named by the
columns, its other columns as label and metadata fields
(`transforms.sources.parquet`). The launcher reads each file's footer only;
workers read runs of row groups. Every other flag is shared by all pipelines
(`pipelines.dataset_options`); `--media_columns` and `--key_column` are the
listing job's.
"""

from __future__ import annotations

import transforms as dg
from pipelines import cli
from pipelines.dataset_job import run_rows_job

__all__ = ["run"]


def run(argv=None) -> dict | None:
    """Builds and runs the job; returns the manifest once it has finished."""
    return run_rows_job("parquet_to_tfrecord", argv, dg.ReadParquetSamples,
                        "Parquet files: a file pattern, or several comma separated")


if __name__ == "__main__":
    cli.main(run)

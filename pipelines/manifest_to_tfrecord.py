"""CSV/JSONL manifests naming media files -> a sharded TFRecord dataset with a manifest.

Locally (DirectRunner):

    python -m pipelines.manifest_to_tfrecord \
        --input data/clips.csv --media_columns audio --output out/ \
        --features 'audio:bytes,label:int64,speaker:bytes' \
        --split_by speaker --stratify_by label --splits train=0.8,eval=0.1,test=0.1 \
        [--direct_num_workers 2]

On Dataflow:

    python -m pipelines.manifest_to_tfrecord \
        --input 'gs://BUCKET/lists/clips-*.jsonl.gz' --media_columns audio \
        --output gs://BUCKET/datasets/v1 --split_column split \
        --cut audio_windows --audio_fields audio --features 'label:int64' \
        --runner DataflowRunner --project PROJECT --region REGION \
        --temp_location gs://BUCKET/tmp --setup_file ./setup.py

Each row is a sample: its media columns' files (relative to the manifest, or
absolute, or gs://) read into fields named by the columns, its other columns
as label and metadata fields (`transforms.sources.listing`). A Kaldi data
directory's `wav.scp` and a Lhotse recordings manifest or CutSet are listings
too, a row an utterance (`transforms.sources.listing_sets`). The launcher reads
only the first line of each manifest, to check that the columns the flags name
exist; workers read the rows. Every other flag is shared by all pipelines
(`pipelines.dataset_options`); `--input` is the tar pipeline's flag, here
naming manifests.
"""

from __future__ import annotations

import transforms as dg
from pipelines import cli
from pipelines.dataset_job import run_rows_job

__all__ = ["run"]


def run(argv=None) -> dict | None:
    """Builds and runs the job; returns the manifest once it has finished."""
    return run_rows_job("manifest_to_tfrecord", argv, dg.ReadListingSamples,
                        "CSV or JSONL manifests (or Kaldi wav.scp files, Lhotse recordings "
                        "manifests or CutSets): a file pattern, or several comma separated")


if __name__ == "__main__":
    cli.main(run)

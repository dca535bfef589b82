"""Flags and launch steps every dataset-building pipeline shares.

A pipeline module adds its source's flags in its own `PipelineOptions`
subclass, reads its source into Samples, and hands them to `run_dataset_job`,
which applies the shared `WriteDataset` composite, runs the job and prints the
summary. Flag names here are also the flex template parameter names.
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any, Iterable, Mapping

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState

from transforms import manifest, sample_ops
from transforms.dataset import DatasetConfig, WriteDataset, summary_line
from transforms.examples import ExampleRecipe
from transforms.spec import FeatureSpec, infer_spec, parse_features
from transforms.splits import SplitPlan
from transforms.runtime import make_pipeline

__all__ = ["DatasetOptions", "dataset_config", "feature_spec", "read_manifest", "run_dataset_job"]

_LOG = logging.getLogger(__name__)


class DatasetOptions(PipelineOptions):
    """What to build and how to write it (every pipeline has these)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--output", help="Output directory (local or gs://): split folders, "
            "dataset_info.json, schema.pbtxt and failures/ go here. Required.")
        parser.add_argument(
            "--features", default="auto",
            help="Feature spec, comma separated [name=]source:dtype[shape], e.g. "
            "'flac:bytes,cls:int64,speaker=json.speaker:bytes,emb:float[128]'; "
            "'auto' infers it from the first samples.")
        parser.add_argument(
            "--infer_samples", type=int, default=16,
            help="How many samples --features auto looks at.")
        parser.add_argument(
            "--split_by", default="__key__",
            help="Group key for splits: FIELD[:REGEX], the regex's first capture, "
            "e.g. '__key__:^([^_]+)' or 'json.speaker'.")
        parser.add_argument(
            "--splits", default="train=0.8,eval=0.1,test=0.1",
            help="Split names and ratios summing to 1, e.g. 'train=0.9,test=0.1'.")
        parser.add_argument(
            "--select", default="",
            help="Keep only these fields: names, prefix:P, suffix:S, contains:C.")
        parser.add_argument(
            "--where", default="", help="Keep only samples with these values, e.g. 'cls=3'.")
        parser.add_argument(
            "--rename", default="", help="Rename fields, e.g. 'flac=audio,cls=label'.")
        parser.add_argument(
            "--filter_empty", action="store_true",
            help="Drop (and count) samples and examples that hold no data.")
        parser.add_argument(
            "--sample_fn", default="", help="module:function applied to each Sample "
            "(returns a Sample, or None to drop it).")
        parser.add_argument(
            "--example_fn", default="", help="module:function applied to each example's "
            "feature values (returns a dict, or None to drop it).")
        parser.add_argument(
            "--num_shards", type=int, default=0,
            help="Shards per split; 0 sizes them by --shard_size_mb.")
        parser.add_argument(
            "--shard_size_mb", type=float, default=128,
            help="Target shard size in MiB of serialized examples (default 128).")
        parser.add_argument(
            "--compression", default="gzip", choices=["gzip", "none"],
            help="TFRecord compression (default gzip).")
        parser.add_argument(
            "--max_failure_fraction", type=float, default=0.01,
            help="Fail the job when more than this fraction of inputs (samples, plus "
            "files that yielded none) become dead letters (default 0.01).")


def _recorded_options(opts: DatasetOptions) -> dict:
    names = ("features", "split_by", "splits", "select", "where", "rename", "filter_empty",
             "sample_fn", "example_fn", "num_shards", "shard_size_mb", "compression",
             "max_failure_fraction")
    return {n: getattr(opts, n) for n in names}


def dataset_config(options: PipelineOptions, spec: FeatureSpec,
                   source: Mapping[str, Any]) -> DatasetConfig:
    """Validates the shared flags and turns them into a DatasetConfig.

    Every flag error is raised here, before any pipeline work, as ValueError
    naming the flag.
    """
    opts = options.view_as(DatasetOptions)
    if not opts.output:
        raise ValueError("--output is required")
    if opts.num_shards < 0 or opts.shard_size_mb <= 0:
        raise ValueError("--num_shards must be >= 0 and --shard_size_mb > 0")
    if not 0 <= opts.max_failure_fraction <= 1:
        raise ValueError("--max_failure_fraction must be between 0 and 1")
    recipe = ExampleRecipe(
        spec=spec,
        split_plan=SplitPlan.from_flags(opts.splits, opts.split_by),
        selection=sample_ops.parse_selection(opts.select) if opts.select else None,
        where=sample_ops.parse_pairs(opts.where, "--where"),
        renames=sample_ops.parse_pairs(opts.rename, "--rename"),
        filter_empty=opts.filter_empty,
        sample_fn=opts.sample_fn or None,
        example_fn=opts.example_fn or None)
    recipe.load_functions()  # an unimportable function fails now, not on a worker
    return DatasetConfig(
        output=opts.output.rstrip("/"),
        recipe=recipe,
        compression=opts.compression,
        target_shard_bytes=int(opts.shard_size_mb * (1 << 20)),
        num_shards=opts.num_shards,
        max_failure_fraction=opts.max_failure_fraction,
        source=dict(source),
        options=_recorded_options(opts))


def feature_spec(options: PipelineOptions, samples: Iterable) -> FeatureSpec:
    """--features parsed, or inferred from the first of `samples` (a lazy iterable)."""
    opts = options.view_as(DatasetOptions)
    if opts.features.strip() != "auto":
        return parse_features(opts.features)
    first = list(itertools.islice(samples, opts.infer_samples))
    if not first:
        raise ValueError("--features auto: the input has no readable sample to infer from; "
                         "give --features explicitly")
    spec = infer_spec(first)
    _LOG.info("inferred --features %s", ",".join(
        f"{f.name}:{f.dtype}" + ("[*]" if f.is_variable else "") for f in spec))
    return spec


def read_manifest(output: str) -> dict:
    with FileSystems.open(FileSystems.join(output, manifest.MANIFEST)) as f:
        return json.loads(f.read())


def run_dataset_job(options: PipelineOptions, config: DatasetConfig,
                    read_samples: beam.PTransform) -> dict | None:
    """Runs source -> WriteDataset; returns the manifest when the job finished here.

    `read_samples` is a PTransform from the pipeline root to a DoOutputsTuple
    with `samples` and `failures`.
    """
    pipeline = make_pipeline(options)
    read = pipeline | "ReadSamples" >> read_samples
    _ = {"samples": read.samples, "failures": read.failures} | "WriteDataset" >> WriteDataset(config)
    result = pipeline.run()
    state = result.wait_until_finish()
    if state != PipelineState.DONE:
        return None
    info = read_manifest(config.output)
    print(summary_line(info))
    return info

"""Flags and launch steps every dataset-building pipeline shares.

A pipeline module adds its source's flags in its own `PipelineOptions`
subclass, plans its source's work units (transforms/sources/units.py) and hands them to
`run_dataset_job`, which applies the shared `WriteDataset` composite, runs the
job and prints the summary. Flag names here are also the flex template
parameter names.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
from typing import Any, Iterable, Mapping

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from pipelines.flag_types import FUNCTION, GS_PATH, SWITCH, flag, flag_group
from transforms.format import manifest
from transforms.format.text import comma_list
from transforms.runner import progress
from transforms.dataset import sample_ops
from transforms.media.audio import AudioOptions
from transforms.media.windows import WindowOptions
from transforms.media.cutting import MODES, CutOptions, media_features, media_fields
from transforms.dataset.write import SHUFFLES, DatasetConfig, WriteDataset
from transforms.dataset.examples import ExampleRecipe
from transforms.dataset.fileops import check_writable
from transforms.dataset.finalise import summary_line
from transforms.tft.preprocessing import Preprocessing
from transforms.format.spec import FeatureSpec, infer_spec, parse_features
from transforms.runner.runtime import announce_job, make_pipeline, runs_locally, wait_for
from transforms.dataset.splits import SplitPlan
from transforms.dataset.tfrecord import COMPRESSIONS
from transforms.sources.units import Source
from transforms.media.video import FrameOptions

__all__ = [
    "DatasetOptions",
    "cut_options",
    "dataset_config",
    "feature_spec",
    "read_manifest",
    "run_dataset_job",
]

_LOG = logging.getLogger(__name__)


class DatasetOptions(PipelineOptions):
    """What to build and how to write it (every pipeline has these)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        features = flag_group(parser, "features")
        cutting = flag_group(parser, "cutting")
        splits = flag_group(parser, "splits")
        operations = flag_group(parser, "sample operations")
        output = flag_group(parser, "output")
        preprocessing = flag_group(parser, "preprocessing")
        flag(
            output,
            "--output",
            help="Output directory (local or gs://): split folders, "
            "dataset_info.json, schema.pbtxt and failures/ go here. Required.",
            example="gs://my-bucket/datasets/v1",
            regex=GS_PATH,
            label="Output directory",
        )
        flag(
            features,
            "--features",
            default="auto",
            help="Feature spec, comma separated [name=]source:dtype[shape], e.g. "
            "'flac:bytes,cls:int64,speaker=json.speaker:bytes,emb:float[128]'; "
            "'auto' infers it from the first samples. With --cut, the cut's features "
            "(audio, frame(s), source_key, start_time, end_time) come first and these "
            "add labels and metadata ('none' adds nothing).",
            recorded=True,
        )
        flag(
            features,
            "--infer_samples",
            type=int,
            default=16,
            help="How many samples --features auto looks at.",
        )
        flag(
            splits,
            "--split_by",
            default="__key__",
            help="Group key for splits: FIELD[:REGEX], the regex's first capture, "
            "e.g. '__key__:^([^_]+)' or 'json.speaker'.",
            recorded=True,
        )
        flag(
            splits,
            "--splits",
            default="train=0.8,eval=0.1,test=0.1",
            help="Split names and ratios summing to 1, e.g. 'train=0.9,test=0.1'.",
            regex="^[\\w-]+=[0-9.]+(,[\\w-]+=[0-9.]+)*$",
            recorded=True,
        )
        flag(
            splits,
            "--split_column",
            default="",
            help="Take each sample's split from this field (a manifest column, or e.g. "
            "json.split) instead of the ratios; values match the --splits names "
            "case-insensitively, validation/val/dev also naming eval. A value naming no "
            "split is a dead letter.",
            recorded=True,
        )
        flag(
            splits,
            "--stratify_by",
            default="",
            help="Label field to stratify by: within each label, the --split_by groups are "
            "split by the --splits ratios (each split within one group's size of its share); "
            "the manifest counts examples per split and label.",
            example="label",
            recorded=True,
        )
        flag(
            splits,
            "--allow_empty_splits",
            **SWITCH,
            help="Publish the dataset even when a split the --splits ratios ask for came out "
            "empty (too few groups); by default that fails the job.",
            recorded=True,
        )
        flag(
            splits,
            "--label_field",
            default="",
            help="Label field to count: the manifest records examples per split and label "
            "(e.g. 'cls' or 'json.label'); --stratify_by counts its label without it.",
            example="cls",
            recorded=True,
        )
        flag(
            operations,
            "--select",
            default="",
            help="Keep only these fields: names, prefix:P, suffix:S, contains:C.",
            example="flac,cls,prefix:json",
            recorded=True,
        )
        flag(
            operations,
            "--where",
            default="",
            help="Keep only samples with these values, e.g. 'cls=3'.",
            recorded=True,
        )
        flag(
            operations,
            "--rename",
            default="",
            help="Rename fields, e.g. 'flac=audio,cls=label'.",
            recorded=True,
        )
        flag(
            operations,
            "--filter_empty",
            **SWITCH,
            help="Drop (and count) samples and examples that hold no data.",
            recorded=True,
        )
        flag(
            operations,
            "--sample_fn",
            default="",
            help="module:function applied to each Sample (returns a Sample, or None to drop it).",
            example="mypackage.ops:clean_sample",
            regex=FUNCTION,
            label="Sample function",
            recorded=True,
        )
        flag(
            operations,
            "--example_fn",
            default="",
            help="module:function applied to each example's "
            "feature values (returns a dict, or None to drop it).",
            example="mypackage.ops:augment",
            regex=FUNCTION,
            label="Example function",
            recorded=True,
        )
        flag(
            preprocessing,
            "--preprocessing_fn",
            default="",
            help="module:function, a tf.Transform preprocessing_fn: analyzed on the train "
            "split, applied to every split; the shards hold its outputs, transform_fn/ is "
            "written next to them.",
            example="mypackage.transforms:preprocessing_fn",
            regex=FUNCTION,
            label="tf.Transform preprocessing function",
            recorded=True,
        )
        flag(
            preprocessing,
            "--normalize",
            default="",
            help="Built-in tf.Transform scaling with train statistics, e.g. "
            "'gain=zscore,age=0_1' (float32, replacing the feature).",
            recorded=True,
        )
        flag(
            preprocessing,
            "--vocabulary",
            default="",
            help="Built-in tf.Transform vocabulary of the train split, e.g. 'speaker,lang': "
            "each value becomes its int64 index, -1 if unseen in train.",
            recorded=True,
        )
        flag(
            preprocessing,
            "--bucketize",
            default="",
            help="Built-in tf.Transform quantile buckets from the train split, e.g. 'age=4' "
            "(int64 bucket 0..3).",
            recorded=True,
        )
        flag(
            cutting,
            "--cut",
            default="none",
            choices=list(MODES),
            help="How samples become examples: none (one example per sample), "
            "audio_windows, frames (a frame with the audio window centred on it), clips.",
            recorded=True,
        )
        flag(
            cutting,
            "--audio_fields",
            default="",
            help="Fields that may hold a sample's audio, first present wins, e.g. 'flac,wav'; "
            "without one, the video's own audio track is used.",
            example="flac,wav",
            recorded="cut",
        )
        flag(
            cutting,
            "--video_field",
            default="",
            help="The field holding the video (e.g. mp4), or 'frames' for numbered images "
            "(key.0001.jpg, key.0002.jpg, ...).",
            example="mp4",
            recorded="cut",
        )
        flag(
            cutting,
            "--sequence_fps",
            type=float,
            default=25.0,
            help="Frame rate of image-sequence samples.",
            label="Frame rate of image sequences",
            recorded="cut",
        )
        flag(
            cutting,
            "--sample_rate",
            type=int,
            default=16000,
            help="Resample audio to this rate (0 keeps the source rate).",
            recorded="cut",
        )
        flag(
            cutting,
            "--channel",
            default="mono",
            help="'mono' mixes channels down; a number picks that channel.",
            example="0",
            regex="^(mono|[0-9]+)$",
            recorded="cut",
        )
        flag(
            cutting,
            "--audio_dtype",
            default="float32",
            choices=["float32", "int16"],
            help="Audio in examples: float32 values or int16 PCM bytes.",
            recorded="cut",
        )
        flag(
            cutting,
            "--window_s",
            type=float,
            default=1.0,
            help="Audio window length, seconds.",
            label="Window length (s)",
            recorded="cut",
        )
        flag(
            cutting,
            "--hop_s",
            type=float,
            default=0.0,
            help="Audio window hop, seconds (0 = the window length).",
            example="0.5",
            label="Window hop (s)",
            recorded="cut",
        )
        flag(
            cutting,
            "--remainder",
            default="pad",
            choices=["pad", "drop"],
            help="The last partial window: zero-pad it or drop it.",
            recorded="cut",
        )
        flag(
            cutting,
            "--max_windows",
            type=int,
            default=0,
            help="At most this many windows per source (0 = all).",
            example="10",
            recorded="cut",
        )
        flag(
            cutting,
            "--random_crops",
            type=int,
            default=0,
            help="Instead of a regular grid, this many seeded random windows per source.",
            example="4",
            recorded="cut",
        )
        flag(
            cutting,
            "--seed",
            type=int,
            default=0,
            help="Seed for --random_crops (with the sample key: same crops every run).",
            recorded="cut",
        )
        flag(
            cutting,
            "--min_rms_db",
            type=float,
            default=None,
            help="Drop (and count) audio windows quieter than this RMS in dBFS.",
            example="-60",
            label="Minimum window RMS (dBFS)",
            recorded="cut",
        )
        flag(
            cutting,
            "--fps",
            type=float,
            default=1.0,
            help="Sample video frames at this rate.",
            label="Frames per second",
            recorded="cut",
        )
        flag(
            cutting,
            "--num_frames",
            type=int,
            default=0,
            help="Instead of --fps, this many frames spread over the video.",
            example="8",
            label="Frames per video",
            recorded="cut",
        )
        flag(
            cutting,
            "--timestamps",
            default="",
            help="Instead of --fps, frames at these times (seconds, comma separated).",
            example="0.5,1.5,2.5",
            regex="^[0-9.]+(,[0-9.]+)*$",
            recorded="cut",
        )
        flag(
            cutting,
            "--frame_size",
            default="",
            help="Frame size HxW, e.g. 224x224 (required for frames and clips).",
            example="224x224",
            regex="^[0-9]+x[0-9]+$",
            label="Frame size (HxW)",
            recorded="cut",
        )
        flag(
            cutting,
            "--resize",
            default="pad",
            choices=["pad", "crop"],
            help="Keep the aspect ratio by letterboxing (pad) or centre-cropping.",
            recorded="cut",
        )
        flag(
            cutting,
            "--frame_format",
            default="jpeg",
            choices=["jpeg", "raw"],
            help="Frames as JPEG bytes or raw uint8 pixels.",
            recorded="cut",
        )
        flag(cutting, "--jpeg_quality", type=int, default=90, label="JPEG quality", recorded="cut")
        flag(
            cutting,
            "--decode_threads",
            type=int,
            default=0,
            help="Video decoder threads: 1 = unthreaded; 0 = automatic: FFmpeg's "
            "choice (one per core) on the DirectRunner, 1 on Dataflow, whose "
            "workers already run a process per vCPU, each with several threads.",
            example="1",
            recorded="cut",
        )
        flag(
            cutting,
            "--no_audio",
            **SWITCH,
            help="frames/clips without audio.",
            label="Frames without audio",
            recorded="cut",
        )
        flag(
            cutting,
            "--av_window_s",
            type=float,
            default=1.0,
            help="Length of the audio window centred on each frame, seconds.",
            label="Audio window around each frame (s)",
            recorded="cut",
        )
        flag(
            cutting,
            "--clip_frames",
            type=int,
            default=8,
            help="Frames per clip (--cut clips), sampled at --fps.",
            recorded="cut",
        )
        flag(
            output,
            "--shuffle",
            default="none",
            choices=list(SHUFFLES),
            help="Where examples are written. none (default): each worker writes the "
            "examples it builds, in source order, into rolling shards: nothing is shuffled, "
            "memory stays flat, and the reader mixes shards when it shuffles. global: every "
            "shard a uniform hash-ordered sample of its split (TFDS-style), at the cost of "
            "shuffling every example.",
            recorded=True,
        )
        flag(
            output,
            "--num_shards",
            type=int,
            default=0,
            help="With --shuffle global, shards per split; 0 sizes them by --shard_size_mb.",
            example="16",
            label="Shards per split",
            recorded=True,
        )
        flag(
            output,
            "--shard_size_mb",
            type=float,
            default=128,
            help="Target shard size in MiB of serialized examples (default 128); also the "
            "input a work unit gathers (a tar file, or consecutive smaller ones).",
            label="Target shard size (MiB)",
            recorded=True,
        )
        flag(
            output,
            "--compression",
            default="gzip",
            choices=list(COMPRESSIONS),
            help="TFRecord compression (default gzip).",
            recorded=True,
        )
        flag(
            output,
            "--max_failure_fraction",
            type=float,
            default=0.01,
            help="Fail the job when more than this fraction of inputs (samples, plus "
            "files that yielded none) become dead letters (default 0.01).",
            label="Maximum failed fraction",
            recorded=True,
        )


def _recorded_options(opts: DatasetOptions) -> dict:
    """The flags the manifest records (declared `recorded`), in declaration order;
    the cutting ones only with a --cut."""
    parser = argparse.ArgumentParser(add_help=False)
    DatasetOptions._add_argparse_args(parser)
    wanted = {True, "cut"} if opts.cut != "none" else {True}
    return {action.dest: getattr(opts, action.dest) for action in parser._actions
            if getattr(action, "recorded", False) in wanted}


def _frame_size(text: str) -> tuple | None:
    if not text:
        return None
    height, sep, width = text.lower().partition("x")
    try:
        size = (int(height), int(width))
    except ValueError:
        size = (0, 0)
    if not sep or min(size) <= 0:
        raise ValueError(f"--frame_size {text!r} is not HxW, e.g. 224x224")
    return size


def _number_list(text: str, flag: str) -> tuple:
    try:
        return tuple(float(t) for t in comma_list(text))
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not a comma-separated list of numbers") from None


def cut_options(options: PipelineOptions) -> CutOptions:
    """The decode-and-cut flags as CutOptions; ValueError naming a bad flag."""
    opts = options.view_as(DatasetOptions)
    if opts.channel != "mono" and not opts.channel.isdigit():
        raise ValueError(f"--channel {opts.channel!r}: 'mono' or a channel number")
    channel = opts.channel if opts.channel == "mono" else int(opts.channel)
    return CutOptions(
        mode=opts.cut,
        audio_fields=comma_list(opts.audio_fields),
        video_field=opts.video_field,
        sequence_fps=opts.sequence_fps,
        audio=AudioOptions(
            sample_rate=opts.sample_rate or None, channel=channel, dtype=opts.audio_dtype
        ),
        windows=WindowOptions(
            window_s=opts.window_s,
            hop_s=opts.hop_s or None,
            remainder=opts.remainder,
            max_windows=opts.max_windows,
            random_crops=opts.random_crops,
            seed=opts.seed,
            min_rms_db=opts.min_rms_db,
        ),
        frames=FrameOptions(
            fps=None if opts.num_frames or opts.timestamps else opts.fps,
            num_frames=opts.num_frames,
            timestamps=_number_list(opts.timestamps, "--timestamps"),
            size=_frame_size(opts.frame_size),
            resize=opts.resize,
            image_format=opts.frame_format,
            jpeg_quality=opts.jpeg_quality,
            threads=opts.decode_threads or (0 if runs_locally(options) else 1),
        ),
        with_audio=not opts.no_audio,
        av_window_s=opts.av_window_s,
        clip_frames=opts.clip_frames,
    )


def dataset_config(
    options: PipelineOptions, spec: FeatureSpec, source: Mapping[str, Any]
) -> DatasetConfig:
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
    workers = options.view_as(DirectOptions).direct_num_workers
    if opts.shuffle == "global" and runs_locally(options) and workers != 1:
        # README, "Writer layouts": Beam 2.77's local runner sends a stage's input
        # to its workers through a stream a background thread flushes every
        # second without a lock, dropping whatever is written meanwhile.
        raise ValueError(
            f"--shuffle global cannot run with --direct_num_workers {workers}: "
            "Beam 2.77's local runner loses part of a large stage's input "
            "between its processes; use the default --shuffle none, or "
            "--direct_num_workers 1"
        )
    recipe = ExampleRecipe(
        cut=cut_options(options),
        spec=spec,
        split_plan=SplitPlan.from_flags(
            opts.splits, opts.split_by, opts.split_column, opts.stratify_by, opts.label_field
        ),
        selection=sample_ops.parse_selection(opts.select) if opts.select else None,
        where=sample_ops.parse_pairs(opts.where, "--where"),
        renames=sample_ops.parse_pairs(opts.rename, "--rename"),
        filter_empty=opts.filter_empty,
        sample_fn=opts.sample_fn or None,
        example_fn=opts.example_fn or None,
    )
    recipe.load_functions()  # an unimportable function fails now, not on a worker
    preprocessing = Preprocessing.from_flags(
        opts.preprocessing_fn, opts.normalize, opts.vocabulary, opts.bucketize
    )
    if preprocessing is not None:
        preprocessing.check(spec, recipe.split_plan.names)
    return DatasetConfig(
        output=opts.output.rstrip("/"),
        recipe=recipe,
        compression=opts.compression,
        target_shard_bytes=int(opts.shard_size_mb * (1 << 20)),
        num_shards=opts.num_shards,
        max_failure_fraction=opts.max_failure_fraction,
        source=dict(source),
        options=_recorded_options(opts),
        preprocessing=preprocessing,
        shuffle=opts.shuffle,
        allow_empty_splits=opts.allow_empty_splits,
    )


def feature_spec(options: PipelineOptions, samples: Iterable) -> FeatureSpec:
    """The spec: what --cut adds, plus --features parsed, or inferred from the
    first of `samples` (a lazy iterable) when it is 'auto'.

    With a cut, inference looks only at the fields the cut does not consume
    (labels, metadata); 'none' adds nothing beyond the cut's features.
    """
    opts = options.view_as(DatasetOptions)
    cut = cut_options(options)
    added = media_features(cut)
    text = opts.features.strip()
    if text == "none":
        return FeatureSpec(added)
    if text != "auto":
        return FeatureSpec(added + parse_features(text).features)
    first = [
        {k: v for k, v in s.items() if k not in media_fields(s, cut)}
        for s in itertools.islice(samples, opts.infer_samples)
    ]
    if not first:
        raise ValueError(
            "--features auto: the input has no readable sample to infer from; "
            "give --features explicitly"
        )
    spec = FeatureSpec(added + infer_spec(first).features)
    _LOG.info(
        "features: %s",
        ",".join(f"{f.name}:{f.dtype}" + ("[*]" if f.is_variable else "") for f in spec),
    )
    return spec


def read_manifest(output: str) -> dict:
    with FileSystems.open(FileSystems.join(output, manifest.MANIFEST)) as f:
        return json.loads(f.read())


def run_dataset_job(
    options: PipelineOptions,
    config: DatasetConfig,
    source: Source,
    examples_sink: beam.PTransform | None = None,
) -> dict | None:
    """Runs WriteDataset over the planned `source`; returns the manifest when the
    job finished here (not with --no_wait_until_finish, a flex template launch).

    `examples_sink` see WriteDataset.
    """
    # After every flag check, so a flag error leaves no folder behind; before
    # any work, so an output it cannot write costs nothing.
    check_writable(config.output)
    local = runs_locally(options)
    interval = progress.INTERVAL_S if local else None
    pipeline = make_pipeline(options, interval)
    _ = pipeline | "WriteDataset" >> WriteDataset(config, source, examples_sink)
    with (
        progress.reporting(interval, config.source.get("input_bytes"))
        if interval
        else contextlib.nullcontext()
    ):
        result = pipeline.run()
        if not local:
            announce_job(result, options)
        finished = wait_for(result, options)
    if not finished:
        return None
    info = read_manifest(config.output)
    print(summary_line(info))
    for warning in info["warnings"]:
        print(f"warning: {warning}")
    return info

"""Launch steps every dataset-building pipeline shares.

A pipeline module adds its source's flags in its own `PipelineOptions`
subclass (pipelines/job_options.py), plans its source's work units
(transforms/sources/units.py) and hands them to `run_dataset_job`, which checks
the shared flags (pipelines/dataset_options.py) before any work, applies the
shared `WriteDataset` composite, runs the job and prints the summary.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
from typing import Any, Iterable, Mapping

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from pipelines.dataset_options import DatasetOptions
from transforms.dataset import ledger, projection
from transforms.dataset.dry_run import measure_sample
from transforms.dataset.fileops import check_writable, read_manifest
from transforms.dataset.finalise import summary_line
from transforms.dataset.ledger import plan_run_folder, start_run
from transforms.dataset.write import DatasetConfig, WriteDataset
from transforms.format.infer import infer_spec
from transforms.format.spec import FeatureSpec, parse_features
from transforms.format.text import comma_list
from transforms.media.audio import AudioOptions
from transforms.media.cutting import CutOptions, media_features, media_fields
from transforms.media.frames import FrameOptions
from transforms.media.windows import WindowOptions
from transforms.recipe import sample_ops
from transforms.recipe.examples import ExampleRecipe
from transforms.recipe.splits import SplitPlan
from transforms.runner import progress
from transforms.runner.beam_internals import declare_flags
from transforms.runner.counters import NAMESPACE
from transforms.runner.runtime import announce_job, make_pipeline, runs_locally, wait_for
from transforms.sources.units import Source
from transforms.tft.preprocessing import Preprocessing

__all__ = [
    "cut_options",
    "dataset_config",
    "dry_run",
    "feature_spec",
    "run_dataset_job",
]

_LOG = logging.getLogger(__name__)


def _recorded_options(opts: DatasetOptions) -> dict:
    """The flags the manifest records (declared `recorded`), in declaration order;
    the cutting ones only with a --cut."""
    parser = argparse.ArgumentParser(add_help=False)
    declare_flags(DatasetOptions, parser)
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
        min_duration_s=opts.min_duration_s,
        max_duration_s=opts.max_duration_s,
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
    if (opts.resume or opts.retry_failed) and (opts.shuffle == "global" or any(
            (opts.preprocessing_fn, opts.normalize, opts.vocabulary, opts.bucketize))):
        # The global layout writes no shard before every example is shuffled, and a
        # tf.Transform is fitted on the whole train split before any unit is written.
        raise ValueError(f"--{'retry_failed' if opts.retry_failed else 'resume'} reuses the "
                         "shards of work units: not with --shuffle global or tf.Transform "
                         "preprocessing, which have none of their own")
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
            opts.splits, opts.split_by, opts.split_column, opts.stratify_by, opts.label_field,
            spec
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


def dry_run(config: DatasetConfig, source: Source, samples: int):
    """--dry_run_samples: the recipe on the first `samples` samples, here; prints
    and returns the whole job's Projection (transforms/dataset/projection.py)."""
    input_bytes = config.source.get("input_bytes")
    if not input_bytes:
        raise ValueError(f"--dry_run_samples: a {config.source['type']} source's size is not "
                         "known before reading it; it projects tar shards only")
    measure = measure_sample(source, config.recipe, samples)
    read_bytes = sum(m.size_in_bytes for result in FileSystems.match(list(measure.files_read))
                     for m in result.metadata_list)
    plan = config.recipe.split_plan
    projected = projection.project(
        measure, input_bytes=input_bytes, read_bytes=read_bytes,
        split_ratios=None if plan.column else dict(plan.splits), split_names=plan.names,
        target_shard_bytes=config.target_shard_bytes,
        shuffle=config.shuffle, num_shards=config.num_shards, compression=config.compression,
        video=config.recipe.cut.mode in ("frames", "clips"))
    print(projection.render(projected, measure, input_bytes=input_bytes, read_bytes=read_bytes,
                            input_files=config.source.get("num_files", len(measure.files_read)),
                            options={"shuffle": config.shuffle,
                                     "shard_size_mb": config.target_shard_bytes / (1 << 20)}))
    return projected


_CONVERTED_BECAUSE = {ledger.CHANGED: "whose input files changed since they were read",
                      ledger.RETRIED: "that held dead letters"}


def _reuse_line(result) -> str:
    """'resume: 3 work units reused, 5 converted (2 whose input files changed
    since they were read)', from the job's counters."""
    counts = {name: sum(c.committed or 0 for c in result.metrics().query(
        MetricsFilter().with_namespace(NAMESPACE).with_name(name))["counters"])
        for name in (ledger.REUSE, ledger.NEW, ledger.CHANGED, ledger.RETRIED)}
    converted = counts[ledger.NEW] + counts[ledger.CHANGED] + counts[ledger.RETRIED]
    why = ", ".join(f"{counts[r]} {text}" for r, text in _CONVERTED_BECAUSE.items() if counts[r])
    return (f"resume: {counts[ledger.REUSE]} work units reused, {converted} converted"
            + (f" ({why})" if why else ""))


def run_dataset_job(
    options: PipelineOptions,
    config: DatasetConfig,
    source: Source,
    examples_sink: beam.PTransform | None = None,
) -> dict | None:
    """Runs WriteDataset over the planned `source`; returns the manifest when the
    job finished here (not with --no_wait_until_finish, a flex template launch).

    `examples_sink` see WriteDataset. With --dry_run_samples, writes nothing and
    returns the job's Projection instead (`dry_run`).
    """
    samples = options.view_as(DatasetOptions).dry_run_samples
    if samples < 0:
        raise ValueError(f"--dry_run_samples {samples}: must be 0 (a real run) or more")
    if samples:
        return dry_run(config, source, samples)
    opts = options.view_as(DatasetOptions)
    if (opts.resume or opts.retry_failed) and not (config.write_tfrecords
                                                   and examples_sink is None):
        raise ValueError("--resume and --retry_failed reuse TFRecord shards: not with an "
                         "examples table")
    run, reusing = plan_run_folder(config.output, config.fingerprint, config.options,
                                   resume=opts.resume, retry_failed=opts.retry_failed)
    # After every flag check, so a flag error leaves no folder behind; before
    # any work, so an output it cannot write costs nothing.
    check_writable(config.output)
    start_run(run, config.fingerprint, config.options)
    if reusing:
        print(reusing)
    local = runs_locally(options)
    interval = progress.INTERVAL_S if local else None
    pipeline = make_pipeline(options, interval)
    _ = pipeline | "WriteDataset" >> WriteDataset(config, source, examples_sink, run)
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
    if run.reuse:
        print(_reuse_line(result))
    print(summary_line(info))
    for warning in info["warnings"]:
        print(f"warning: {warning}")
    return info

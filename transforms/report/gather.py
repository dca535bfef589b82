"""What a dataset report shows, read from the manifest and a sample of examples.

Beam-free (TensorFlow, through the reader). Per split: the manifest's example
and label counts; each example's size from the record indexes (all of them,
without reading a record; a gzip dataset has none); every example's
duration, as the manifest's histogram counts it; and, from up to
`max_examples` examples read, their start times; the manifest's hours,
bytes and bucket boundaries. A few examples picked at random (through the
indexes when there are some) give the frames of the contact sheet and the
audio: the windows a cut made, or, for whole samples (no --cut), their
recordings decoded from the stored bytes (the first _WHOLE_AUDIO_S seconds);
the dead letters are counted by stage. In an augmented dataset, one sample
with copies is shown as a family: the first example of its original and of
each copy, found within `max_examples` examples of its split.
"""

from __future__ import annotations

import collections
import json
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from transforms.format import manifest, reader
from transforms.format.manifest import DatasetInfo
from transforms.format.record_index import FRAME_OVERHEAD, RecordTable
from transforms.format.sample import KEY
from transforms.format.spec import FeatureSpec
from transforms.format.tf_paths import tf_readable
from transforms.media.audio import AudioOptions, stream_audio
from transforms.media.decoded import MediaError

__all__ = ["AudioClip", "DatasetView", "SplitView", "Thumbnail", "gather"]

# Examples read per batch for the histograms.
_BATCH = 256
# A whole recording is shown up to this long, at _WHOLE_AUDIO's rate.
_WHOLE_AUDIO_S = 600.0
_WHOLE_AUDIO = AudioOptions(sample_rate=16000)


class SplitView(NamedTuple):
    """What the report shows of one split."""

    name: str
    num_examples: int
    num_bytes: int         # of its shards' records
    durations_entry: dict  # the manifest's: total_s, histogram, bucket_boundaries_s
    label_counts: dict     # label -> examples (the manifest's), {} without labels
    sizes: np.ndarray      # bytes of every example, from the indexes ([] for gzip)
    durations: np.ndarray        # the manifest's duration bins, their middles, s
    duration_counts: np.ndarray  # examples in each
    start_times: np.ndarray      # of the examples read ([] without times)
    examples_read: int


class Thumbnail(NamedTuple):
    """A frame (the first of a clip) for the contact sheet."""

    split: str
    image: np.ndarray  # uint8 [h, w, c]
    caption: str
    source: str        # the example's source key and times, or '' ("where it came from")


class AudioClip(NamedTuple):
    split: str
    samples: np.ndarray  # float32 in [-1, 1] for int16 audio
    sample_rate: int
    caption: str
    source: str
    whole: bool = False  # a whole sample's recording (else a cut's window)


class DatasetView(NamedTuple):
    root: str
    info: DatasetInfo
    splits: tuple        # SplitViews, in the manifest's order
    thumbnails: tuple
    audio: tuple
    dead_letters: dict   # stage -> count
    filtered: dict       # reason -> samples
    family: tuple = ()   # AudioClips of one augmented sample: its original, then its copies


def _media_features(info: DatasetInfo) -> tuple:
    """(image feature, audio feature, whole-audio feature), each None when
    absent: the whole-audio one is a stored recording (a bytes feature from
    an --audio_fields member) of a dataset of whole samples."""
    spec, cut = info.spec, info.recipe["cut"]
    image = next((f for f in spec if f.dtype == "jpeg" or (
        f.dtype == "uint8" and len(f.shape) in (3, 4) and f.shape[-1] in (1, 3))), None)
    audio = next((f for f in spec if f.sample_rate), None)
    fields = cut.get("audio_fields") or ()
    whole = None
    if cut.get("mode", "none") == "none":
        whole = next((f for f in spec if f.dtype == "bytes" and not f.shape
                      and f.source in fields), None)
    return image, audio, whole


def _label_name(info: DatasetInfo) -> str | None:
    splits = info.recipe.get("splits", {})
    source = splits.get("label_field") or splits.get("stratify_by")
    return next((f.name for f in info.spec if f.source == source and source),
                "label" if "label" in info.spec.names else None)


def _class_name(label: str, names: list | None) -> str:
    """A label as its class's name where the input declared the names (a
    Hugging Face ClassLabel), else as it is."""
    return names[int(label)] if names and label.isdigit() and int(label) < len(names) else label


def _named(counts: dict, names: list | None) -> dict:
    """Label counts keyed by `_class_name`."""
    return {_class_name(label, names): n for label, n in counts.items()}


def _key_name(spec: FeatureSpec, media: tuple) -> str | None:
    """The feature naming an example's source: `source_key`, a feature of the
    sample key, else the first short text one (not a stored recording)."""
    if "source_key" in spec.names:
        return "source_key"
    texts = [f for f in spec if f.kind == "bytes" and not f.shape
             and f.dtype in ("bytes", "string") and f not in media]
    return next((f.name for f in texts if f.source == KEY), texts[0].name if texts else None)


def _sizes(root: str, info: DatasetInfo, split: str) -> np.ndarray:
    shards = info.split(split)["shards"]
    if not shards or not all("index" in s for s in shards):
        return np.zeros(0, np.int64)
    open_file = lambda path: tf.io.gfile.GFile(tf_readable(path), "rb")  # noqa: E731
    return RecordTable(root, shards, open_file).sizes - FRAME_OVERHEAD


def _start_times(root: str, info: DatasetInfo, split: str, max_examples: int) -> np.ndarray:
    """The start times of up to `max_examples` examples."""
    if "start_time" not in info.spec.names or not info.num_examples(split):
        return np.zeros(0)
    batches = reader.load(root, split, batch_size=_BATCH, features="start_time")
    starts = [batch.numpy() for batch in batches.take(-(-max_examples // _BATCH))]
    return np.concatenate(starts)[:max_examples]


def _durations(split: dict) -> tuple:
    """(bin middles, examples per bin) of the split's duration histogram."""
    bins = split.get("durations", {}).get("histogram", [])
    return (np.array([(b["from_s"] + b["to_s"]) / 2 for b in bins]),
            np.array([b["examples"] for b in bins]))


def _text(value) -> str:
    value = value.numpy() if hasattr(value, "numpy") else value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value.item() if hasattr(value, "item") else value)


def _caption(example: dict, label: str | None, key: str | None,
             names: list | None = None) -> str:
    parts = []
    if label:
        parts.append(f"label {_class_name(_text(example[label]), names)}")
    if key:
        parts.append(_text(example[key])[-18:])
    if "start_time" in example:
        parts.append(f"t {float(example['start_time']):.2f}-{float(example['end_time']):.2f} s")
    return "\n".join(parts)


def _source(example: dict, key: str | None) -> str:
    """The example's source key, and its times in it when it has them."""
    if not key:
        return ""
    times = (f" {float(example['start_time']):.3f}-{float(example['end_time']):.3f} s"
             if "start_time" in example else "")
    return _text(example[key]) + times


def _whole_audio(data: bytes, name: str) -> tuple[np.ndarray, bool]:
    """A stored recording's first _WHOLE_AUDIO_S seconds, mono at 16 kHz, and
    whether it is longer."""
    blocks, length, longer = [], 0, False
    for block in stream_audio(data, _WHOLE_AUDIO, name=name):
        blocks.append(block.samples)
        length += len(block.samples)
        if length >= _WHOLE_AUDIO_S * _WHOLE_AUDIO.sample_rate:
            longer = True
            break
    samples = np.concatenate(blocks) if blocks else np.zeros(0, np.float32)
    return samples[:int(_WHOLE_AUDIO_S * _WHOLE_AUDIO.sample_rate)], longer


def _picked(root: str, info: DatasetInfo, split: str, count: int, seed: int) -> list:
    """`count` examples of the split, chosen at random with `seed`."""
    if not count or not info.num_examples(split):
        return []
    indexed = info.shard_format.seekable
    ds = reader.load(root, split, batch_size=None, global_shuffle=indexed, shuffle=not indexed,
                     seed=seed)
    return list(ds.take(count))


def _clip(example: dict, audio, whole, shown: AudioClip) -> AudioClip | None:
    """`shown` with the example's audio: its `audio` window, or its `whole`
    recording decoded; None without either (or a recording that does not
    decode: written as bytes, checked by no one, not the report's to fail on)."""
    if audio is not None:
        samples = example[audio.name].numpy()
        if samples.dtype == np.int16:
            samples = samples.astype(np.float32) / 32768
        return shown._replace(samples=samples, sample_rate=audio.sample_rate)
    if whole is None:
        return None
    try:
        samples, longer = _whole_audio(example[whole.name].numpy(), whole.source)
    except MediaError:
        return None
    caption = shown.caption + (f"\nfirst {_WHOLE_AUDIO_S:.0f} s" if longer else "")
    return shown._replace(samples=samples, sample_rate=_WHOLE_AUDIO.sample_rate,
                          caption=caption, whole=True)


def gather(root: str, *, max_examples: int = 5000, frames: int = 24, audio_windows: int = 4,
           seed: int = 0) -> DatasetView:
    """The DatasetView of the dataset at `root` (module docstring)."""
    root = root.rstrip("/")
    info = reader.load_info(root)
    image, audio, whole = _media_features(info)
    label, key = _label_name(info), _key_name(info.spec, (image, audio, whole))
    splits, thumbnails, clips = [], [], []
    # Examples from every split that has some, a split short of its share
    # leaving the rest to those after it.
    left = sum(1 for split in info.splits.values() if split["num_examples"])
    wanted_total = frames if image else (audio_windows if audio or whole else 0)
    names = info.class_names.get(label) if label else None
    for name, split in info.splits.items():
        starts = _start_times(root, info, name, max_examples)
        splits.append(SplitView(name, split["num_examples"], split.get("num_bytes", 0),
                                dict(split.get("durations", {})),
                                _named(split.get("label_counts", {}), names),
                                _sizes(root, info, name), *_durations(split), starts, len(starts)))
        wanted = 0
        if split["num_examples"]:
            picked = len(thumbnails) if image else len(clips)
            wanted = min(split["num_examples"], -(-(wanted_total - picked) // left))
            left -= 1
        for example in _picked(root, info, name, wanted, seed):
            caption, source = _caption(example, label, key, names), _source(example, key)
            if image:
                pixels = example[image.name].numpy()
                thumbnails.append(Thumbnail(name, pixels[0] if pixels.ndim == 4 else pixels,
                                            caption, source))
            if len(clips) < audio_windows:
                clip = _clip(example, audio, whole, AudioClip(name, None, 0, caption, source))
                clips += [clip] if clip is not None else []
    return DatasetView(root, info, tuple(splits), tuple(thumbnails[:frames]), tuple(clips),
                       _dead_letters(root, info), info.document["accounting"].get(
                           "samples_filtered_per_reason", {}),
                       _family(root, info, audio, max_examples))


def _family(root: str, info: DatasetInfo, audio, max_examples: int) -> tuple:
    """AudioClips of the first sample with augmented copies among the first
    `max_examples` examples of the first split that has copies: the first
    example (earliest start) of its original and of each copy, captioned
    with what was done to it."""
    augmented = info.accounting.get("augmentation", {}).get("examples", {})
    split = next((name for name in info.splits if augmented.get(name, {}).get("augmented")),
                 None)
    if audio is None or split is None:
        return ()
    marks = reader.load(root, split, batch_size=None, features=["source_key", "aug.copy"])
    key = next((mark["source_key"].numpy() for mark in marks.take(max_examples)
                if int(mark["aug.copy"])), None)
    if key is None:
        return ()
    first: dict = {}   # copy -> its earliest example
    for example in reader.load(root, split, batch_size=None).take(max_examples):
        if example["source_key"].numpy() != key:
            continue
        copy, start = int(example["aug.copy"]), float(example.get("start_time", 0.0))
        if copy not in first or start < float(first[copy].get("start_time", 0.0)):
            first[copy] = example
    return tuple(_clip(first[copy], audio, None, AudioClip(
        split, None, 0, _augmentation_caption(first[copy]), _source(first[copy], "source_key")))
        for copy in sorted(first))


def _augmentation_caption(example: dict) -> str:
    """What was done to the example: 'copy 1: speed+noise, x0.9, +2.1 dB, noise hum at 7.3 dB'."""
    copy = int(example["aug.copy"])
    if not copy:
        return "original"
    parts = [f"copy {copy}: {_text(example['aug.kind'])}"]
    if float(example["aug.speed"]) != 1.0:
        parts.append(f"x{float(example['aug.speed']):g}")
    if float(example["aug.gain_db"]):
        parts.append(f"{float(example['aug.gain_db']):+.1f} dB")
    if "aug.rir_key" in example and _text(example["aug.rir_key"]):
        parts.append(f"RIR {_text(example['aug.rir_key'])}")
    if "aug.noise_key" in example and _text(example["aug.noise_key"]):
        parts.append(f"noise {_text(example['aug.noise_key'])} at "
                     f"{float(example['aug.snr_db']):.1f} dB SNR")
    if bool(example["aug.peak_normalized"]):
        parts.append("peak-normalised")
    return ", ".join(parts)


def _dead_letters(root: str, info: DatasetInfo) -> dict:
    if not info.document["failures"]["count"]:
        return {}
    with tf.io.gfile.GFile(tf_readable(f"{root}/{manifest.FAILURES_FILE}")) as f:
        stages = collections.Counter(json.loads(line)["stage"] for line in f if line.strip())
    return dict(stages.most_common())

"""What a dataset report shows, read from the manifest and a sample of examples.

Beam-free (TensorFlow, through the reader). Per split: the manifest's example
and label counts; each example's size from the record indexes (all of them,
without reading a record; a gzip dataset has none); every example's
duration, as the manifest's histogram counts it; and, from up to
`max_examples` examples read, their start times. A few examples picked at
random (through the indexes when there are some) give the frames of the
contact sheet and the audio windows; the dead letters are counted by stage.
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
from transforms.format.spec import FeatureSpec
from transforms.format.tf_paths import tf_readable

__all__ = ["AudioClip", "DatasetView", "SplitView", "Thumbnail", "gather"]

# Examples read per batch for the histograms.
_BATCH = 256


class SplitView(NamedTuple):
    name: str
    num_examples: int
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


class AudioClip(NamedTuple):
    split: str
    samples: np.ndarray  # float32 in [-1, 1] for int16 audio
    sample_rate: int
    caption: str


class DatasetView(NamedTuple):
    root: str
    info: DatasetInfo
    splits: tuple        # SplitViews, in the manifest's order
    thumbnails: tuple
    audio: tuple
    dead_letters: dict   # stage -> count
    filtered: dict       # reason -> samples


def _media_features(spec: FeatureSpec) -> tuple:
    """(image feature, audio feature), either None."""
    image = next((f for f in spec if f.dtype == "jpeg" or (
        f.dtype == "uint8" and len(f.shape) in (3, 4) and f.shape[-1] in (1, 3))), None)
    audio = next((f for f in spec if f.sample_rate), None)
    return image, audio


def _label_name(info: DatasetInfo) -> str | None:
    options = info.document.get("options", {})
    source = options.get("label_field") or options.get("stratify_by")
    return next((f.name for f in info.spec if f.source == source and source),
                "label" if "label" in info.spec.names else None)


def _key_name(spec: FeatureSpec) -> str | None:
    if "source_key" in spec.names:
        return "source_key"
    return next((f.name for f in spec if f.kind == "bytes" and not f.shape
                 and f.dtype in ("bytes", "string")), None)


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


def _caption(example: dict, label: str | None, key: str | None) -> str:
    parts = []
    if label:
        parts.append(f"label {_text(example[label])}")
    if key:
        parts.append(_text(example[key])[-18:])
    if "start_time" in example:
        parts.append(f"t {float(example['start_time']):.2f}-{float(example['end_time']):.2f} s")
    return "\n".join(parts)


def _picked(root: str, info: DatasetInfo, split: str, count: int, seed: int) -> list:
    """`count` examples of the split, chosen at random with `seed`."""
    if not count or not info.num_examples(split):
        return []
    indexed = info.compression == "none"
    ds = reader.load(root, split, batch_size=None, global_shuffle=indexed, shuffle=not indexed,
                     seed=seed)
    return list(ds.take(count))


def gather(root: str, *, max_examples: int = 5000, frames: int = 24, audio_windows: int = 4,
           seed: int = 0) -> DatasetView:
    """The DatasetView of the dataset at `root` (module docstring)."""
    root = root.rstrip("/")
    info = reader.load_info(root)
    image, audio = _media_features(info.spec)
    label, key = _label_name(info), _key_name(info.spec)
    splits, thumbnails, clips = [], [], []
    filled = sum(1 for split in info.splits.values() if split["num_examples"])
    per_split = -(-frames // max(1, filled))  # frames from every split that has examples
    for name, split in info.splits.items():
        starts = _start_times(root, info, name, max_examples)
        splits.append(SplitView(name, split["num_examples"], dict(split.get("label_counts", {})),
                                _sizes(root, info, name), *_durations(split), starts, len(starts)))
        wanted = per_split if image else (audio_windows if audio else 0)
        for example in _picked(root, info, name, wanted, seed):
            caption = _caption(example, label, key)
            if image:
                pixels = example[image.name].numpy()
                thumbnails.append(Thumbnail(name, pixels[0] if pixels.ndim == 4 else pixels,
                                            caption))
            if audio and len(clips) < audio_windows:
                samples = example[audio.name].numpy()
                if samples.dtype == np.int16:
                    samples = samples.astype(np.float32) / 32768
                clips.append(AudioClip(name, samples, audio.sample_rate, caption))
    return DatasetView(root, info, tuple(splits), tuple(thumbnails[:frames]), tuple(clips),
                       _dead_letters(root, info), info.document["accounting"].get(
                           "samples_filtered_per_reason", {}))


def _dead_letters(root: str, info: DatasetInfo) -> dict:
    if not info.document["failures"]["count"]:
        return {}
    with tf.io.gfile.GFile(tf_readable(f"{root}/{manifest.FAILURES_FILE}")) as f:
        stages = collections.Counter(json.loads(line)["stage"] for line in f if line.strip())
    return dict(stages.most_common())

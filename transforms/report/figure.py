"""A DatasetView drawn as one PNG (matplotlib, headless).

From the top: what the dataset is and its accounting; examples per split
(an empty split in red) and dead letters by stage; label balance, each
split's share of every label; histograms per split of example durations,
start times (a negative start is an audio window padded before the media
began) and example sizes; a contact sheet of frames with their labels, keys
and times; and audio windows as waveforms over their log-mel spectrograms.
Rows without data (no frames, no audio, no labels) are left out.
"""

from __future__ import annotations

import io
import json

import matplotlib
import numpy as np
from matplotlib.ticker import MaxNLocator

from transforms.report.gather import DatasetView

__all__ = ["draw", "letterboxed", "log_mel"]

_COLUMNS = 8          # contact sheet
_SPLIT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")
_MEL_BINS = 64
_MAX_LABELS = 64      # label balance shows the most frequent


def log_mel(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """[frames, 64] log-mel energies: 25 ms windows every 10 ms (tf.signal)."""
    import tensorflow as tf

    frame, step = int(0.025 * sample_rate), int(0.010 * sample_rate)
    fft = 1 << (frame - 1).bit_length()
    spectrum = tf.abs(tf.signal.stft(tf.constant(samples, tf.float32), frame, step, fft))
    mel = tf.signal.linear_to_mel_weight_matrix(_MEL_BINS, fft // 2 + 1, sample_rate,
                                                20.0, sample_rate / 2)
    return tf.math.log(tf.tensordot(spectrum ** 2, mel, 1) + 1e-6).numpy()


def _colour(i: int) -> str:
    return _SPLIT_COLOURS[i % len(_SPLIT_COLOURS)]


def _summary(ax, view: DatasetView) -> None:
    doc = view.info.document
    lines = [view.root, f"created {doc['created']}, beam-datagen {doc['package_version']}",
             f"source {json.dumps(doc['source'], sort_keys=True)[:90]}",
             f"compression {view.info.compression}; features:"]
    lines += [f"  {f.name} {f.dtype}{list(f.shape) if f.shape else ''}"
              + (f" @ {f.sample_rate} Hz" if f.sample_rate else "") for f in view.info.spec][:9]
    acc = doc["accounting"]
    lines.append(f"samples read {acc['samples_read']}, written {acc['samples_written']}, "
                 f"filtered {acc['samples_filtered']}, failed {acc['samples_failed']} "
                 f"(+{acc['files_failed']} files)")
    duplicates = doc.get("duplicates")
    if duplicates and duplicates["groups"]:
        across = sum(duplicates["across_splits"].values())
        lines.append(f"duplicates: {duplicates['groups']} groups, {across} across splits")
    segments = acc.get("segments")
    if segments:
        lines.append(f"segments read {segments['read']}, written {segments['written']}, "
                     f"filtered {segments['filtered']}, failed {segments['failed']}")
    lines += [f"warning: {w}" for w in doc.get("warnings", [])][:2]
    ax.axis("off")
    ax.text(0, 1, "\n".join(lines), va="top", family="monospace", fontsize=8)


def _counts(ax, view: DatasetView) -> None:
    names = [s.name for s in view.splits]
    counts = [s.num_examples for s in view.splits]
    bars = ax.bar(names, counts, color=[_colour(i) for i in range(len(names))])
    for bar, n in zip(bars, counts):
        ax.annotate(f"{n}" if n else "EMPTY", (bar.get_x() + bar.get_width() / 2, n),
                    ha="center", va="bottom", fontsize=9, color="black" if n else "red",
                    fontweight="normal" if n else "bold")
    ax.set_title("examples per split")
    ax.margins(y=0.15)


def _failures(ax, view: DatasetView) -> None:
    items = [(f"dead: {k}", v) for k, v in view.dead_letters.items()]
    items += [(f"filtered: {k}", v) for k, v in view.filtered.items()]
    ax.set_title("dead letters by stage, filtered by reason")
    if not items:
        ax.text(0.5, 0.5, "none", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    labels, values = zip(*items)
    ax.barh(labels, values, color=["#d62728" if lab.startswith("dead") else "#7f7f7f"
                                   for lab in labels])
    ax.tick_params(axis="y", labelsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.invert_yaxis()


def _labels(ax, view: DatasetView) -> None:
    totals: dict = {}
    for split in view.splits:
        for label, n in split.label_counts.items():
            totals[label] = totals.get(label, 0) + n
    shown = sorted(sorted(totals, key=lambda k: -totals[k])[:_MAX_LABELS],
                   key=lambda k: (len(k), k))  # 2 before 10
    width = 0.8 / len(view.splits)
    x = np.arange(len(shown))
    for i, split in enumerate(view.splits):
        share = [split.label_counts.get(k, 0) / max(1, split.num_examples) for k in shown]
        ax.bar(x + i * width, share, width, label=split.name, color=_colour(i))
    ax.set_xticks(x + 0.4 - width / 2, shown, fontsize=7, rotation=90 if len(shown) > 20 else 0)
    more = f" (the {len(shown)} most frequent of {len(totals)})" if len(totals) > len(shown) else ""
    ax.set_title(f"label balance: each split's share of every label{more}")
    ax.legend(fontsize=8)


def _negative_starts(view: DatasetView) -> str:
    """' - N% start before 0 s' when some do (audio windows padded with silence)."""
    starts = np.concatenate([s.start_times for s in view.splits] + [np.zeros(0)])
    negative = float(np.mean(starts < 0)) if len(starts) else 0.0
    return f" - {negative:.0%} start before 0 (padded)" if negative else ""


def letterboxed(image: np.ndarray) -> bool:
    """Whether a frame has black bars: its first and last rows, or columns, are black."""
    dark = image.max(axis=-1) < 16 if image.ndim == 3 else image < 16
    return bool((dark[0].all() and dark[-1].all()) or (dark[:, 0].all() and dark[:, -1].all()))


def _histogram(ax, view: DatasetView, field: str, title: str, scale: float = 1.0,
               warning: str = "", weights: str | None = None) -> None:
    """Each split's `field` values, counted `weights` times each when given."""
    drawn = False
    for i, split in enumerate(view.splits):
        values = getattr(split, field)
        counts = getattr(split, weights) if weights else np.ones(len(values))
        if len(values):
            ax.hist(np.asarray(values, np.float64) * scale, bins=30, weights=counts, alpha=0.6,
                    color=_colour(i), label=f"{split.name} ({int(counts.sum())})")
            drawn = True
    ax.set_title(title + warning, fontsize=10, color="red" if warning else "black")
    if drawn:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)


def _contact_sheet(figure, grid, view: DatasetView) -> None:
    for i, thumb in enumerate(view.thumbnails):
        ax = figure.add_subplot(grid[i // _COLUMNS, i % _COLUMNS])
        image = thumb.image[..., 0] if thumb.image.shape[-1] == 1 else thumb.image
        ax.imshow(image, cmap="gray" if image.ndim == 2 else None)
        ax.set_xticks([])
        ax.set_yticks([])
        for side in ax.spines.values():
            side.set_color(_colour([s.name for s in view.splits].index(thumb.split)))
            side.set_linewidth(3)
        ax.set_title(f"{thumb.split}: {thumb.caption}", fontsize=6)


def _audio(figure, grid, view: DatasetView) -> None:
    for i, clip in enumerate(view.audio):
        wave = figure.add_subplot(grid[0, i])
        wave.plot(np.arange(len(clip.samples)) / clip.sample_rate, clip.samples, lw=0.5)
        if np.abs(clip.samples).max() <= 1:
            wave.set_ylim(-1.05, 1.05)
        wave.set_title(f"{clip.split}: {clip.caption}".replace("\n", ", "), fontsize=6)
        wave.tick_params(labelsize=6)
        mel = figure.add_subplot(grid[1, i])
        mel.imshow(log_mel(clip.samples, clip.sample_rate).T, origin="lower", aspect="auto",
                   extent=(0, len(clip.samples) / clip.sample_rate, 0, _MEL_BINS))
        mel.set_xlabel("s", fontsize=6)
        mel.set_ylabel("log-mel bin", fontsize=6)
        mel.tick_params(labelsize=6)


def draw(view: DatasetView, dpi: int = 100) -> bytes:
    """The report as PNG bytes."""
    matplotlib.use("Agg")  # no display: drawn into a PNG
    from matplotlib import pyplot

    has_labels = any(s.label_counts for s in view.splits)
    sheet_rows = -(-len(view.thumbnails) // _COLUMNS)
    rows = [("summary", 2.6), *([("labels", 2.6)] if has_labels else []), ("histograms", 2.6),
            *([("frames", 1.9 * sheet_rows)] if sheet_rows else []),
            *([("audio", 3.6)] if view.audio else [])]
    figure = pyplot.figure(figsize=(16, sum(h for _, h in rows) + 0.6), dpi=dpi,
                           layout="constrained")
    figure.suptitle(f"beam-datagen dataset {view.root}", fontsize=13)
    parts = figure.subfigures(len(rows), 1, height_ratios=[h for _, h in rows])
    for (row, _), part in zip(rows, np.atleast_1d(parts)):
        if row == "summary":
            axes = part.subplots(1, 3, width_ratios=[2.2, 1, 1.4])
            _summary(axes[0], view)
            _counts(axes[1], view)
            _failures(axes[2], view)
        elif row == "labels":
            _labels(part.subplots(), view)
        elif row == "histograms":
            axes = part.subplots(1, 3)
            _histogram(axes[0], view, "durations", "example duration, s (every example)",
                       weights="duration_counts")
            _histogram(axes[1], view, "start_times", "start time in its source, s",
                       warning=_negative_starts(view))
            _histogram(axes[2], view, "sizes", "example size, KB (every example)", 1 / 1000)
        elif row == "frames":
            boxed = sum(letterboxed(t.image) for t in view.thumbnails)
            part.suptitle("contact sheet: split, label, key, time" + (
                f" - {boxed} of {len(view.thumbnails)} letterboxed (black bars)" if boxed else ""),
                fontsize=10, color="red" if boxed else "black")
            _contact_sheet(part, part.add_gridspec(sheet_rows, _COLUMNS), view)
        else:
            part.suptitle("audio windows: waveform over log-mel spectrogram", fontsize=10)
            _audio(part, part.add_gridspec(2, len(view.audio)), view)
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=dpi)
    pyplot.close(figure)
    return out.getvalue()

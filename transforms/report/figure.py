"""A DatasetView drawn as one PNG (matplotlib, headless).

From the top: what the dataset is, its accounting, and per split its
examples, hours of audio, bytes and bucket boundaries; examples per split
(an empty split in red) and dead letters by stage; label balance, each
split's share of every label; histograms per split of example durations
(the bucket boundaries marked), start times (a negative start is an audio
window padded before the media began) and example sizes; a contact sheet of
frames with their labels, keys and times; the quality measures'
distributions (every example measured, and those --keep kept, its
thresholds drawn on them); audio, windows or whole
recordings, as waveforms over their log-mel spectrograms; and in an
augmented dataset, one sample's original beside its copies, drawn the same
way. A panel is drawn only when it has data (`panels` says which).
"""

from __future__ import annotations

import io
import json

import matplotlib
import numpy as np
from matplotlib.ticker import MaxNLocator

from transforms.format.durations import describe_durations
from transforms.report.gather import AudioClip, DatasetView

__all__ = ["clip_png", "draw", "letterboxed", "log_mel", "panels"]

_COLUMNS = 8          # contact sheet
_SPLIT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")
_MEL_BINS = 64
_MAX_LABELS = 64      # label balance shows the most frequent
_SUMMARY_WIDTH = 110  # characters
# A long recording is drawn from this many points, and this many spectrogram frames.
_WAVE_POINTS, _MEL_FRAMES = 4000, 1500


def log_mel(samples: np.ndarray, sample_rate: int, step_s: float = 0.010) -> np.ndarray:
    """[frames, 64] log-mel energies: 25 ms windows every `step_s` (tf.signal)."""
    import tensorflow as tf

    frame, step = int(0.025 * sample_rate), max(1, int(step_s * sample_rate))
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
             f"{view.info.shard_format}; features:"]
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
    lines += _split_lines(view)
    lines += [f"warning: {w}" for w in doc.get("warnings", [])][:2]
    ax.axis("off")
    # Long lines (warnings) are cut: the text must leave the other panels their width.
    lines = [line if len(line) <= _SUMMARY_WIDTH else line[:_SUMMARY_WIDTH - 1] + "…"
             for line in lines]
    ax.text(0, 1, "\n".join(lines), va="top", family="monospace", fontsize=8)


def _split_lines(view: DatasetView) -> list:
    """A line per split: examples, MB, the duration of its media and its
    bucket boundaries."""
    lines = []
    for split in view.splits:
        durations = describe_durations(split.durations_entry)
        lines.append(f"{split.name}: {split.num_examples} examples, "
                     f"{split.num_bytes / 1e6:.1f} MB" + (f", {durations}" if durations else ""))
    return lines


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
    for i, split in enumerate(view.splits):
        values = getattr(split, field)
        counts = getattr(split, weights) if weights else np.ones(len(values))
        if len(values):
            ax.hist(np.asarray(values, np.float64) * scale, bins=30, weights=counts, alpha=0.6,
                    color=_colour(i), label=f"{split.name} ({int(counts.sum())})")
    ax.set_title(title + warning, fontsize=10, color="red" if warning else "black")
    ax.legend(fontsize=7)


def _boundaries(split) -> list:
    return split.durations_entry.get("bucket_boundaries_s", [])


def _durations(ax, view: DatasetView) -> None:
    """The duration histogram, each split's bucket boundaries dashed in its colour."""
    marked = any(_boundaries(split) for split in view.splits)
    _histogram(ax, view, "durations", "example duration, s (every example)"
               + ("; dashed: bucket boundaries" if marked else ""), weights="duration_counts")
    for i, split in enumerate(view.splits):
        for boundary in _boundaries(split):
            ax.axvline(boundary, color=_colour(i), linestyle="--", linewidth=1)


_HISTOGRAMS = {"durations": "durations", "start_times": "start_times", "sizes": "sizes"}


def panels(view: DatasetView) -> list:
    """(row, [panel, ...]) of what `draw` draws, from the top: only the panels
    that have data."""
    has = {field: any(len(getattr(s, field)) for s in view.splits) for field in _HISTOGRAMS}
    histograms = [name for name, field in _HISTOGRAMS.items() if has[field]]
    cut = view.info.recipe["cut"].get("mode")
    audio = ("recordings" if any(clip.whole for clip in view.audio)
             else {"segments": "segments", "speech": "speech pieces",
                   "utterances": "utterances"}.get(cut, "audio windows"))
    return [("summary", ["summary", "counts", "failures"]),
            *([("labels", ["labels"])] if any(s.label_counts for s in view.splits) else []),
            *([("histograms", histograms)] if histograms else []),
            *([("frames", ["contact sheet"])] if view.thumbnails else []),
            *([("quality", list(_quality(view)))] if _quality(view) else []),
            *([("audio", [audio])] if view.audio else []),
            *([("augmentation", ["original and copies"])] if view.family else [])]


def _quality(view: DatasetView) -> dict:
    """The manifest's quality distributions, by measure ({} without --quality)."""
    return (view.info.document.get("quality") or {}).get("measures", {})


def _thresholds(view: DatasetView, name: str) -> list:
    """(value, clause) of each --keep clause on measure `name`."""
    clauses = (view.info.document.get("quality") or {}).get("keep", [])
    return [(float(clause.split()[-1]), clause) for clause in clauses
            if clause.split()[0] == name]


def _quality_panel(ax, view: DatasetView, name: str, entry: dict) -> None:
    """A measure's bins per split: every example measured (light) and those
    kept (dark), each --keep threshold on it a red line."""
    low, high, width = entry["bins"]
    edges = np.arange(round((high - low) / width) + 1) * width + low
    names = [split.name for split in view.splits]
    measured = kept = 0
    for split, found in entry["splits"].items():
        colour = _colour(names.index(split)) if split in names else "grey"
        ax.stairs(found["all"], edges, color=colour, alpha=0.3, fill=True)
        ax.stairs(found["kept"], edges, color=colour, label=f"{split} kept")
        measured, kept = measured + sum(found["all"]), kept + sum(found["kept"])
    for value, clause in _thresholds(view, name):
        ax.axvline(value, color="red", linewidth=1.2, label=clause)
    ax.set_title(f"{name}: {kept} of {measured} kept", fontsize=10)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6)


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


def _waveform(ax, samples: np.ndarray, rate: int) -> None:
    """The samples, or for a long recording its envelope: min and max of each
    of _WAVE_POINTS stretches."""
    if len(samples) <= 2 * _WAVE_POINTS:
        ax.plot(np.arange(len(samples)) / rate, samples, lw=0.5)
        return
    stretch = len(samples) // _WAVE_POINTS
    rows = samples[:stretch * _WAVE_POINTS].reshape(_WAVE_POINTS, stretch)
    times = (np.arange(_WAVE_POINTS) + 0.5) * stretch / rate
    ax.fill_between(times, rows.min(axis=1), rows.max(axis=1), lw=0)


def _audio(figure, grid, clips: tuple) -> None:
    for i, clip in enumerate(clips):
        _clip(figure, grid[0, i], grid[1, i], clip)


def _clip(figure, top, bottom, clip: AudioClip) -> None:
    """A clip's waveform in `top` over its log-mel spectrogram in `bottom`."""
    seconds = len(clip.samples) / clip.sample_rate
    wave = figure.add_subplot(top)
    _waveform(wave, clip.samples, clip.sample_rate)
    if len(clip.samples) and np.abs(clip.samples).max() <= 1:
        wave.set_ylim(-1.05, 1.05)
    wave.set_title(f"{clip.split}: {clip.caption}".replace("\n", ", "), fontsize=6)
    wave.tick_params(labelsize=6)
    mel = figure.add_subplot(bottom)
    step = max(0.010, seconds / _MEL_FRAMES)  # a long recording in fewer frames
    mel.imshow(log_mel(clip.samples, clip.sample_rate, step).T, origin="lower",
               aspect="auto", extent=(0, seconds, 0, _MEL_BINS))
    mel.set_xlabel("s", fontsize=6)
    mel.set_ylabel("log-mel bin", fontsize=6)
    mel.tick_params(labelsize=6)


def _png(figure, dpi: int) -> bytes:
    from matplotlib import pyplot

    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=dpi)
    pyplot.close(figure)
    return out.getvalue()


def clip_png(clip: AudioClip, dpi: int = 100) -> bytes:
    """One clip's waveform over its spectrogram, as a small PNG (the HTML
    report shows each beside its key)."""
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure = pyplot.figure(figsize=(3.2, 2.4), dpi=dpi, layout="constrained")
    grid = figure.add_gridspec(2, 1)
    _clip(figure, grid[0, 0], grid[1, 0], clip)
    return _png(figure, dpi)


def draw(view: DatasetView, dpi: int = 100) -> bytes:
    """The report as PNG bytes."""
    matplotlib.use("Agg")  # no display: drawn into a PNG
    from matplotlib import pyplot

    layout = panels(view)
    sheet_rows = -(-len(view.thumbnails) // _COLUMNS)
    heights = {"summary": 2.6 + 0.12 * len(view.splits), "labels": 2.6, "histograms": 2.6,
               "frames": 1.9 * sheet_rows, "quality": 2.6, "audio": 3.6, "augmentation": 3.6}
    rows = [(row, names, heights[row]) for row, names in layout]
    figure = pyplot.figure(figsize=(16, sum(h for _, _, h in rows) + 0.6), dpi=dpi,
                           layout="constrained")
    figure.suptitle(f"beam-datagen dataset {view.root}", fontsize=13)
    parts = figure.subfigures(len(rows), 1, height_ratios=[h for _, _, h in rows])
    for (row, names, _), part in zip(rows, np.atleast_1d(parts)):
        if row == "summary":
            axes = part.subplots(1, 3, width_ratios=[2.2, 1, 1.4])
            _summary(axes[0], view)
            _counts(axes[1], view)
            _failures(axes[2], view)
        elif row == "labels":
            _labels(part.subplots(), view)
        elif row == "histograms":
            axes = np.atleast_1d(part.subplots(1, len(names)))
            for ax, name in zip(axes, names):
                if name == "durations":
                    _durations(ax, view)
                elif name == "start_times":
                    _histogram(ax, view, "start_times", "start time in its source, s",
                               warning=_negative_starts(view))
                else:
                    _histogram(ax, view, "sizes", "example size, KB (every example)", 1 / 1000)
        elif row == "quality":
            part.suptitle("quality of every example measured (light) and kept (dark); red: "
                          "--keep's thresholds", fontsize=10)
            measures = _quality(view)
            for ax, name in zip(np.atleast_1d(part.subplots(1, len(names))), names):
                _quality_panel(ax, view, name, measures[name])
        elif row == "frames":
            boxed = sum(letterboxed(t.image) for t in view.thumbnails)
            part.suptitle("contact sheet: split, label, key, time" + (
                f" - {boxed} of {len(view.thumbnails)} letterboxed (black bars)" if boxed else ""),
                fontsize=10, color="red" if boxed else "black")
            _contact_sheet(part, part.add_gridspec(sheet_rows, _COLUMNS), view)
        else:
            clips = view.audio if row == "audio" else view.family
            title = (f"{names[0]}: waveform over log-mel spectrogram" if row == "audio" else
                     f"one sample ({view.family[0].source.split(' ')[0]}), its original beside "
                     "its copies: waveform over log-mel spectrogram")
            part.suptitle(title, fontsize=10)
            _audio(part, part.add_gridspec(2, len(clips)), clips)
    return _png(figure, dpi)

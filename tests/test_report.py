"""`python -m pipelines.inspect OUT --report`: a picture of a dataset.

Two datasets from tar_to_tfrecord on an audio-visual corpus
(pipelines.sample_corpus --kind av: 16:9 H.264 clips with FLAC or AAC voices,
one sample broken): single frames padded into a square (so letterboxed) with
their audio windows, in three splits of which one gets no speaker; and int16
audio windows only. A third of whole recordings (no cut) of several
lengths, made by sox and packed by GNU tar. What the report gathers is
checked against the dataset read back; which panels are drawn for each
kind; the pictures are opened and looked at as far as a test can.
"""

import base64
import io
import re
import subprocess

import numpy as np
import pytest
from PIL import Image

from pipelines import inspect, tar_to_tfrecord
from transforms.format import reader
from transforms.report.figure import letterboxed, log_mel, panels
from transforms.report.gather import gather
from transforms.testing.corpus import write_corpus, write_meetings

COMMON = ["--video_field", "mp4", "--audio_fields", "flac", "--decode_threads", "1",
          "--features", "label=cls:int64,speaker=json.speaker:string", "--label_field", "cls",
          "--split_by", "json.speaker", "--max_failure_fraction", "0.5"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("av")
    write_corpus(str(root), shards=2, samples_per_shard=3, speakers=3, kind="av", seconds=1.5,
                 bad_samples=1)
    return root


@pytest.fixture(scope="module")
def frames(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("frames")
    info = tar_to_tfrecord.run([
        "--input", f"{corpus}/*.tar", "--output", str(output), *COMMON, "--cut", "frames",
        "--fps", "4", "--frame_size", "48x48", "--av_window_s", "0.5",
        "--splits", "train=0.98,eval=0.01,test=0.01", "--allow_empty_splits"])
    return str(output), info


@pytest.fixture(scope="module")
def audio(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("audio")
    info = tar_to_tfrecord.run([
        "--input", f"{corpus}/*.tar", "--output", str(output), *COMMON,
        "--cut", "audio_windows", "--window_s", "0.25", "--audio_dtype", "int16",
        "--split_by", "__key__", "--splits", "train=0.5,test=0.5", "--compression", "gzip"])
    return str(output), info


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """Eight FLAC recordings of 1 to 8 s (sox), a label each (echo), in one tar
    (GNU tar), written whole: a bytes feature of the FLAC and its duration."""
    root = tmp_path_factory.mktemp("whole")
    names = []
    for i in range(1, 9):
        subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", f"r{i}.flac", "synth", str(i),
                        "sine", str(200 + 40 * i), "vol", "0.5"], cwd=root, check=True)
        subprocess.run(["sh", "-c", f"echo {i % 3} > r{i}.cls"], cwd=root, check=True)
        names += [f"r{i}.flac", f"r{i}.cls"]
    subprocess.run(["tar", "-cf", "whole.tar", *names], cwd=root, check=True)
    output = root / "dataset"
    tar_to_tfrecord.run([
        "--input", f"{root}/whole.tar", "--output", str(output), "--audio_fields", "flac",
        "--features", "audio=flac:bytes,label=cls:int64,key=__key__:string",
        "--label_field", "cls", "--split_by", "__key__", "--splits", "train=0.5,test=0.5",
        "--allow_empty_splits"])
    return str(output)


@pytest.fixture(scope="module")
def clips(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("clips")
    tar_to_tfrecord.run([
        "--input", f"{corpus}/*.tar", "--output", str(output), *COMMON, "--cut", "clips",
        "--fps", "4", "--clip_frames", "2", "--frame_size", "48x48",
        "--splits", "train=0.5,test=0.5", "--allow_empty_splits"])
    return str(output)


@pytest.fixture(scope="module")
def segments(tmp_path_factory):
    """Two 10 s recordings of speaker turns (RTTM), an example per turn."""
    root = tmp_path_factory.mktemp("meetings")
    write_meetings(str(root), recordings=2, speakers=4, seconds=10.0)
    output = root / "dataset"
    tar_to_tfrecord.run([
        "--input", f"{root}/meetings.tar", "--output", str(output), "--cut", "segments",
        "--segments_field", "rttm", "--audio_fields", "flac", "--features", "none",
        "--split_by", "segment.speaker", "--splits", "train=0.5,test=0.5",
        "--allow_empty_splits"])
    return str(output)


def test_panels_for_each_cut_kind(frames, audio, whole, clips, segments):
    """Only panels with data: no start times without a cut, no sizes without
    record indexes (gzip), no contact sheet without frames, no label balance
    without labels."""
    assert panels(gather(frames[0], frames=4, audio_windows=2)) == [
        ("summary", ["summary", "counts", "failures"]), ("labels", ["labels"]),
        ("histograms", ["durations", "start_times", "sizes"]),
        ("frames", ["contact sheet"]), ("audio", ["audio windows"])]
    assert panels(gather(audio[0], audio_windows=2)) == [
        ("summary", ["summary", "counts", "failures"]), ("labels", ["labels"]),
        ("histograms", ["durations", "start_times"]), ("audio", ["audio windows"])]
    assert panels(gather(whole, audio_windows=3)) == [
        ("summary", ["summary", "counts", "failures"]), ("labels", ["labels"]),
        ("histograms", ["durations", "sizes"]), ("audio", ["recordings"])]
    assert panels(gather(clips, frames=4, audio_windows=2)) == [
        ("summary", ["summary", "counts", "failures"]), ("labels", ["labels"]),
        ("histograms", ["durations", "start_times", "sizes"]),
        ("frames", ["contact sheet"]), ("audio", ["audio windows"])]
    assert panels(gather(segments, audio_windows=2)) == [
        ("summary", ["summary", "counts", "failures"]),
        ("histograms", ["durations", "start_times", "sizes"]), ("audio", ["segments"])]


def test_whole_recordings_are_drawn_with_their_durations(whole, tmp_path):
    view = gather(whole, audio_windows=4)
    recordings = {clip.source: clip for clip in view.audio}
    assert len(recordings) == 4 and all(clip.whole for clip in view.audio)
    for key, clip in recordings.items():   # each recording decoded whole, at 16 kHz
        assert len(clip.samples) == 16000 * int(key[1:]) and clip.sample_rate == 16000
    info = reader.load_info(whole)
    boundaries = [b for split in info.splits.values()
                  for b in split["durations"]["bucket_boundaries_s"]]
    assert boundaries  # eight lengths: the manifest suggests buckets
    text = inspect.describe_dataset(whole, examples=0)
    for split in info.splits.values():
        durations = split["durations"]
        buckets = ", ".join(f"{b:g}" for b in durations["bucket_boundaries_s"])
        assert (f"durations: {durations['total_s'] / 60:.1f} min"
                + (f"; buckets at {buckets} s\n" if buckets else "\n")) in text
    path = tmp_path / "report.html"
    inspect.run([whole, "--examples", "0", "--report", str(path)])
    page = path.read_text()
    # Each recording in the picture again, under its key.
    captions = re.findall(r"<figure id='audio-\d'><img [^>]+><figcaption>(.*?)</figcaption>",
                          page)
    assert len(captions) == 4
    assert {re.search(r"<br>(r\d)", c).group(1) for c in captions} == set(recordings)


def test_what_the_report_gathers_is_the_dataset(frames):
    output, info = frames
    view = gather(output, frames=10, audio_windows=3)
    assert [s.name for s in view.splits] == ["train", "eval", "test"]
    empty = [s.name for s in view.splits if not s.num_examples]
    assert empty and all(info["splits"][n]["num_examples"] == 0 for n in empty)
    train = view.splits[0]
    examples = list(reader.load(output, "train", batch_size=None))
    assert train.examples_read == len(examples) == train.num_examples
    # Every example's duration, counted in the bin (5% wide) that holds it.
    lengths = [float(e["end_time"] - e["start_time"]) for e in examples]
    assert train.duration_counts.sum() == len(examples)
    for middle in train.durations:
        assert all(abs(d - middle) / d < 0.05 for d in lengths)
    assert train.start_times.min() < 0      # audio windows padded before the video starts
    assert sorted(train.sizes) == sorted(
        len(r.numpy()) for r in reader.tf.data.TFRecordDataset(
            [f"{output}/{s['file']}" for s in info["splits"]["train"]["shards"]]))
    assert train.label_counts == info["splits"]["train"]["label_counts"]
    assert len(view.thumbnails) == 10 and len(view.audio) == 3
    assert all(t.image.shape == (48, 48, 3) and letterboxed(t.image) for t in view.thumbnails)
    assert re.match(r"label \d+\n.+\nt -?\d\.\d\d--?\d\.\d\d s$", view.thumbnails[0].caption)
    assert view.dead_letters == {"decode_video": 1}


def test_the_png_report(frames, tmp_path):
    output, _ = frames
    path = tmp_path / "report.png"
    inspect.run([output, "--examples", "0", "--report", str(path)])
    image = np.asarray(Image.open(path).convert("RGB"))
    assert image.shape[1] == 1600 and 1400 < image.shape[0] < 2600
    assert image.std() > 30 and len(np.unique(image.reshape(-1, 3), axis=0)) > 500
    # The contact sheet shows the frames: the corpus's coloured backgrounds are there.
    colours = {tuple(c) for c in image.reshape(-1, 3)[::7]}
    assert len({c for c in colours if max(c) - min(c) > 120}) > 20


def test_the_html_report_holds_the_summary_and_the_picture(audio, tmp_path):
    output, _ = audio
    path = tmp_path / "report.html"
    inspect.run([output, "--examples", "0", "--report", str(path)])
    page = path.read_text()
    assert f"<pre>dataset {output}" in page and "compression gzip" in page
    png = base64.b64decode(re.search(r"base64,([A-Za-z0-9+/=]+)'", page).group(1))
    image = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    # No frames: no contact sheet, so a shorter picture than the frames one.
    assert image.shape[1] == 1600 and 900 < image.shape[0] < 1500 and image.std() > 20


def test_log_mel_finds_a_tone_in_its_band():
    rate = 16000
    t = np.arange(rate // 2) / rate
    low, high = (log_mel(np.sin(2 * np.pi * f * t).astype(np.float32), rate) for f in (300, 4000))
    assert low.shape == (48, 64)
    assert np.argmax(low.mean(axis=0)) < np.argmax(high.mean(axis=0))


def test_a_report_that_is_neither_png_nor_html(frames):
    with pytest.raises(SystemExit, match="name a .png or .html file"):
        inspect.run([frames[0], "--report", "report.pdf"])

"""Durations for training on variable-length clips: per example in the dataset,
per split in the manifest (histogram, bucket boundaries), the duration bounds
as counted filters, and the reader's bucketed batches."""

import io
import json
import tarfile

import numpy as np
import pytest
import tensorflow as tf

from pipelines import tar_to_tfrecord
from transforms.format import reader
from transforms.testing.synthetic_media import flac_bytes, voice

RATE = 16_000
# 24 utterances of 0.5 s to 6.25 s; the broken one at the end.
DURATIONS = [0.5 + 0.25 * i for i in range(24)]


@pytest.fixture(scope="module")
def utterances(tmp_path_factory):
    """A tar of FLAC utterances of the DURATIONS (made with libsndfile), one of
    4 speakers each, and a FLAC cut short (key u24)."""
    root = tmp_path_factory.mktemp("utterances")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i, seconds in enumerate([*DURATIONS, 2.0]):
            flac = flac_bytes(voice(200 + 40 * (i % 4), seconds, RATE, seed=i), RATE)
            if i == len(DURATIONS):
                flac = flac[:40]
            for ext, data in (("flac", flac), ("json", json.dumps({"speaker": f"s{i % 4}"}))):
                data = data if isinstance(data, bytes) else data.encode()
                info = tarfile.TarInfo(f"u{i:02d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    (root / "utterances.tar").write_bytes(buf.getvalue())
    return root / "utterances.tar"


def _run(corpus, output, *flags):
    return tar_to_tfrecord.run(["--input", str(corpus), "--output", str(output),
                                "--splits", "train=1", "--max_failure_fraction", "0.1", *flags])


@pytest.fixture(scope="module")
def whole_clips(utterances, tmp_path_factory):
    output = tmp_path_factory.mktemp("whole") / "ds"
    info = _run(utterances, output, "--cut", "none", "--audio_fields", "flac",
                "--features", "flac:bytes,speaker=json.speaker:bytes",
                "--min_duration_s", "1", "--max_duration_s", "5")
    return output, info


def test_whole_clips_carry_their_duration_and_sample_count(whole_clips):
    output, info = whole_clips
    kept = [d for d in DURATIONS if 1 <= d <= 5]
    records = [tf.train.Example.FromString(r.numpy()) for shard in info["splits"]["train"]["shards"]
               for r in tf.data.TFRecordDataset(str(output / shard["file"]))]
    found = sorted((f.features.feature["duration_s"].float_list.value[0],
                    f.features.feature["num_samples"].int64_list.value[0]) for f in records)
    assert found == [(d, round(d * RATE)) for d in kept]  # quarter seconds: exact in float32
    accounting = info["accounting"]
    assert accounting["samples_filtered_per_reason"] == {"duration": len(DURATIONS) - len(kept)}
    # The FLAC cut short is a dead letter, not a clip of unknown length.
    assert accounting["samples_failed"] == 1
    assert accounting["samples_read"] == len(DURATIONS) + 1


def test_the_manifest_has_each_splits_durations_and_bucket_boundaries(whole_clips):
    _, info = whole_clips
    kept = [d for d in DURATIONS if 1 <= d <= 5]
    durations = info["splits"]["train"]["durations"]
    assert durations["total_s"] == pytest.approx(sum(kept), abs=1e-3)
    histogram = durations["histogram"]
    assert sum(b["examples"] for b in histogram) == len(kept)
    # Each duration is counted in the one bin that holds it.
    holding = [[i for i, b in enumerate(histogram) if b["from_s"] <= d < b["to_s"]] for d in kept]
    assert all(len(bins) == 1 for bins in holding)
    assert [b["examples"] for b in histogram] == [
        sum(1 for bins in holding if bins == [i]) for i in range(len(histogram))]
    boundaries = durations["bucket_boundaries_s"]
    assert boundaries == sorted(boundaries) and len(boundaries) == 7
    counts = np.histogram(kept, [0, *boundaries, 99])[0]
    assert counts.min() >= 1 and counts.max() <= 4  # 17 clips in 8 buckets of about 2


def test_the_reader_batches_clips_of_like_duration(whole_clips):
    output, info = whole_clips
    boundaries = info["splits"]["train"]["durations"]["bucket_boundaries_s"]
    edges = [0, *boundaries, 99]
    seen = []
    for batch in reader.load(str(output), "train", batch_size=2, bucket_by_duration=True,
                             features=["duration_s", "flac"]):
        durations = batch["duration_s"].numpy().tolist()
        buckets = {np.searchsorted(edges, d, side="right") for d in durations}
        assert len(buckets) == 1, durations
        seen += durations
    assert sorted(seen) == pytest.approx([d for d in DURATIONS if 1 <= d <= 5])
    # Boundaries of one's own, in seconds.
    batches = list(reader.load(str(output), "train", batch_size=64,
                               bucket_by_duration=[2.0, 3.0], features="duration_s"))
    assert sorted(len(b) for b in batches) == [4, 4, 9]
    # Durations are compared with the boundaries as stored, not rounded: a 1.25 s
    # clip is below a boundary half a millisecond above it.
    batches = list(reader.load(str(output), "train", batch_size=64,
                               bucket_by_duration=[1.2505], features="duration_s"))
    assert min(sorted(b.numpy().tolist()) for b in batches) == [1.0, 1.25]


def test_cut_examples_count_their_window_durations(utterances, tmp_path):
    info = _run(utterances, tmp_path / "windows", "--cut", "audio_windows",
                "--audio_fields", "flac", "--window_s", "0.5", "--remainder", "drop",
                "--features", "speaker=json.speaker:bytes")
    durations = info["splits"]["train"]["durations"]
    examples = info["splits"]["train"]["num_examples"]
    assert examples == sum(int(d / 0.5) for d in DURATIONS)
    assert durations["total_s"] == pytest.approx(0.5 * examples)
    assert [b["examples"] for b in durations["histogram"]] == [examples]
    assert durations["bucket_boundaries_s"] == []  # one length: nothing to bucket


@pytest.mark.parametrize("flags, message", [
    (["--min_duration_s", "3", "--max_duration_s", "2"], "the minimum not above the maximum"),
    (["--min_duration_s", "-1"], "bounds >= 0"),
    (["--min_duration_s", "1"], "measure the media of --audio_fields or --video_field"),
])
def test_duration_bound_errors_before_any_work(utterances, tmp_path, flags, message):
    with pytest.raises(ValueError, match=message):
        _run(utterances, tmp_path / "bad", "--features", "flac:bytes", *flags)
    assert not (tmp_path / "bad").exists()


def test_bucketing_needs_a_duration(whole_clips, tmp_path, utterances):
    info = _run(utterances, tmp_path / "plain", "--features",
                "flac:bytes,speaker=json.speaker:bytes")
    assert "durations" not in info["splits"]["train"]
    with pytest.raises(ValueError, match="no duration_s, start_time or end_time"):
        reader.load(str(tmp_path / "plain"), "train", bucket_by_duration=True)


@pytest.fixture(scope="module")
def with_an_empty_wav(tmp_path_factory):
    """sox's WAVs: a 1.5 s tone and a valid header with no samples, packed by GNU tar."""
    import subprocess

    root = tmp_path_factory.mktemp("empty_wav")
    script = f"""set -e; cd {root}
        sox -n -r 16000 -c 1 -b 16 tone.wav synth 1.5 sine 440
        sox -n -r 16000 -c 1 -b 16 empty.wav trim 0 0
        printf '1\\n' > tone.cls; printf '2\\n' > empty.cls
        tar --format=gnu -cf both.tar tone.wav tone.cls empty.wav empty.cls"""
    subprocess.run(["bash", "-c", script], check=True)
    assert (root / "empty.wav").stat().st_size == 44  # the header alone
    return root / "both.tar"


@pytest.mark.parametrize("cut", [["--cut", "none"],
                                 ["--cut", "audio_windows", "--window_s", "0.5"]])
def test_a_recording_of_no_length_is_a_dead_letter_naming_its_member(with_an_empty_wav, tmp_path,
                                                                     cut):
    output = tmp_path / "ds"
    info = _run(with_an_empty_wav, output, *cut, "--audio_fields", "wav",
                "--features", "label=cls:int64", "--max_failure_fraction", "0.5")
    letter, = [json.loads(line) for line in (output / "failures" / "failures.jsonl").open()]
    assert (letter["key"], letter["member"], letter["message"]) == (
        "empty", "wav", "no audio samples in 'wav'")
    assert info["accounting"]["samples_failed"] == 1


@pytest.mark.parametrize("cut", [["--cut", "none"],
                                 ["--cut", "audio_windows", "--window_s", "0.5"]])
def test_a_recording_of_no_length_is_below_any_minimum(with_an_empty_wav, tmp_path, cut):
    info = _run(with_an_empty_wav, tmp_path / "ds", *cut, "--audio_fields", "wav",
                "--features", "label=cls:int64", "--min_duration_s", "0.01",
                "--max_failure_fraction", "0")
    accounting = info["accounting"]
    assert accounting["samples_filtered_per_reason"] == {"duration": 1}
    assert accounting["samples_failed"] == 0 and accounting["samples_written"] == 1

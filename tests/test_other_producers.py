"""A corpus made entirely by other tools, through the README's frames job, read back
by the tools users have.

Nothing here is written by the project's own code: FFmpeg's CLI encodes the
clips (H.264 video, AAC audio), sox the FLAC voices, bash's `printf` the labels
(LF, CRLF, a byte-order mark, a padded `3.0` as a float column writes it) and
the JSON, and GNU tar packs them (one pax archive, one gzipped GNU archive). Two
things phones and dedup tools leave behind are in it too: a portrait clip (the
landscape pixels of another clip with a display rotation), and a duplicated
recording kept as hard links, which GNU tar stores as link members. The
dataset is then read by TFDS, by NVIDIA DALI through the record indexes, and
by tfx-bsl against its own schema (TFDV's check).
"""

import subprocess

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipelines import tar_to_tfrecord
from transforms.format import reader
from transforms.verify.dataset import verify_dataset

import dali_reader
import schema_statistics

pytestmark = pytest.mark.slow  # ffmpeg and sox make the corpus

SPEAKERS = 8
CORPUS = r"""set -e
mkdir -p clips && cd clips
i=0
for spk in $(seq 0 {last}); do
  for n in 0 1; do
    key=spk${{spk}}_$n
    ffmpeg -v error -f lavfi -i "testsrc=d=1.5:s=96x64:r=10" \
      -f lavfi -i "sine=f=$((200 + spk * 50)):d=1.5" \
      -pix_fmt yuv420p -c:v libx264 -c:a aac -shortest $key.mp4
    sox -n -r 16000 -c 1 -b 16 $key.flac synth 1.5 sine $((200 + spk * 50))
    case $((i % 4)) in
      0) printf '%d\n' $spk > $key.cls ;;
      1) printf '%d\r\n' $spk > $key.cls ;;
      2) printf '\xef\xbb\xbf%d\r\n' $spk > $key.cls ;;
      3) printf ' %d.0 ' $spk > $key.cls ;;
    esac
    printf '{{"speaker": "spk%d"}}\r\n' $spk > $key.json
    i=$((i + 1))
  done
done
# A phone's portrait clip: spk0_0's pixels, to be shown turned a quarter.
ffmpeg -v error -i spk0_0.mp4 -c copy -metadata:s:v:0 rotate=90 spk0_9.mp4
cp spk0_0.flac spk0_9.flac && printf '0\n' > spk0_9.cls && cp spk0_0.json spk0_9.json
# A duplicated recording kept as hard links.
ln spk1_0.flac spk1_8.flac && ln spk1_0.mp4 spk1_8.mp4
printf '1' > spk1_8.cls && cp spk1_0.json spk1_8.json
cd ..
tar --format=pax --sort=name -cf a.tar clips/spk[0-3]_*
tar --format=gnu --sort=name -czf b.tar.gz clips/spk[4-9]_*
"""
SAMPLES = 2 * SPEAKERS + 2
FRAMES_PER_CLIP = 3   # 1.5 s at 2 fps


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("other_producers")
    subprocess.run(["bash", "-c", CORPUS.format(last=SPEAKERS - 1)], cwd=root, check=True)
    links = subprocess.run(["tar", "-tvf", str(root / "a.tar")], capture_output=True,
                           text=True, check=True).stdout
    assert links.count(" link to ") == 2   # GNU tar kept the duplicate as links
    output = root / "dataset"
    info = tar_to_tfrecord.run([
        "--input", f"{root}/a.tar,{root}/b.tar.gz", "--output", str(output),
        "--cut", "frames", "--video_field", "mp4", "--audio_fields", "flac", "--fps", "2",
        "--frame_size", "64x64", "--av_window_s", "0.5",
        "--features", "label=cls:int64,speaker=json.speaker:string", "--label_field", "cls",
        "--split_by", "json.speaker", "--splits", "train=0.5,test=0.5",
        "--max_failure_fraction", "0"])
    return output, info


def _frames(output, info) -> dict:
    """(source key, start time) -> example, read back with our reader."""
    return {(ex["source_key"].decode(), round(float(ex["start_time"]), 3)): ex
            for split in info["splits"]
            for ex in reader.load(str(output), split, batch_size=None).as_numpy_iterator()}


def test_every_sample_is_written_with_its_label_and_nothing_fails(dataset):
    output, info = dataset
    accounting = info["accounting"]
    assert (accounting["samples_read"], accounting["samples_written"],
            accounting["samples_failed"]) == (SAMPLES, SAMPLES, 0)
    assert sum(s["num_examples"] for s in info["splits"].values()) == SAMPLES * FRAMES_PER_CLIP
    counts = {}
    for split in info["splits"].values():
        for label, n in split["label_counts"].items():
            counts[label] = counts.get(label, 0) + n
    assert counts == {str(s): FRAMES_PER_CLIP * (2 + (s in (0, 1))) for s in range(SPEAKERS)}
    for (key, _), ex in _frames(output, info).items():
        speaker = key.split("/")[1][:4]   # clips/spk3_1 -> spk3
        assert ex["label"] == int(speaker[3]) and ex["speaker"] == speaker.encode()
    assert verify_dataset(str(output))[0] == []


def test_the_hard_linked_duplicate_is_read_as_its_recording(dataset):
    frames = _frames(*dataset)
    for start in (-0.25, 0.25, 0.75):   # the audio windows around frames at 0, 0.5 and 1 s
        original, duplicate = frames[("clips/spk1_0", start)], frames[("clips/spk1_8", start)]
        assert original["frame"].tobytes() == duplicate["frame"].tobytes()
        np.testing.assert_array_equal(original["audio"], duplicate["audio"])


def test_the_portrait_clip_is_turned_as_players_show_it(dataset):
    frames = _frames(*dataset)
    for start in (-0.25, 0.25, 0.75):
        landscape = frames[("clips/spk0_0", start)]["frame"]
        portrait = frames[("clips/spk0_9", start)]["frame"]
        assert landscape[:8].max() < 40 and landscape[:, :8].max() > 40   # letterboxed
        difference = np.abs(np.rot90(landscape).astype(int) - portrait.astype(int))
        assert difference.mean() < 3   # the same picture, JPEG-coded in another orientation


def test_tfds_dali_and_tfx_bsl_read_it(dataset):
    import tensorflow_datasets as tfds

    output, info = dataset
    builder = tfds.builder_from_directory(str(output))
    assert builder.info.features["label"].num_classes == SPEAKERS
    ours = _frames(output, info)
    schema = text_format.Parse((output / "schema.pbtxt").read_text(), schema_pb2.Schema())
    for split, entry in info["splits"].items():
        assert builder.info.splits[split].num_examples == entry["num_examples"]
        labels = sorted(int(ex["label"]) for ex in tfds.as_numpy(builder.as_dataset(split=split)))
        dali = dali_reader.read_split(output, info, split, {
            "source_key": ("string", (), ""), "start_time": ("float32", [], -1.0),
            "label": ("int64", [], -1), "frame": ("string", (), "")})
        assert sorted(int(label) for label in dali["label"]) == labels
        for key, start, frame in zip(dali["source_key"], dali["start_time"], dali["frame"]):
            mine = ours[(bytes(key).decode(), round(float(start), 3))]["frame"]
            assert np.abs(frame.astype(int) - mine.astype(int)).mean() < 2
        records = [r.numpy() for s in entry["shards"]
                   for r in tf.data.TFRecordDataset(str(output / s["file"]))]
        stats = schema_statistics.statistics(schema_statistics.decode(records, schema), schema)
        assert schema_statistics.anomalies(stats, schema) == [], split

"""`python -m pipelines.verify`: a dataset read back and checked against its manifest.

Datasets come from tar_to_tfrecord on an audio-visual corpus
(pipelines.sample_corpus --kind av: 6 speakers, 1.5 s H.264 clips with FLAC
or AAC voices) cut into single frames (a JPEG and its audio window), small
shards so every split has several. Each test damages a copy the way storage
or people do - a flipped byte, a truncated or missing shard, a stray file -
and checks verify names exactly that.
"""

import io
import json
import shutil
import subprocess
import sys

import apache_beam as beam
import numpy as np
import pytest
import soundfile
import tensorflow as tf
from PIL import Image

import transforms as dg
from pipelines import tar_to_tfrecord
from transforms.format.example_check import example_problems
from transforms.format.records import RecordStream
from transforms.format.spec import parse_features
from transforms.testing.corpus import write_corpus
from transforms.verify.dataset import verify_dataset
from transforms.verify.examples import media_problems
from transforms.verify.shards import chosen_for_decoding

FRAMES = ["--cut", "frames", "--video_field", "mp4", "--audio_fields", "flac", "--fps", "4",
          "--frame_size", "32x48", "--av_window_s", "0.25", "--decode_threads", "1",
          "--features", "label=cls:int64,speaker=json.speaker:string",
          "--split_by", "json.speaker", "--splits", "train=0.5,test=0.5",
          "--shard_size_mb", "0.05"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """{compression: (dataset dir, manifest)}."""
    corpus = tmp_path_factory.mktemp("av")
    write_corpus(str(corpus), shards=2, samples_per_shard=3, speakers=6, kind="av", seconds=1.5)
    root = tmp_path_factory.mktemp("datasets")
    return {c: (root / c, tar_to_tfrecord.run(["--input", f"{corpus}/*.tar", "--output",
                                                str(root / c), "--compression", c, *FRAMES]))
            for c in ("none", "gzip")}


@pytest.fixture
def copy(written, tmp_path):
    """A fresh copy of a dataset to damage: copy(compression) -> (dir, manifest, a shard)."""
    def make(compression="none"):
        source, info = written[compression]
        target = tmp_path / compression
        shutil.copytree(source, target)
        return target, info, info["splits"]["train"]["shards"][1]
    return make


def _problems(path, **kwargs) -> list:
    problems, _ = verify_dataset(str(path), **kwargs)
    return problems


def test_a_sound_dataset_verifies_and_every_record_decodes(written):
    for compression, (path, info) in written.items():
        problems, summary = verify_dataset(str(path), media_samples=10_000)
        examples = sum(s["num_examples"] for s in info["splits"].values())
        shards = sum(len(s["shards"]) for s in info["splits"].values())
        assert problems == [], compression
        assert shards > 2
        assert f": {examples} examples in {shards} shards of 2 splits" in summary
        assert f"the media of {examples} sampled records decode" in summary
        assert ("record indexes" in summary) == (compression == "none")


def test_the_seed_chooses_about_media_samples_records(written):
    chosen = {seed: {n for n in range(20_000) if chosen_for_decoding(seed, "f", n, 0.05)}
              for seed in (0, 1)}
    assert all(900 < len(c) < 1100 for c in chosen.values())
    assert chosen[0] == {n for n in range(20_000) if chosen_for_decoding(0, "f", n, 0.05)}
    assert len(chosen[0] & chosen[1]) < 100  # another seed, other records
    path, _ = written["none"]
    summary = verify_dataset(str(path), media_samples=8)[1]
    assert 2 <= int(summary.split("the media of ")[1].split()[0]) <= 20


def test_a_flipped_byte_fails_that_records_crc_and_the_files(copy):
    path, info, shard = copy()
    target = path / shard["file"]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    problems = _problems(path)
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{shard['file']}: record ")
    assert problems[0].endswith(": fails its CRC")
    assert problems[1] == (f"{shard['file']}: its CRC32C is {_crc(data)}, the manifest's "
                           f"{shard['crc32c']}")


def _crc(data) -> str:
    import google_crc32c
    return f"{google_crc32c.value(bytes(data)):08x}"


def test_a_flipped_byte_in_a_gzip_shard_breaks_its_stream(copy):
    path, _, shard = copy("gzip")
    target = path / shard["file"]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x40
    target.write_bytes(bytes(data))
    problems = _problems(path)
    assert any("gzip stream is corrupt" in p or "fails its CRC" in p for p in problems), problems
    assert f"{shard['file']}: its CRC32C is {_crc(data)}, the manifest's {shard['crc32c']}" \
        in problems


def test_a_truncated_shard(copy):
    path, _, shard = copy()
    target = path / shard["file"]
    target.write_bytes(target.read_bytes()[:-100])
    problems = [p.split(": ", 1)[1] for p in _problems(path)]
    assert problems[0].endswith("the file ends inside a record: it is truncated")
    assert f"{shard['num_examples'] - 1} records, the manifest says {shard['num_examples']}" \
        in problems
    assert any(p.startswith("its CRC32C is") for p in problems)
    assert f"its index {shard['index']['file']} does not match its records" in problems


def test_a_truncated_gzip_shard(copy):
    path, _, shard = copy("gzip")
    target = path / shard["file"]
    target.write_bytes(target.read_bytes()[:-5])
    problems = _problems(path)
    assert f"{shard['file']}: the gzip stream ends early: the file is truncated" in problems


def test_a_missing_shard_and_a_missing_index(copy):
    path, info, shard = copy()
    (path / shard["file"]).unlink()
    other = info["splits"]["test"]["shards"][0]["index"]["file"]
    (path / other).unlink()
    assert _problems(path) == [f"{other}: listed in the manifest, but missing",
                               f"{shard['file']}: listed in the manifest, but missing"]


def test_extra_files_and_a_killed_runs_folder(copy):
    path, _, shard = copy()
    shutil.copy(path / shard["file"], path / "train" / "data-00099-of-00099.tfrecord")
    (path / "notes.txt").write_text("mine")
    (path / ".temp-datagen-0123" / "train").mkdir(parents=True)
    (path / ".temp-datagen-0123" / "train" / "shard").write_bytes(b"x")
    assert _problems(path) == [
        ".temp-datagen-0123/: a run's temporary folder: a job is writing here, or one was killed",
        "notes.txt: not in the manifest",
        "train/data-00099-of-00099.tfrecord: not in the manifest"]


def test_counts_that_do_not_add_up_and_lost_dead_letters(copy):
    path, info, _ = copy()
    document = json.loads((path / "manifest.json").read_text())
    document["splits"]["test"]["num_examples"] += 1
    document["failures"] = {"count": 2, "file": "failures/failures.jsonl"}
    (path / "manifest.json").write_text(json.dumps(document))
    assert _problems(path) == [
        f"manifest.json: split test: its shards hold {info['splits']['test']['num_examples']} "
        f"examples, its total says {info['splits']['test']['num_examples'] + 1}",
        f"manifest.json: split test: {info['splits']['test']['num_examples'] + 1} examples, "
        f"the accounting says {info['splits']['test']['num_examples']} were written",
        "failures/failures.jsonl: listed in the manifest, but missing"]


def _tampered(path, change) -> None:
    document = json.loads((path / "manifest.json").read_text())
    change(document)
    (path / "manifest.json").write_text(json.dumps(document))


@pytest.mark.parametrize("change, problem", [
    (lambda d: d["splits"]["train"]["shards"][0].pop("crc32c"),
     "manifest.json: split train: {file} has no crc32c (str)"),
    (lambda d: d["splits"]["train"]["shards"][0]["index"].pop("crc32c"),
     "manifest.json: split train: {file}'s index has no crc32c (str)"),
    (lambda d: d["splits"]["train"]["shards"][0].update(num_examples="12"),
     "manifest.json: split train: {file} has no num_examples (int)"),
    (lambda d: d.pop("features"), "manifest.json: the manifest has no features (list)"),
    (lambda d: d["features"][0].update(dtype="int128"),
     "manifest.json: feature 'audio': unknown dtype 'int128'"),
])
def test_a_tampered_manifest_is_named(copy, change, problem):
    path, info, _ = copy()
    shard = info["splits"]["train"]["shards"][0]["file"]
    _tampered(path, change)
    found = _problems(path)
    assert len(found) == 1 and found[0].startswith(problem.format(file=shard)), found


@pytest.mark.parametrize("text", [b"{", b"\xff", b""])
def test_a_manifest_that_is_not_json_is_named(copy, text):
    path, _, _ = copy()
    (path / "manifest.json").write_bytes(text)
    found = _problems(path)
    assert len(found) == 1 and found[0].startswith("manifest.json: not valid JSON: "), found


def test_no_manifest(tmp_path):
    assert _problems(tmp_path) == [
        "manifest.json: missing: not a finished beam-datagen dataset"]


# -- one record against the spec, and its media ----------------------------------------------

SPEC = parse_features("label:int64,flag:bool,name:string,pcm:int16[4],emb:float[2],"
                      "image:bytes,sound:bytes,fbank:float16[*,2]")


def _jpeg(height=4, width=6) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.zeros((height, width, 3), np.uint8)).save(out, "JPEG")
    return out.getvalue()


def _flac() -> bytes:
    out = io.BytesIO()
    soundfile.write(out, np.zeros(160, np.int16), 16000, format="FLAC")
    return out.getvalue()


def _example(**overrides):
    values = {"label": [3], "flag": [1], "name": ["né".encode()], "pcm": [b"\0" * 8],
              "fbank": [np.arange(6, dtype="<f2").tobytes()],
              "emb": [0.5, -1.0], "image": [_jpeg()], "sound": [_flac()], **overrides}
    feature = {}
    for name, v in values.items():
        if v and isinstance(v[0], bytes):
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
        elif v and isinstance(v[0], float):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def test_a_record_of_the_spec_passes_and_its_media_decode():
    example = _example()
    assert example_problems(example, SPEC) == []
    assert media_problems(example, SPEC) == (2, [])


@pytest.mark.parametrize("overrides, problem", [
    ({"extra": [1]}, "feature 'extra' is not in the manifest's spec"),
    ({"label": [1.5]}, "feature 'label' is a float_list, the spec says int64_list"),
    ({"label": [1, 2]}, "feature 'label': 2 values, its shape [] holds 1"),
    ({"flag": [2]}, "feature 'flag': a bool that is not 0 or 1"),
    ({"name": [b"\xff"]}, "feature 'name': text that is not UTF-8"),
    ({"pcm": [b"\0" * 6]}, "feature 'pcm': 6 bytes, int16[4] packs into 8"),
    ({"emb": [float("nan"), 0.0]}, "feature 'emb': a NaN or infinite value"),
    ({"fbank": [b"\0" * 6]}, "feature 'fbank': 6 bytes, not whole rows of float16[*,2]"),
    ({"fbank": [np.array([1, np.inf], "<f2").tobytes()]},
     "feature 'fbank': a NaN or infinite value"),
    ({"fbank": [b"", b""]}, "feature 'fbank': 2 values, its shape [*,2] holds 1"),
])
def test_a_record_off_its_spec(overrides, problem):
    assert example_problems(_example(**overrides), SPEC) == [problem]


def test_a_missing_feature():
    example = _example()
    del example.features.feature["emb"]
    assert example_problems(example, SPEC) == ["feature 'emb' is missing"]


def test_media_that_do_not_decode():
    broken = _example(image=[_jpeg()[:40]], sound=[b"fLaC" + b"\0" * 40])
    decoded, problems = media_problems(broken, SPEC)
    assert decoded == 0 and len(problems) == 2
    assert problems[0].startswith("feature 'image': the image does not decode")
    assert problems[1].startswith("feature 'sound': the audio does not decode")


def test_a_frame_of_the_wrong_size_and_audio_off_its_times():
    spec = parse_features("frame:jpeg[4,6,3],audio:int16[400],start_time:float,end_time:float")
    spec = type(spec)(tuple(f if f.name != "audio" else f.__class__(
        "audio", "int16", (400,), sample_rate=16000) for f in spec))
    example = _example()
    for name in list(example.features.feature):
        del example.features.feature[name]
    feature = example.features.feature
    feature["frame"].bytes_list.value.append(_jpeg(6, 4))
    feature["audio"].bytes_list.value.append(b"\0" * 800)
    feature["start_time"].float_list.value.append(-0.0125)
    feature["end_time"].float_list.value.append(0.0125)  # 400 samples at 16 kHz: right
    assert media_problems(example, spec) == (
        1, ["feature 'frame': the image is 6x4x3, declared 4x6x3"])
    feature["end_time"].float_list.value[0] = 0.05
    assert media_problems(example, spec)[1][1] == (
        "feature 'audio': 400 samples, but -0.0125-0.0500 s at the declared 16000 Hz spans "
        "1000.0")


def test_the_record_stream_reads_what_tensorflow_wrote(tmp_path):
    path = str(tmp_path / "x.tfrecord")
    records = [bytes([i]) * (i * 1000) for i in range(1, 40)]
    with tf.io.TFRecordWriter(path) as writer:
        for r in records:
            writer.write(r)
    data = open(path, "rb").read()
    stream = RecordStream((data[i:i + 777] for i in range(0, len(data), 777)), "none")
    assert [r.data for r in stream] == records and stream.problems == []
    assert stream.sizes == [len(r) for r in records] and stream.crc32c == _crc(data)


# -- the command line ------------------------------------------------------------------------

@pytest.mark.slow
def test_the_command_line(copy):
    path, _, shard = copy()
    ok = subprocess.run([sys.executable, "-m", "pipelines.verify", str(path)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.count("\n") == 1 and ok.stdout.startswith(f"verified {path}: ")
    (path / shard["file"]).unlink()
    bad = subprocess.run([sys.executable, "-m", "pipelines.verify", str(path), "--seed", "3"],
                         capture_output=True, text=True)
    assert bad.returncode == 3
    assert bad.stdout == f"{shard['file']}: listed in the manifest, but missing\n"
    assert bad.stderr == f"failed: 1 problem in {path}\n"
    typo = subprocess.run([sys.executable, "-m", "pipelines.verify", str(path), "--sed", "3"],
                          capture_output=True, text=True)
    assert typo.returncode == 2 and "did you mean --seed?" in typo.stderr


def test_media_kept_whole_that_do_not_decode_are_dead_letters_not_published(tmp_path):
    """Samples of a FLAC (sox), a PNG (Pillow) and a label (printf), packed by
    GNU tar, written whole as `bytes` (no cut): `noise` has a FLAC of random
    bytes, `short` one cut short, `cut` a PNG cut short. By the job, by
    ReadTarSamples into WriteDataset, and as a PCollection's dicts, each of
    them is a dead letter (stage `decode`) and what is published verifies
    (they were published before, and verify failed the dataset)."""
    files = tmp_path / "files"
    files.mkdir()
    png = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 10, 10)).save(png, "PNG")
    for name in ("good0", "good1", "noise", "short", "cut"):
        (files / f"{name}.png").write_bytes(png.getvalue()[:60] if name == "cut"
                                            else png.getvalue())
    subprocess.run("for k in good0 good1 cut; do sox -n -r 16000 -b 16 $k.flac synth 0.3 "
                   "sine 440; done; (printf 'fLaC'; head -c 4000 /dev/urandom) > noise.flac; "
                   "head -c 600 good0.flac > short.flac; for k in good0 good1 noise short cut;"
                   " do printf '1' > $k.cls; done; tar -cf ../corpus.tar *",
                   shell=True, check=True, cwd=files)
    keywords = dict(features="flac:bytes,png:bytes,label=cls:int64", splits="train=1",
                    max_failure_fraction=0.9, duplicates="off")
    tar_to_tfrecord.run(["--input", str(tmp_path / "corpus.tar"), "--output",
                         str(tmp_path / "cli"), "--features", keywords["features"],
                         "--splits", "train=1", "--max_failure_fraction", "0.9",
                         "--duplicates", "off"])
    with dg.make_pipeline() as p:
        _ = (p | dg.ReadTarSamples(str(tmp_path / "corpus.tar"))
               | dg.WriteDataset(str(tmp_path / "api"), **keywords))
    elements = [{"__key__": name, **{ext: (files / f"{name}.{ext}").read_bytes()
                                     for ext in ("flac", "png", "cls")}}
                for name in ("good0", "good1", "noise", "short", "cut")]
    with dg.make_pipeline() as p:
        _ = p | beam.Create(elements) | dg.WriteDataset(str(tmp_path / "dicts"), **keywords)
    for output in ("cli", "api", "dicts"):
        with open(tmp_path / output / "failures" / "failures.jsonl") as f:
            letters = sorted((d["key"], d["stage"], d["member"]) for d in map(json.loads, f))
        assert letters == [("cut", "decode", "png"), ("noise", "decode", "flac"),
                           ("short", "decode", "flac")], output
        written = [ex["label"].numpy() for ex in dg.load(tmp_path / output, "train",
                                                         batch_size=None)]
        assert len(written) == 2
        verification = verify_dataset(tmp_path / output)
        assert verification.ok, verification.problems


def test_the_policies_over_the_totals_are_judged_as_the_writer_judged_them(tmp_path):
    """Verify judges the manifest's accounting by the policy its recipe
    records: a share of failed inputs over it, a split left empty that was
    not allowed."""
    rows = [{"label": i, "speaker": "one"} for i in range(18)] + [{"label": "x"}] * 2
    output = tmp_path / "labels"
    with dg.make_pipeline() as p:
        _ = (p | beam.Create(rows)
               | dg.WriteDataset(str(output), features="label:int64", split_by="speaker",
                                 splits="train=0.5,test=0.5", max_failure_fraction=0.2,
                                 allow_empty_splits=True))
    assert verify_dataset(str(output)).ok
    document = json.loads((output / "manifest.json").read_text())
    empty = next(name for name, split in document["splits"].items() if not split["num_examples"])
    document["recipe"]["writing"].update(max_failure_fraction=0.05, allow_empty_splits=False)
    (output / "manifest.json").write_text(json.dumps(document))
    assert verify_dataset(str(output)).problems == [
        "manifest.json: 2 of 20 inputs failed (10.00% > max_failure_fraction 5.00%)",
        f"manifest.json: split {empty!r} came out empty (asked 50%): the 1 groups of "
        "split_by speaker are too few to cut at these ratios; use more, smaller groups (a "
        "finer split_by), stratify_by a label, or split_column; or pass allow_empty_splits"]

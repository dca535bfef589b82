"""Nothing outside the corpus is read into a dataset, on every way in.

A listing, a Parquet file in the Hugging Face layout (written by pyarrow), a
Kaldi wav.scp and a noise listing, written here with printf, name media by
path; sox makes the media. A path leading out of the file's folder and
every --media_root (`../../etc/passwd`, `/etc/passwd`, a symbolic link out)
is a dead letter naming the row and the path; a first row already outside
stops the job before any work, naming the flag; what a media column holds
must be media by its first bytes (sox's, ffmpeg's, Pillow's files are).
"""

import io
import json
import os
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import transforms as dg
from pipelines import manifest_to_tfrecord, parquet_to_tfrecord, tar_to_tfrecord
from transforms.media.sniff import media_format
from transforms.sources.media_paths import MediaRoots, OutsideCorpus

AUDIO = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def _shell(command: str, cwd) -> None:
    subprocess.run(command, shell=True, check=True, cwd=cwd, capture_output=True)


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    """corpus/clips/a.flac, b.wav (sox), corpus/clips/notes.txt (printf), and
    corpus/clips/away.flac, a symbolic link to /etc/passwd."""
    root = tmp_path_factory.mktemp("media_paths")
    clips = root / "corpus" / "clips"
    clips.mkdir(parents=True)
    _shell("sox -n -r 16000 -b 16 a.flac synth 0.5 sine 300; "
           "sox -n -r 16000 -b 16 b.wav synth 0.5 sine 500; "
           "printf 'not audio\\n' > notes.txt; ln -s /etc/passwd away.flac", clips)
    return root


def test_a_path_is_placed_in_its_listings_folder_or_a_media_root(media, tmp_path):
    listing = str(media / "corpus" / "rows.csv")
    roots = MediaRoots()
    assert roots.place(listing, "clips/a.flac") == str(media / "corpus" / "clips" / "a.flac")
    for outside in ("../../../../etc/passwd", "/etc/passwd", "clips/away.flac",
                    "clips/../../elsewhere.flac"):
        with pytest.raises(OutsideCorpus, match="is outside the corpus"):
            roots.place(listing, outside)
    os.symlink(media / "corpus", tmp_path / "linked")        # a root that is itself a link
    assert MediaRoots.of([tmp_path / "linked"]).place("/lists/x.csv", str(
        tmp_path / "linked" / "clips" / "a.flac")).endswith("a.flac")
    gs = MediaRoots.of("gs://bucket/audio")
    assert gs.place("gs://bucket/lists/x.csv", "../audio/a.flac") == "gs://bucket/audio/a.flac"
    for outside in ("gs://bucket/audio/../secret/a.flac", "gs://other/a.flac", "/audio/a.flac"):
        with pytest.raises(OutsideCorpus):
            gs.place("gs://bucket/lists/x.csv", outside)
    with pytest.raises(dg.ArgumentError, match="^media_root must be a folder"):
        MediaRoots.of([3])


def test_media_formats_are_told_by_their_first_bytes(media, tmp_path):
    """Files of sox, ffmpeg and Pillow, each told apart; text, HTML and a key are not media."""
    _shell("sox -n -r 16000 -b 16 a.ogg synth 0.2 sine 300; "
           "ffmpeg -loglevel error -f lavfi -i sine=d=0.2 a.mp3; "
           "sox -n -r 16000 -b 16 a.aiff synth 0.2 sine 300; "
           "ffmpeg -loglevel error -f lavfi -i testsrc=d=0.2:s=64x48 -pix_fmt yuv420p a.mp4; "
           "ffmpeg -loglevel error -i a.mp4 -c copy a.mkv; ffmpeg -loglevel error -i a.mp4 "
           "-c copy -f mpegts a.ts; ffmpeg -loglevel error -f lavfi -i sine=d=0.2 -c:a aac "
           "-f adts a.aac", tmp_path)
    found = {name: media_format((tmp_path / name).read_bytes()[:189])
             for name in ("a.ogg", "a.mp3", "a.aiff", "a.mp4", "a.mkv", "a.ts", "a.aac")}
    assert found == {"a.ogg": "ogg", "a.mp3": "mp3", "a.aiff": "aiff", "a.mp4": "mp4",
                     "a.mkv": "matroska", "a.ts": "mpegts", "a.aac": "aac"}
    png = io.BytesIO()
    Image.new("RGB", (4, 4)).save(png, "PNG")
    assert media_format(png.getvalue()) == "png"
    assert media_format((media / "corpus" / "clips" / "a.flac").read_bytes()) == "flac"
    assert media_format((media / "corpus" / "clips" / "b.wav").read_bytes()) == "wav"
    for text in (b"root:x:0:0:root:/root:/bin/bash\n", b"<!DOCTYPE html>", b"-----BEGIN"):
        assert media_format(text) is None


def _hub_parquet(folder, rows) -> str:
    """A Parquet file in push_to_hub's layout (data/train-00000-of-00001.parquet)
    of `rows`: (audio bytes or None, path or None, text)."""
    (folder / "data").mkdir(parents=True)
    path = folder / "data" / "train-00000-of-00001.parquet"
    pq.write_table(pa.table({
        "audio": pa.array([{"bytes": b, "path": p} for b, p, _ in rows], AUDIO),
        "text": [t for _, _, t in rows]}), path)
    return str(path)


def _letters(output) -> list:
    with open(output / "failures" / "failures.jsonl") as f:
        return sorted((d["key"], d["stage"], d["error_type"]) for d in map(json.loads, f))


def test_a_local_file_named_by_a_hub_parquet_is_never_published(media, tmp_path):
    """The CLI and the Python API alike: /etc/passwd (by ../, by its absolute
    path, by a link), a text file in the corpus and embedded bytes of no media
    are dead letters; the embedded FLAC and the one named in the corpus are written."""
    flac = (media / "corpus" / "clips" / "a.flac").read_bytes()
    parquet = _hub_parquet(tmp_path / "hub", [
        (flac, "a.flac", "embedded"), (None, "clips/a.flac", "by path, in the corpus"),
        (None, "../../../../../../../../etc/passwd", "up"), (None, "/etc/passwd", "absolute"),
        (None, "clips/away.flac", "a link out"), (None, "clips/notes.txt", "text"),
        (b"root:x:0:0:root", "x.flac", "embedded text")])
    _shell(f"mkdir clips && cp {media}/corpus/clips/a.flac {media}/corpus/clips/notes.txt "
           "clips/ && ln -s /etc/passwd clips/away.flac", tmp_path / "hub" / "data")
    outside = {(f"train-00000-of-00001-{i:07d}", "read_media", "OutsideCorpus") for i in (2, 3, 4)}
    not_media = {(f"train-00000-of-00001-{i:07d}", "read_media", "NotMedia") for i in (5, 6)}
    flags = ["--features", "audio:bytes,text:string", "--splits", "train=1",
             "--max_failure_fraction", "0.9", "--duplicates", "off"]
    info = parquet_to_tfrecord.run(["--input", parquet, "--media_columns", "audio",
                                    "--output", str(tmp_path / "cli"), *flags])
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(str(tmp_path / "api"), dg.ReadParquetSamples(
            parquet, "audio").source, features="audio:bytes,text:string", splits="train=1",
            max_failure_fraction=0.9, duplicates="off")
    for output in (tmp_path / "cli", tmp_path / "api"):
        assert set(_letters(output)) == outside | not_media
        written = [(ex["text"].numpy(), ex["audio"].numpy())
                   for ex in dg.load(output, "train", batch_size=None)]
        assert sorted(written) == [(b"by path, in the corpus", flac), (b"embedded", flac)]
        assert dg.verify_dataset(output).ok
    assert info["accounting"]["samples_failed"] == 5


def test_a_first_row_outside_stops_before_work_and_a_media_root_admits_it(media, tmp_path):
    """A NeMo-style JSONL manifest and a Kaldi wav.scp of absolute paths,
    printf'd: refused before any work naming --media_root (media_root= in
    Python); given the folder, both are read."""
    clips = media / "corpus" / "clips"
    (tmp_path / "nemo").mkdir()
    _shell(f"printf '{{\"audio_filepath\": \"{clips}/a.flac\", \"text\": \"one\"}}\\n"
           f"{{\"audio_filepath\": \"{clips}/b.wav\", \"text\": \"two\"}}\\n' > manifest.jsonl",
           tmp_path / "nemo")
    (tmp_path / "kaldi").mkdir()
    _shell(f"printf 'a {clips}/a.flac\\nb {clips}/b.wav\\n' > wav.scp", tmp_path / "kaldi")
    for listing, column in ((tmp_path / "nemo" / "manifest.jsonl", "audio_filepath"),
                            (tmp_path / "kaldi" / "wav.scp", "audio")):
        flags = ["--input", str(listing), "--media_columns", column, "--features",
                 f"{column}:bytes", "--splits", "train=1"]
        with pytest.raises(ValueError, match=rf"^--media_root is needed: the first row of "
                                             rf"{listing} names '{clips}/a.flac', outside the "
                                             rf"listing's folder; give --media_root {clips} "):
            manifest_to_tfrecord.run([*flags, "--output", str(tmp_path / "refused")])
        with pytest.raises(dg.ArgumentError, match="^media_root is needed: the first row"):
            dg.ReadListingSamples(str(listing), column)
        assert not (tmp_path / "refused").exists()
        output = tmp_path / listing.parent.name
        info = manifest_to_tfrecord.run([*flags, "--output", str(output / "ds"),
                                         "--media_root", str(media / "corpus")])
        assert info["accounting"]["samples_written"] == 2


def test_a_noise_listing_naming_a_file_outside_stops_before_work(media, tmp_path):
    clips = media / "corpus" / "clips"
    (tmp_path / "noise").mkdir()
    _shell(f"printf 'audio_filepath\\n{clips}/b.wav\\n' > noise.csv", tmp_path / "noise")
    tar = tmp_path / "speech.tar"
    _shell(f"tar -cf {tar} a.flac", clips)
    flags = ["--input", str(tar), "--cut", "audio_windows", "--audio_fields", "flac",
             "--window_s", "0.25", "--features", "none", "--splits", "train=1",
             "--augment_copies", "1", "--noise_input", str(tmp_path / "noise" / "noise.csv"),
             "--snr_db", "10,20"]
    with pytest.raises(ValueError, match="^--media_root is needed: noise corpus .*noise.csv: "
                                         f"'{clips}/b.wav' is outside the corpus"):
        tar_to_tfrecord.run([*flags, "--output", str(tmp_path / "refused")])
    info = tar_to_tfrecord.run([*flags, "--output", str(tmp_path / "ds"), "--media_root",
                                str(clips)])
    assert info["accounting"]["augmentation"]["noise_recordings_used"] == {"train": 1}

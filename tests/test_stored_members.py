"""Large tar members left stored and streamed by the decoders: the same bytes,
the same examples, a storage failure retried, and memory that does not grow
with a member.

Media come from sox and ffmpeg, archives from GNU tar.
"""

import functools
import os
import subprocess
import sys
import tarfile

import pytest

from benchmarks.process_tree import measure
from transforms.format.dead_letters import StorageReadError
from transforms.format.encoder import ExampleEncoder
from transforms.format.spec import Feature, FeatureSpec
from transforms.media.audio import AudioOptions
from transforms.media.cutting import CutOptions
from transforms.media.frames import FrameOptions
from transforms.media.windows import WindowOptions
from transforms.recipe.examples import ExampleRecipe, convert_sample
from transforms.recipe.splits import SplitPlan
from transforms.sources.input_files import open_input
from transforms.sources.listing import ReadListingSamples
from transforms.sources.stored import StoredMember
from transforms.sources.tar_stream import iter_tar


def _run(*command, cwd=None):
    subprocess.run(command, check=True, cwd=cwd, capture_output=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """corpus.tar (plain) and corpus.tar.gz of GNU tar: a.flac (sox, 48 kHz stereo),
    a.mp4 (ffmpeg, H.264 and AAC), a.cls (echo), b.flac a hard link to a.flac."""
    root = tmp_path_factory.mktemp("stored")
    files = root / "files"
    files.mkdir()
    _run("sox", "-n", "-r", "48000", "-c", "2", "-b", "16", str(files / "a.flac"),
         "synth", "7.3", "pinknoise", "vol", "0.3")
    _run("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25:duration=4",
         "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=4",
         "-c:v", "libx264", "-g", "25", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest",
         str(files / "a.mp4"))
    (files / "a.cls").write_bytes(b"3\n")
    os.link(files / "a.flac", files / "b.flac")
    names = ["a.cls", "a.flac", "a.mp4", "b.flac"]
    _run("tar", "--format=gnu", "-cf", str(root / "corpus.tar"), *names, cwd=files)
    _run("tar", "--format=gnu", "-czf", str(root / "corpus.tar.gz"), *names, cwd=files)
    return root


def _samples(path, stored_from):
    with open(path, "rb") as f:
        items = list(iter_tar(f, str(path), stored_from=stored_from,
                              reopen=lambda: open(path, "rb")))
    assert all(isinstance(item, dict) for item in items), items
    return {sample["__key__"]: sample for sample in items}


def test_large_members_are_left_stored_and_read_back_byte_for_byte(corpus):
    files = corpus / "files"
    stored = _samples(corpus / "corpus.tar", stored_from=1000)
    a, b = stored["a"], stored["b"]
    assert a["cls"] == b"3\n"                                # small: its bytes
    for value in (a["flac"], a["mp4"], b["flac"]):
        assert isinstance(value, StoredMember) and value.url == str(corpus / "corpus.tar")
    assert a["flac"].read() == (files / "a.flac").read_bytes()
    assert a["mp4"].read() == (files / "a.mp4").read_bytes()
    assert b["flac"] == a["flac"]                            # the hard link: its target's bytes
    with a["mp4"].open() as f:                               # seekable, exactly the member
        f.seek(-100, os.SEEK_END)
        assert f.read() == (files / "a.mp4").read_bytes()[-100:]
    # A compressed archive can only be read from its start: its members are bytes.
    whole = _samples(corpus / "corpus.tar.gz", stored_from=1000)
    assert whole["a"]["flac"] == (files / "a.flac").read_bytes()


def test_members_of_a_tar_in_a_bucket_are_left_stored_and_cut_alike(corpus, gcs_emulator):
    gcs_emulator.upload(corpus / "corpus.tar", "stored/corpus.tar")
    url = gcs_emulator.url("stored/corpus.tar")
    with open_input(url) as f:
        [a, b] = [s for s in iter_tar(f, url, stored_from=1000,
                                      reopen=functools.partial(open_input, url))]
    assert isinstance(a["mp4"], StoredMember) and a["mp4"].url == url
    with a["mp4"].open() as f:                               # ranges of the object, seeking
        f.seek(-100, os.SEEK_END)
        assert f.read() == (corpus / "files" / "a.mp4").read_bytes()[-100:]
    recipe = _recipe(CUTS["frames with the flac"])
    local = _samples(corpus / "corpus.tar", stored_from=0)["a"]
    assert _convert(a, recipe) == _convert(local, recipe)


def test_a_listings_large_media_files_are_left_stored(corpus, tmp_path):
    files = corpus / "files"
    _run("sox", "-n", "-r", "8000", "-b", "16", str(tmp_path / "tiny.wav"), "synth", "0.01",
         "sine", "300")
    listing = tmp_path / "clips.csv"
    listing.write_text(f"audio,label\n{files / 'a.flac'},1\n{tmp_path / 'tiny.wav'},2\n"
                       f"{tmp_path / 'gone.flac'},3\n")
    read = ReadListingSamples(str(listing), ["audio"], media_root=files)
    [unit] = read.source.plan()
    reader = read.source.reader.leaving_stored(1000)
    reader.setup(counting=False)
    flac, tiny, gone = reader.read(unit)
    assert isinstance(flac["audio"], StoredMember)
    assert flac["audio"].read() == (files / "a.flac").read_bytes()
    assert tiny["audio"] == (tmp_path / "tiny.wav").read_bytes()   # small: its bytes
    assert gone.record["stage"] == "read_media"               # missing: as before
    whole = read.source.reader
    whole.setup(counting=False)
    assert next(iter(whole.read(unit)))["audio"] == (files / "a.flac").read_bytes()


def _recipe(cut, **kwargs):
    spec = FeatureSpec((*cut.features, Feature("label", "int64", source="cls")))
    return ExampleRecipe(spec=spec, split_plan=SplitPlan.from_flags("train=1", "__key__"),
                         cut=cut, **kwargs)


def _convert(sample, recipe):
    """(serialized examples, outcome) of convert_sample."""
    examples = convert_sample(sample, recipe, ExampleEncoder([(f.name, f.kind)
                                                               for f in recipe.spec]))
    serialized = []
    while True:
        try:
            serialized.append(next(examples).serialized)
        except StopIteration as done:
            return serialized, done.value


FRAMES = FrameOptions(fps=2, size=(60, 80))
CUTS = {
    "audio_windows": CutOptions(mode="audio_windows", audio_fields=("flac",),
                                windows=WindowOptions(window_s=1.0, hop_s=0.7)),
    "frames with the video's audio": CutOptions(mode="frames", video_field="mp4",
                                                frames=FRAMES, av_window_s=0.5),
    "frames with the flac": CutOptions(mode="frames", video_field="mp4", audio_fields=("flac",),
                                       frames=FRAMES, audio=AudioOptions(dtype="int16")),
    "clips": CutOptions(mode="clips", video_field="mp4", frames=FRAMES, clip_frames=3),
}


@pytest.mark.parametrize("cut", CUTS.values(), ids=CUTS.keys())
def test_stored_media_are_cut_into_the_same_examples(corpus, cut):
    recipe = _recipe(cut)
    assert recipe.streamed_fields == cut.streamed_fields
    stored = _samples(corpus / "corpus.tar", stored_from=1000)["a"]
    in_memory = _samples(corpus / "corpus.tar", stored_from=0)["a"]
    assert isinstance(stored["mp4"], StoredMember) and isinstance(in_memory["mp4"], bytes)
    examples, outcome = _convert(stored, recipe)
    assert outcome.failure is None and len(examples) >= 2
    assert (examples, outcome) == _convert(in_memory, recipe)


def test_fields_something_else_reads_first_are_read_whole():
    cut = CUTS["audio_windows"]
    assert _recipe(cut).streamed_fields == {"flac"}
    assert _recipe(cut, sample_fn="json:loads").streamed_fields == frozenset()
    assert _recipe(cut, where=(("flac", "x"),)).streamed_fields == frozenset()
    assert _recipe(cut, renames=(("audio", "flac"),)).streamed_fields == {"audio"}
    assert _recipe(CutOptions(audio_fields=("flac",))).streamed_fields == frozenset()


def test_a_storage_failure_while_streaming_is_retried_not_a_dead_letter(corpus, tmp_path):
    archive = tmp_path / "corpus.tar"
    archive.write_bytes((corpus / "corpus.tar").read_bytes())
    sample = _samples(archive, stored_from=1000)["a"]
    with tarfile.open(archive) as tar:
        cut_at = tar.getmember("a.flac").offset_data + 40_000
    os.truncate(archive, cut_at)                 # the store loses the rest of the member
    with pytest.raises(StorageReadError, match="ends before byte"):
        _convert(sample, _recipe(CUTS["audio_windows"]))


@pytest.mark.slow
def test_memory_does_not_grow_with_a_member(tmp_path):
    """Peak PSS of the whole job (launcher and worker) on a ~180 MB FLAC member
    (30 minutes of 48 kHz stereo noise) against the same job on a 5 s one: read
    whole, the long member cost more than its size. (PSS, sampled often: the
    tree's RSS counts the pages the launcher shares with the worker zygote it
    forks at start (transforms/runner/worker_pool.py) twice while the zygote
    lives, which a sample may or may not catch: 250 or 370 MiB, run to run.)"""
    runs = {}
    for name, seconds in (("short", 5), ("long", 1800)):
        folder = tmp_path / name
        folder.mkdir()
        _run("sox", "-n", "-r", "48000", "-c", "2", "-b", "16", str(folder / "k.flac"),
             "synth", str(seconds), "whitenoise", "vol", "0.5")
        (folder / "k.cls").write_bytes(b"1")
        _run("tar", "-cf", str(folder / "a.tar"), "k.flac", "k.cls", cwd=folder)
        runs[name] = measure([
            sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", str(folder / "a.tar"),
            "--output", str(tmp_path / f"out_{name}"), "--cut", "audio_windows",
            "--audio_fields", "flac", "--window_s", "10", "--features", "label=cls:int64",
            "--splits", "train=1"], pss_interval_s=0.05)
        assert f"{seconds // 10 or 1} examples written" in runs[name].output, runs[name].output
    member = (tmp_path / "long" / "k.flac").stat().st_size
    assert member > 150 << 20
    extra = runs["long"].peak_pss - runs["short"].peak_pss
    assert extra < member // 3, f"a {member >> 20} MiB member cost {extra >> 20} MiB"

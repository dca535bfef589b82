"""`--dry_run_samples N`: the first samples built on the launcher, the whole job projected.

The corpus (pipelines.sample_corpus --kind av: 4 tar shards of 8 samples of
1.5 s H.264 clips with FLAC or AAC voices, 24 speakers, one broken sample)
is cut into single frames with their audio window. The dry run reads the
first shard whole and builds its samples; its projection is compared with a
real run of the same command. The stated error (docs/command_line.md, "Plan before
spending"): total examples and bytes within 15% when the dry run reads a
quarter of such a corpus.
"""

import math

import pytest

from pipelines import manifest_to_tfrecord, tar_to_tfrecord
from pipelines.dry_run import SampleMeasure
from pipelines.projection import project
from transforms.format.shard_format import ShardFormat
from transforms.recipe.accounting import Kind, Tally
from transforms.testing.corpus import write_corpus

FLAGS = ["--cut", "frames", "--video_field", "mp4", "--audio_fields", "flac", "--fps", "4",
         "--frame_size", "32x48", "--av_window_s", "0.25", "--decode_threads", "1",
         "--features", "label=cls:int64,speaker=json.speaker:string",
         "--split_by", "json.speaker", "--splits", "train=0.7,eval=0.15,test=0.15",
         "--max_failure_fraction", "0.1"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("av")
    write_corpus(str(root), shards=4, samples_per_shard=8, speakers=24, kind="av", seconds=1.5,
                 bad_samples=1)
    return root


def test_a_dry_run_projects_a_real_run_and_writes_nothing(corpus, tmp_path, capsys):
    output = tmp_path / "out"
    argv = ["--input", f"{corpus}/*.tar", "--output", str(output), *FLAGS]
    projected = tar_to_tfrecord.run([*argv, "--dry_run_samples", "8"])
    printed = capsys.readouterr().out
    assert not output.exists()  # not even the folder
    assert printed.startswith("dry run: the recipe ran on 8 samples here")
    assert "read whole: 1 of 4 input files" in printed and "(scale x4.00)" in printed
    real = tar_to_tfrecord.run(argv)
    splits = real["splits"]
    examples = sum(s["num_examples"] for s in splits.values())
    num_bytes = sum(s["num_bytes"] for s in splits.values())
    assert projected.samples == real["accounting"]["samples_read"] == 32
    assert abs(sum(projected.examples.values()) - examples) <= 0.15 * examples
    assert abs(sum(projected.bytes.values()) - num_bytes) <= 0.15 * num_bytes
    # Split by speaker: the shares are the asked ratios (the first shard's 8 speakers
    # all fell in train; the whole corpus's 24 gave eval and test one each).
    total = sum(projected.examples.values())
    assert projected.examples == {"train": round(0.7 * total), "eval": round(0.15 * total),
                                  "test": round(0.15 * total)}
    assert projected.shards == {name: len(s["shards"]) for name, s in splits.items()} == {
        "train": 1, "eval": 1, "test": 1}
    assert projected.largest <= max(  # the largest example is one of the real ones
        s["num_bytes"] / s["num_examples"] for s in splits.values() if s["num_examples"]) * 1.5
    assert projected.cost["shuffle"] == 0 and projected.cost["compute"] > 0


def test_a_dry_run_of_fewer_samples_than_the_input_has_reads_it_all(corpus, tmp_path):
    projected = tar_to_tfrecord.run(["--input", f"{corpus}/corpus-00000.tar", "--output",
                                     str(tmp_path / "out"), *FLAGS, "--dry_run_samples", "100"])
    assert projected.scale == 1.0 and projected.samples == 8
    assert not (tmp_path / "out").exists()


def _measure(**overrides) -> SampleMeasure:
    fields = dict(samples_built=10, samples_read=20, files_read=("a.tar",), complete=False,
                  tallies={Tally(Kind.FAILED, "sample"): 1}, example_sizes={"train": [1000] * 30,
                                                                    "test": [1000] * 10},
                  files_failed=0, seconds=1.0, unit_sizes=(4_000_000,) * 5)
    return SampleMeasure(**{**fields, **overrides})


def test_the_projection_scales_by_bytes_and_rolls_shards_per_unit():
    p = project(_measure(), input_bytes=20_000_000, read_bytes=2_000_000, split_ratios=None,
                split_names=["train", "test"], shard_size_bytes=100_000, shuffle="none",
                num_shards=0, shard_format=ShardFormat(), video=False)
    assert p.scale == 10 and p.samples == 200
    # 30 examples from 10 of the 20 samples of the files read, times 10.
    assert p.examples == {"train": 600, "test": 200} and p.bytes["train"] == 600_000
    # Each of the 5 units makes a fifth of each split's bytes, rolled at 100 kB.
    assert p.shards == {"train": 5 * math.ceil(120_000 / 100_000), "test": 5}
    assert p.dead_letters == 20 and p.largest == 1000
    assert p.machine == "n2-highcpu-4" and p.cost["shuffle"] == 0
    # Measured 1 MB/s (10 of 20 samples of 2 MB in 1 s), planned at 60%.
    assert p.vcpu_hours == pytest.approx(20 / 0.6 / 3600)


def test_the_global_layout_pays_a_shuffle_and_takes_num_shards():
    big = _measure(example_sizes={"train": [10**6] * 500})  # x 2,000: 1 TB of examples
    p = project(big, input_bytes=2 * 10**12, read_bytes=2 * 10**9,
                split_ratios={"train": 0.75, "test": 0.25}, split_names=["train", "test"],
                shard_size_bytes=128 << 20, shuffle="global", num_shards=64,
                shard_format=ShardFormat("tfrecord", "gzip"), video=True)
    # The ratios share the examples out (the samples built held train only).
    assert p.examples == {"train": 750_000, "test": 250_000}
    assert p.shards == {"train": 64, "test": 64}
    # 2 x 1,000 GB through the shuffle: 250 at 25%, 1,750 at 50% of $0.011.
    assert p.cost["shuffle"] == pytest.approx((250 * 0.25 + 1750 * 0.5) * 0.011)
    assert p.machine == "n2-standard-4"


def test_a_source_of_unknown_size_is_refused_before_any_work(tmp_path):
    listing = tmp_path / "clips.csv"
    listing.write_text("audio,label\nmissing.flac,1\n")
    with pytest.raises(ValueError, match="--dry_run_samples: a manifest source's size is not "
                                         "known"):
        manifest_to_tfrecord.run(["--input", str(listing), "--media_columns", "audio",
                                  "--output", str(tmp_path / "out"),
                                  "--features", "audio:bytes,label:int64",
                                  "--dry_run_samples", "4"])
    assert not (tmp_path / "out").exists()

"""Measures as plug-ins (transforms/recipe/measures/): a measure of the caller's,
one class, gets its manifest section, merged over the job, also when a resumed
run takes every unit's share from its receipt."""

import subprocess

import pytest
import tensorflow as tf

import transforms as dg
from pipelines.launch import open_run
from transforms.format.dead_letters import DatasetFailed
from transforms.recipe.measures.loudness import Loudness
from transforms.testing.corpus import write_corpus

SETTINGS = dict(features="payload=bin:bytes,speaker=json.speaker:bytes", split_by="json.speaker",
                splits="train=0.5,test=0.5", shard_size_bytes=200 << 10)


class PayloadBytes(dg.Measure):
    """Examples and payload bytes per split. With `refuse`, being fed an
    example fails the job: a resumed run must convert nothing."""

    name = "payload_bytes"

    def __init__(self, refuse: bool = False):
        self.refuse = refuse

    def create(self):
        return {}

    def add(self, accumulator, seen):
        if self.refuse:
            raise AssertionError("fed an example: a unit was converted again")
        found = accumulator.setdefault(seen.split, [0, 0])
        found[0] += 1
        found[1] += len(seen.values["payload"][0])

    def merge(self, accumulators):
        merged = {}
        for accumulator in accumulators:
            for split, (examples, size) in accumulator.items():
                found = merged.setdefault(split, [0, 0])
                found[0] += examples
                found[1] += size
        return merged

    def section(self, accumulator, split_names):
        return {split: {"examples": accumulator[split][0], "bytes": accumulator[split][1]}
                for split in split_names if split in accumulator}


def _write(corpus, output, measure, *, resume: bool, max_failure_fraction: float) -> dict:
    """The dataset written from Python, as a launcher does (its run folder marked)."""
    source = dg.ReadTarSamples(f"{corpus}/*.tar").source
    config = dg.WriteDataset(str(output), source, measures=[measure],
                             max_failure_fraction=max_failure_fraction, **SETTINGS).config
    run, _ = open_run(config, resume=resume, retry_failed=False)
    with dg.make_pipeline() as p:
        written = p | dg.WriteDataset(config, source, run=run)
    del written
    return dg.load_info(str(output))


def _read_back(output, info) -> dict:
    """{split: {"examples", "bytes"}} of the shards, as TensorFlow reads them."""
    found = {}
    for split in info.splits:
        files = [str(output / f) for f in info.files(split)]
        payloads = [tf.train.Example.FromString(r.numpy()).features.feature["payload"]
                    .bytes_list.value[0] for r in tf.data.TFRecordDataset(files)]
        if payloads:
            found[split] = {"examples": len(payloads), "bytes": sum(map(len, payloads))}
    return found


def test_a_measure_of_ones_own_is_a_manifest_section_resumed_units_included(tmp_path):
    corpus = tmp_path / "corpus"
    write_corpus(str(corpus), shards=4, samples_per_shard=6, payload_bytes=32 << 10, speakers=8)
    (corpus / "corpus-00002.tar").write_bytes((corpus / "corpus-00002.tar").read_bytes()[:9000])
    output = tmp_path / "ds"
    with pytest.raises(DatasetFailed, match="max_failure_fraction"):
        _write(corpus, output, PayloadBytes(), resume=False, max_failure_fraction=0)
    # Every unit has its receipt: the rerun reuses them all and feeds no example.
    info = _write(corpus, output, PayloadBytes(refuse=True), resume=True,
                  max_failure_fraction=0.5)

    section = info.document["payload_bytes"]
    assert section == _read_back(output, info)
    assert sum(s["examples"] for s in section.values()) == info.accounting[
        "samples_written"] > 12
    assert info.recipe["measures"] == ["payload_bytes"]


@pytest.mark.parametrize("measures, message", [
    ([object()], "measures must be Measures"),
    (PayloadBytes(), "measures must be a list of Measures"),
    ([PayloadBytes(), PayloadBytes()], "'payload_bytes' is taken"),
    ([type("Splits", (PayloadBytes,), {"name": "splits"})()], "'splits' is taken"),
])
def test_a_bad_measures_argument_is_refused_naming_it(tmp_path, measures, message):
    with pytest.raises(dg.ArgumentError, match=message):
        dg.WriteDataset(str(tmp_path / "ds"), measures=measures, **SETTINGS)


def test_loudness_hears_each_samples_audio_once(tmp_path):
    """Tones sox made at known levels, a clipped square wave and silence, in a
    tar GNU tar made: each sample heard once as its cut decodes it (two
    seconds cut into two windows), its active level in each split's entry."""
    corpus = tmp_path / "tones"
    corpus.mkdir()
    made = {"loud": ["sine", "440", "vol", "0.5"], "quiet": ["sine", "440", "vol", "0.05"],
            "clip": ["square", "220", "vol", "2"], "hush": ["sine", "440", "vol", "0"]}
    for name, synth in made.items():
        subprocess.run(["sox", "-r", "16000", "-n", "-b", "16", "-D", str(corpus / f"{name}.flac"),
                        "synth", "2", *synth], check=True, capture_output=True)
    subprocess.run(["tar", "-cf", str(tmp_path / "tones.tar"), "-C", str(corpus),
                    *sorted(p.name for p in corpus.iterdir())], check=True)
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(
            str(tmp_path / "ds"), dg.ReadTarSamples(str(tmp_path / "tones.tar")).source,
            features="name=__key__:string", splits="train=1", measures=[Loudness()],
            cut=dg.CutOptions(mode="audio_windows", audio_fields=("flac",)))
    info = dg.load_info(tmp_path / "ds")
    assert info.document["splits"]["train"]["num_examples"] == 8
    # A sine's power is half its peak's square: 0.5 is -9.0 dBFS, 0.05 -29.0.
    assert info.document["splits"]["train"]["loudness"] == {
        "samples": 4, "active_level_dbfs": {"p10": -29.0, "p50": -9.0, "p90": 0.0},
        "clipped": 1, "silent": 1}

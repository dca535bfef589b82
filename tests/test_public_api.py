"""The public API (transforms/__init__.py) composed in pipelines the project did not
write: dicts from beam.Create, a reader followed by a user's DoFn, a user's own
Source. Each dataset passes verify, reads back with TFDS and our reader, and
its accounting holds; bad elements become dead letters, never a crashed job."""

import ast
import doctest
import functools
import importlib
import json
import os
import subprocess
import sys
import tarfile

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from apache_beam.testing.util import assert_that, equal_to

import transforms as dg
from transforms.testing.corpus import write_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_public_names_are_documented_and_nothing_else_is_exported():
    assert 10 <= len(dg.__all__) <= 38
    for name in dg.__all__:
        # Each module imported first: a subpackage of the same name must not shadow it.
        module = importlib.import_module(dg._EXPORTS[name])
        value = getattr(dg, name)
        assert value is getattr(module, name), name
        assert (value.__doc__ or "").strip(), f"{name} has no docstring"
    with pytest.raises(AttributeError, match="no attribute 'convert_units'"):
        dg.convert_units  # noqa: B018 - the lookup is the test


def test_type_checkers_see_every_public_name_where_it_is_defined():
    """The TYPE_CHECKING imports of transforms/__init__.py (what an IDE reads) are
    the exports, each from its module."""
    tree = ast.parse(open(os.path.join(ROOT, "transforms", "__init__.py")).read())
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", "") == "TYPE_CHECKING")
    seen = {alias.name: node.module for node in block.body for alias in node.names}
    assert seen == dg._EXPORTS


@pytest.fixture(scope="module")
def docs_table(bigtable_emulator):
    """The table ReadBigtableSamples' example reads: rows spk1/0..2 with raw:cls,
    loaded with Google's own `cbt`."""
    from google.cloud.bigtable import Client
    table = Client(project="p", admin=True).instance("i").table("docs")
    table.create(column_families={"raw": None})
    for i in range(3):
        subprocess.run(["cbt", "-project", "p", "-instance", "i", "set", "docs",
                        f"spk1/{i}", f"raw:cls={i}"], check=True)
    yield
    table.delete()


@pytest.mark.parametrize("name", sorted(dg.__all__))
def test_every_public_names_docstring_example_runs(name, tmp_path, monkeypatch, request):
    """Each public name shows a use in its docstring, and it runs as written (in a
    fresh folder: the examples write their own inputs)."""
    if name == "ReadBigtableSamples":
        request.getfixturevalue("docs_table")
    value = getattr(dg, name)
    tests = doctest.DocTestFinder(recurse=False).find(value, name, globs={})
    examples = sum(len(t.examples) for t in tests)
    assert examples, f"{name}'s docstring has no >>> example"
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0, f"{name}'s example failed (above)"


def test_importing_the_api_or_the_reader_does_not_load_beam():
    code = ("import sys, transforms; from transforms.format import spec, sample, manifest; "
            "assert 'apache_beam' not in sys.modules, 'Beam was imported'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def _accounting_holds(info):
    a = info["accounting"]
    assert a["samples_read"] == a["samples_written"] + a["samples_filtered"] + a["samples_failed"]
    assert sum(s["num_examples"] for s in info["splits"].values()) == sum(
        a["examples_per_split"].values())


def _dead_letters(output) -> list:
    path = os.path.join(output, "failures", "failures.jsonl")
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def _read_back(output, info):
    """Every split through TFDS and through our reader: the same count."""
    import tensorflow_datasets as tfds

    builder = tfds.builder_from_directory(output)
    for split, entry in info["splits"].items():
        assert builder.info.splits[split].num_examples == entry["num_examples"]
        assert sum(1 for _ in dg.load(output, split, batch_size=None)) == entry["num_examples"]
    assert dg.verify_dataset(output)[0] == []


def test_dicts_from_any_beam_step_become_a_dataset(tmp_path):
    output = str(tmp_path / "embeddings")
    rows = [{"emb": np.full(4, i, np.float32), "label": i % 3, "speaker": f"s{i % 20}"}
            for i in range(60)]
    bad = [None, b"not a dict", {"emb": np.zeros(3, np.float32), "label": 1, "speaker": "s1"},
           {"label": 2, "speaker": "s2"}, {"emb": np.zeros(4, np.float32), "label": None,
                                           "speaker": "s3"}]
    with dg.make_pipeline() as p:
        _ = (p
             | beam.Create(rows + bad)
             | dg.WriteDataset(output, features="emb:float32[4],label:int64,speaker:string",
                               split_by="speaker", max_failure_fraction=0.1))
    info = json.load(open(os.path.join(output, "manifest.json")))
    assert info["source"] == {"type": "pcollection"} and "ledger" not in os.listdir(output)
    assert info["accounting"]["samples_failed"] == len(bad)
    _accounting_holds(info)
    _read_back(output, info)
    written = {float(ex["emb"][0]): ex for split in info["splits"]
               for ex in dg.load(output, split, batch_size=None).as_numpy_iterator()}
    assert sorted(written) == list(range(60))
    assert all(ex["label"] == int(i) % 3 and ex["speaker"] == f"s{int(i) % 20}".encode()
               for i, ex in written.items())
    letters = _dead_letters(output)
    assert sorted(r["stage"] for r in letters) == ["encode", "encode", "features", "parse",
                                                    "read_element"]
    keyed = [r for r in letters if r["key"]]
    assert all(r["key"].startswith("content-") for r in keyed)   # the same on every run
    assert {r["member"] for r in keyed} == {"emb", "label", None}
    assert [r["message"] for r in letters if r["stage"] == "read_element"] == [
        "a NoneType is neither a Sample (a dict of field name to value) nor a serialized "
        "tf.train.Example: None"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    write_corpus(str(root), shards=3, samples_per_shard=10, payload_bytes=2000, speakers=10,
                 bad_samples=1)
    return root


class _LoudOnly(beam.DoFn):
    """A user's step: keeps samples whose payload's first byte is even, and adds a
    field of its own."""

    def process(self, sample):
        if sample["bin"][0] % 2 == 0:
            yield {**sample, "first_byte": sample["bin"][0]}


def test_a_reader_then_a_users_dofn_then_the_writer(corpus, tmp_path):
    output = str(tmp_path / "mine")
    with dg.make_pipeline() as p:
        read = p | dg.ReadTarSamples(f"{corpus}/*.tar")
        _ = (read.samples
             | beam.ParDo(_LoudOnly())
             | dg.WriteDataset(output, split_by="json.speaker",
                               features="payload=bin:bytes,label=cls:int64,first_byte:int64",
                               max_failure_fraction=0.2, allow_empty_splits=True,
                               failures=read))
    info = json.load(open(os.path.join(output, "manifest.json")))
    kept = 0
    for path in sorted(corpus.glob("*.tar")):
        with tarfile.open(path) as tar:
            kept += sum(tar.extractfile(m).read()[0] % 2 == 0
                        for m in tar if m.name.endswith(".bin"))
    assert info["accounting"]["samples_read"] == kept
    _accounting_holds(info)
    _read_back(output, info)
    for split in info["splits"]:
        for ex in dg.load(output, split, batch_size=None).as_numpy_iterator():
            assert ex["first_byte"] == ex["payload"][0] and ex["first_byte"] % 2 == 0


def _plan_by_speaker(root: str) -> list:
    """A user's own units: the tar files' samples, one unit per speaker prefix."""
    speakers = sorted({name.split("_")[0] for name in os.listdir(root) if name.endswith(".txt")})
    return [dg.WorkUnit(i, (os.path.join(root, spk),), 1) for i, spk in enumerate(speakers)]


class _TextFolderReader(dg.UnitReader):
    """A user's own storage: `<speaker>_<n>.txt` files, a unit per speaker."""

    def read(self, unit, tracker=None):
        prefix = unit.inputs[0]
        folder, speaker = os.path.split(prefix)
        for name in sorted(os.listdir(folder)):
            if name.startswith(speaker + "_"):
                path = os.path.join(folder, name)
                text = open(path, "rb").read()
                if not text:
                    yield dg.Failed({"stage": "read_text", "url": path, "key": name,
                                     "member": None, "unit": "sample", "error_type": "ValueError",
                                     "message": "empty file"})
                    continue
                yield {"__key__": name[:-4], "__url__": path, "txt": text,
                       "speaker": speaker.encode()}


def test_a_users_own_source_is_converted_unit_by_unit(tmp_path):
    root = tmp_path / "texts"
    root.mkdir()
    for s in range(6):
        for n in range(4):
            (root / f"spk{s}_{n}.txt").write_text("" if (s, n) == (2, 3) else f"{s} says {n}")
    source = dg.Source(functools.partial(_plan_by_speaker, str(root)), _TextFolderReader())
    outputs = []
    for run in ("a", "b"):
        output = str(tmp_path / run / "ds")
        with dg.make_pipeline() as p:
            _ = p | dg.WriteDataset(output, source, features="txt:string,speaker:string",
                                    split_by="speaker", splits="train=0.5,test=0.5",
                                    max_failure_fraction=0.1)
        outputs.append(output)
    info = json.load(open(os.path.join(outputs[0], "manifest.json")))
    assert info["accounting"]["samples_read"] == 24 and info["accounting"]["samples_failed"] == 1
    _accounting_holds(info)
    _read_back(outputs[0], info)
    # Units from a Source: the same bytes on every run.
    for entry in info["splits"].values():
        for shard in entry["shards"]:
            assert (open(os.path.join(outputs[0], shard["file"]), "rb").read()
                    == open(os.path.join(outputs[1], shard["file"]), "rb").read())


def test_build_examples_gives_the_recipes_examples_and_dead_letters():
    spec = dg.FeatureSpec.parse("label:int64")
    recipe = dg.ExampleRecipe(spec=spec, split_plan=dg.SplitPlan.from_flags("train=1", "__key__"))
    with dg.make_pipeline() as p:
        built = p | beam.Create([{"__key__": "a", "label": b"3\n"}, {"__key__": "b", "label": b"x"}]
                                ) | dg.BuildExamples(recipe)
        serialized = built.examples | beam.Map(lambda e: (e.split, e.serialized))
        letters = built.failures | beam.Map(lambda r: (r["key"], r["member"]))
        three = tf.train.Example(features=tf.train.Features(feature={
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[3]))}))
        assert_that(serialized, equal_to([("train", three.SerializeToString())]),
                    label="examples")
        assert_that(letters, equal_to([("b", "label")]), label="letters")


@pytest.mark.parametrize("extra, message", [
    ({"stratify_by": "label"}, "give WriteDataset a Source"),
])
def test_what_needs_a_source_is_refused_over_a_pcollection(tmp_path, extra, message):
    spec = dg.FeatureSpec.parse("label:int64")
    recipe = dg.ExampleRecipe(spec=spec, split_plan=dg.SplitPlan.from_flags(
        "train=0.5,test=0.5", "__key__", spec=spec, **extra))
    with pytest.raises(ValueError, match=message):
        with dg.make_pipeline() as p:
            _ = p | beam.Create([{"label": 1}]) | dg.WriteDataset(
                dg.DatasetConfig(output=str(tmp_path / "x"), recipe=recipe))
    assert not (tmp_path / "x").exists()


def _tf_example(**features) -> bytes:
    """A tf.train.Example built and serialized by TensorFlow itself."""
    def feature(value):
        if isinstance(value, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        if isinstance(value, float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
    return tf.train.Example(features=tf.train.Features(
        feature={name: feature(v) for name, v in features.items()})).SerializeToString()


def test_serialized_examples_are_checked_and_written_as_they_are(tmp_path):
    output = str(tmp_path / "serialized")
    good = [_tf_example(label=i % 4, speaker=f"s{i % 30}".encode(), duration_s=0.5 + i / 100)
            for i in range(90)]
    bad = [_tf_example(label=1, speaker=b"s1"),                    # no duration_s
           _tf_example(label=b"x", speaker=b"s1", duration_s=1.0),  # label not int64
           b"\x00\x01 not a proto"]
    with dg.make_pipeline() as p:
        _ = p | beam.Create(good + bad) | dg.WriteDataset(
            output, features="label:int64,speaker:bytes,duration_s:float", split_by="speaker",
            max_failure_fraction=0.05)
    info = json.load(open(os.path.join(output, "manifest.json")))
    _accounting_holds(info)
    _read_back(output, info)
    written = [r.numpy() for split in info["splits"].values() for s in split["shards"]
               for r in tf.data.TFRecordDataset(os.path.join(output, s["file"]))]
    assert sorted(written) == sorted(good)   # byte for byte
    letters = sorted((r["stage"], r["message"][:40]) for r in _dead_letters(output))
    assert [stage for stage, _ in letters] == ["encode", "encode", "parse"]
    assert "feature 'duration_s' is missing" in "".join(m for _, m in letters)
    assert sum(info["splits"][s]["durations"]["total_s"] for s in info["splits"]) == \
        pytest.approx(sum(0.5 + i / 100 for i in range(90)), abs=1e-2)


def test_runinference_embeddings_are_added_to_each_window_before_writing(tmp_path):
    from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
    from apache_beam.ml.inference.tensorflow_inference import TFModelHandlerNumpy

    corpus = tmp_path / "av"
    write_corpus(str(corpus), shards=2, samples_per_shard=4, speakers=8, kind="av", seconds=1.5)
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input((8000,)), tf.keras.layers.Reshape((50, 160)), tf.keras.layers.Dense(4),
        tf.keras.layers.GlobalAveragePooling1D()])
    model.save(str(tmp_path / "embedder.keras"))
    windows = dg.CutOptions(mode="audio_windows", audio_fields=("flac",),
                            windows=dg.WindowOptions(window_s=0.5))
    output = str(tmp_path / "embedded")
    with dg.make_pipeline() as p:
        read = p | dg.ReadTarSamples(f"{corpus}/*.tar")
        cut = read.samples | dg.CutSamples(windows)
        _ = (cut.examples
             | beam.Map(lambda window: (window, window["audio"]))
             | RunInference(KeyedModelHandler(
                 TFModelHandlerNumpy(str(tmp_path / "embedder.keras"))))
             | beam.MapTuple(lambda window, result: {**window, "emb": result.inference.numpy()})
             | dg.WriteDataset(output, split_by="json.speaker", splits="train=0.5,test=0.5",
                               features="audio:float32[8000],emb:float32[4],source_key:string,"
                                        "start_time:float", failures=[read, cut],
                               max_failure_fraction=0.5))
    info = json.load(open(os.path.join(output, "manifest.json")))
    _accounting_holds(info)
    _read_back(output, info)
    windows_written = [ex for split in info["splits"]
                       for ex in dg.load(output, split, batch_size=None).as_numpy_iterator()]
    assert len(windows_written) == 4 * 3   # the 4 samples with FLAC, 1.5 s in 0.5 s windows
    for ex in windows_written:
        np.testing.assert_allclose(ex["emb"], model(ex["audio"][None]).numpy()[0], rtol=1e-5,
                                   atol=1e-6)


def test_an_output_that_cannot_be_written_fails_before_any_work(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_bytes(b"not a folder")
    with pytest.raises(ValueError, match=r"^output '.*a_file/out' is not writable"):
        with dg.make_pipeline() as p:
            _ = p | beam.Create([{"label": 1}]) | dg.WriteDataset(
                str(blocker / "out"), features="label:int64")
    assert blocker.read_bytes() == b"not a folder"

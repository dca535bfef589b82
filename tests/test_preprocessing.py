"""tf.Transform preprocessing through the tar pipeline: statistics from the train split
only, every split transformed, the saved transform equal to the written values in Keras,
exact accounting, and flag errors before any work."""

import glob
import io
import json
import os
import shutil
import subprocess
import tarfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.coders import example_coder
from tfx_bsl.public import tfxio

from pipelines import inspect, tar_to_tfrecord
from transforms.format import manifest, reader
from transforms.format.encoder import ExampleEncoder
from transforms.format.sample import FieldReader
from transforms.format.spec import Feature, FeatureSpec, parse_features
from transforms.media.cutting import CutOptions
from transforms.recipe.examples import Example, ExampleRecipe
from transforms.recipe.splits import SplitPlan
from transforms.recipe.units import WorkUnit
from transforms.sources.tar import TarReader
from transforms.tft.preprocessing import (
    RAW_METADATA_DIR,
    TRANSFORM_FN_DIR,
    TRANSFORMED_METADATA_DIR,
    Preprocessing,
)
from transforms.tft.stage import (
    ExampleTransformer,
    _rows,
    _TrainExamplesFn,
    analyzed_features,
    record_batch,
    transformed_spec,
)
from transforms.verify.dataset import verify_dataset

pytestmark = pytest.mark.slow  # tf.Transform analysis runs

FEATURES = ("key=__key__:string,payload=bin:bytes,label=cls:int64,speaker=json.speaker:string,"
            "gain=json.gain:float,score=json.score:double,age=json.age:int32,"
            "lang=json.lang:string,flag=json.flag:bool")
SPLITS = "train=0.6,eval=0.2,test=0.2"
SPEAKERS, PER_SPEAKER = 16, 5
BUILTINS = ["--normalize", "gain=zscore,score=0_1", "--vocabulary", "lang", "--bucketize", "age=4"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """One tar shard, 16 speakers x 5 samples, made here with tarfile.

    Values are drawn so that train and the other splits differ: non-train
    speakers' gains are 50 higher, and only they speak 'xx'. Sample 0's label
    is 'unknown' (a dead letter). Returns (tar directory, {key: (cls, meta)}).
    """
    plan = SplitPlan.from_flags(SPLITS, "json.speaker")
    rng = np.random.default_rng(5)
    root = tmp_path_factory.mktemp("corpus")
    truth = {}
    with tarfile.open(root / "corpus-00000.tar", "w") as tar:
        for index in range(SPEAKERS * PER_SPEAKER):
            speaker = f"spk{index % SPEAKERS:02d}"
            train = plan.split_of(speaker) == "train"
            meta = {"speaker": speaker,
                    "gain": round(float(rng.normal(10, 2)) + (0 if train else 50), 4),
                    "score": float(rng.uniform(0, 100)), "age": int(rng.integers(18, 80)),
                    "lang": str(rng.choice(["en", "en", "fr", "de"] if train else ["en", "xx"])),
                    "flag": bool(index % 3)}
            key = f"{speaker}_{index:04d}"
            cls = b"unknown" if index == 0 else str(index % 7).encode()
            truth[key] = (cls, meta)
            for ext, data in (("bin", rng.bytes(16)), ("cls", cls),
                              ("json", json.dumps(meta).encode())):
                member = tarfile.TarInfo(f"{key}.{ext}")
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
    assert {plan.split_of(f"spk{s:02d}") for s in range(SPEAKERS)} == {"train", "eval", "test"}
    return root, truth


def _run(corpus, output, *flags):
    return tar_to_tfrecord.run([
        "--input", f"{corpus[0]}/*.tar", "--output", str(output), "--features", FEATURES,
        "--split_by", "json.speaker", "--splits", SPLITS, "--shard_size_mb", "0.002",
        "--max_failure_fraction", "0.05", *flags])


@pytest.fixture(scope="module")
def transformed(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("built") / "dataset"
    return str(output), _run(corpus, output, *BUILTINS)


def _by_split(output):
    """{split: [example dict of numpy values]} read back with the reader."""
    info = reader.load_info(output)
    return {split: [{k: v.numpy() for k, v in ex.items()}
                    for ex in reader.load(output, split, batch_size=None)]
            for split in info.splits}


def _raw(corpus, example, field):
    return corpus[1][example["key"].decode()][1][field]


def test_manifest_records_the_transform_and_accounting_holds(corpus, transformed):
    output, info = transformed
    section = info["transform"]
    assert section["analyzed_split"] == "train"
    assert section["normalize"] == {"gain": "zscore", "score": "0_1"}
    assert section["vocabulary"] == ["lang"] and section["bucketize"] == {"age": 4}
    # By default the shards hold the raw features and readers apply the transform.
    assert section["applied"] == "at_read"
    assert FeatureSpec.from_json(section["raw_features"]) == parse_features(FEATURES)
    assert FeatureSpec.from_json(info["features"]) == parse_features(FEATURES)
    assert 'name: "lang"\n  type: BYTES' in (
        open(os.path.join(output, "schema.pbtxt")).read())
    # What a reader gets, in the raw order; passed-through features keep their
    # declared dtype (flag stays bool, key stays string).
    assert [(f["name"], f["dtype"]) for f in section["transformed_features"]] == [
        ("key", "string"), ("payload", "bytes"), ("label", "int64"), ("speaker", "string"),
        ("gain", "float"), ("score", "float"), ("age", "int64"), ("lang", "int64"),
        ("flag", "bool")]
    assert section["passed_through"] == ["flag", "key", "label", "payload", "speaker"]

    tft_output = tft.TFTransformOutput(output)
    assert sorted(tft_output.transformed_feature_spec()) == sorted(
        f["name"] for f in section["transformed_features"])
    assert sorted(tft_output.raw_feature_spec()) == sorted(parse_features(FEATURES).names)
    assert not [p for p in os.listdir(output) if p.startswith(".temp")]
    described = inspect.describe_dataset(output, examples=0)
    assert ('transform: {"bucketize": {"age": 4}, "normalize": {"gain": "zscore", "score": '
            '"0_1"}, "vocabulary": ["lang"]}, statistics of train, in transform_fn/, applied '
            'as the shards are read: they hold the raw features; raw features: key, payload, '
            'label') in described
    assert "    lang                 int64" in described

    acc = info["accounting"]
    assert (acc["samples_read"], acc["samples_written"], acc["samples_failed"]) == (80, 79, 1)
    assert acc["samples_read"] == (acc["samples_written"] + acc["samples_filtered"]
                                   + acc["samples_failed"])
    for name, split in info["splits"].items():
        records = sum(1 for s in split["shards"] for _ in tf.data.TFRecordDataset(
            os.path.join(output, s["file"])))
        assert records == split["num_examples"] == acc["examples_per_split"].get(name, 0)


def test_normalize_uses_train_statistics_on_every_split(corpus, transformed):
    splits = _by_split(transformed[0])
    raw = {s: np.array([_raw(corpus, ex, "gain") for ex in exs], np.float32)
           for s, exs in splits.items()}
    gain = {s: np.array([ex["gain"] for ex in exs]) for s, exs in splits.items()}
    assert gain["train"].mean() == pytest.approx(0, abs=1e-5)
    assert gain["train"].std() == pytest.approx(1, rel=1e-4)
    mean, std = raw["train"].astype(np.float64).mean(), raw["train"].astype(np.float64).std()
    for split in ("eval", "test"):
        np.testing.assert_allclose(gain[split], (raw[split] - mean) / std, rtol=1e-4)
        # Their own statistics would have centred them; train's leave them ~25 std up.
        assert gain[split].mean() > 10

    score = {s: np.array([ex["score"] for ex in exs]) for s, exs in splits.items()}
    raw_score = {s: np.array([_raw(corpus, ex, "score") for ex in exs], np.float32)
                 for s, exs in splits.items()}
    low, high = raw_score["train"].min(), raw_score["train"].max()
    assert (score["train"].min(), score["train"].max()) == pytest.approx((0, 1), abs=1e-6)
    for split in ("eval", "test"):
        np.testing.assert_allclose(score[split], (raw_score[split] - low) / (high - low),
                                   rtol=1e-4, atol=1e-6)


def test_vocabulary_and_buckets_come_from_the_train_split_only(corpus, transformed):
    output, _ = transformed
    splits = _by_split(output)
    vocabulary = [v.decode() for v in reader.transform_output(output).vocabulary_by_name("lang")]
    assert sorted(vocabulary) == sorted({_raw(corpus, ex, "lang") for ex in splits["train"]})
    assert "xx" not in vocabulary
    seen_xx = 0
    for ex in (ex for exs in splits.values() for ex in exs):
        lang = _raw(corpus, ex, "lang")
        assert ex["lang"] == (vocabulary.index(lang) if lang in vocabulary else -1)
        seen_xx += lang == "xx"
    assert seen_xx  # the unseen value is there, and maps to -1

    ages = sorted((_raw(corpus, ex, "age"), ex["age"]) for exs in splits.values() for ex in exs)
    buckets = [b for _, b in ages]
    assert buckets == sorted(buckets)  # monotone in age, across all splits
    assert {ex["age"] for ex in splits["train"]} == {0, 1, 2, 3}


def _raw_examples(corpus, keys):
    """The raw tf.Examples of `keys`, encoded from the corpus values as the pipeline does."""
    spec = parse_features(FEATURES)
    encoder = ExampleEncoder([(f.name, f.kind) for f in spec])
    out = []
    for key in keys:
        cls, meta = corpus[1][key]
        fields = FieldReader({"__key__": key, "cls": cls, "bin": b"",
                              "json": json.dumps(meta).encode()})
        out.append(encoder.encode({f.name: f.coerce(fields.get(f.source)) for f in spec}))
    return out


def test_verify_checks_the_published_transform_against_the_manifest(transformed, tmp_path):
    output, _ = transformed
    assert verify_dataset(output).problems == []
    copy = str(tmp_path / "copy")
    shutil.copytree(output, copy)
    path = os.path.join(copy, manifest.MANIFEST)
    document = json.load(open(path))
    document["transform"]["transformed_features"] = [
        dict(f, dtype="float") if f["name"] == "lang" else f
        for f in document["transform"]["transformed_features"]]
    json.dump(document, open(path, "w"))
    [problem] = verify_dataset(copy).problems
    assert problem.startswith("transform_fn/: gives ") and "('lang', 'int64')" in problem
    assert problem.endswith("the manifest says a reader gets [('age', 'int64'), ('flag', "
                            "'int64'), ('gain', 'float'), ('key', 'bytes'), ('label', 'int64'), "
                            "('lang', 'float'), ('payload', 'bytes'), ('score', 'float'), "
                            "('speaker', 'bytes')]")
    shutil.rmtree(os.path.join(copy, "transform_fn"))
    assert any(p.startswith("transform_fn/: does not load")
               for p in verify_dataset(copy).problems)


def test_saved_transform_in_keras_gives_exactly_the_transformed_values(corpus, transformed):
    import tf_keras

    output, _ = transformed
    written = [ex for exs in _by_split(output).values() for ex in exs]
    tft_output = reader.transform_output(output)
    raw_spec = tft_output.raw_feature_spec()
    inputs = {name: tf_keras.Input(shape=spec.shape, dtype=spec.dtype, name=name)
              for name, spec in raw_spec.items()}
    model = tf_keras.Model(inputs, tft_output.transform_features_layer()(inputs))

    serialized = _raw_examples(corpus, [ex["key"].decode() for ex in written])
    served = model(tf.io.parse_example(serialized, raw_spec))
    for name in ("gain", "score", "lang", "age"):
        np.testing.assert_array_equal(served[name].numpy(), [ex[name] for ex in written],
                                      err_msg=name)
    assert [k.decode() for k in served["key"].numpy()] == [ex["key"].decode() for ex in written]


def gain_features(inputs):
    """--preprocessing_fn for the test below: only its outputs are written."""
    return {"key": inputs["key"], "gain_centred": inputs["gain"] - tft.mean(inputs["gain"]),
            "lang_id": tft.compute_and_apply_vocabulary(inputs["lang"], num_oov_buckets=1)}


def _records(output: str) -> dict:
    """{split: its records' bytes, sorted}, read with TensorFlow's reader."""
    info = reader.load_info(output)
    return {split: sorted(record.numpy() for record in tf.data.TFRecordDataset(
                sorted(glob.glob(os.path.join(output, split, "data-*.tfrecord")))))
            for split in info.splits}


def test_materialized_shards_hold_what_the_reader_computes_at_read_time(
        corpus, transformed, tmp_path):
    """--materialize_transform fits the transform on the train examples' analyzed
    features as the converter builds them and applies it to the written shards
    (TFX's shape); the global layout fits it by a pass over the input and
    applies it while converting. Same records; and the default, raw shards
    with the transform applied by the reader, reads back as the same values."""
    output, _ = transformed
    materialized = _run(corpus, tmp_path / "materialized", *BUILTINS, "--materialize_transform")
    assert materialized["transform"]["applied"] == "in_shards"
    assert materialized["features"] == materialized["transform"]["transformed_features"]
    _run(corpus, tmp_path / "global", *BUILTINS, "--shuffle", "global",
         "--direct_num_workers", "1")
    records = _records(str(tmp_path / "materialized"))
    assert sum(map(len, records.values())) == 79 and records == _records(str(tmp_path / "global"))

    def values(path):  # {split: [(key, each feature's dtype and bytes)]}, sorted
        arrays = {split: [{k: np.asarray(v) for k, v in ex.items()} for ex in examples]
                  for split, examples in _by_split(path).items()}
        return {split: sorted((ex["key"].tobytes(), tuple((k, v.dtype.str, v.tobytes())
                                                          for k, v in sorted(ex.items())))
                              for ex in examples)
                for split, examples in arrays.items()}
    assert values(output) == values(str(tmp_path / "materialized"))
    # Only features the transform passes through: read as they are.
    keys = [ex["key"] for ex in reader.load(output, "train", batch_size=None,
                                            features=["key", "flag"])]
    assert len(keys) == materialized["splits"]["train"]["num_examples"]
    assert sum(map(len, _records(output).values())) == 79


def test_a_users_preprocessing_fn(corpus, tmp_path):
    output = tmp_path / "user"
    info = _run(corpus, output, "--preprocessing_fn", f"{__name__}:gain_features")
    assert info["transform"]["preprocessing_fn"] == f"{__name__}:gain_features"
    assert [(f["name"], f["dtype"]) for f in info["transform"]["transformed_features"]] == [
        ("key", "bytes"), ("gain_centred", "float"), ("lang_id", "int64")]  # its tensors' kinds
    splits = _by_split(str(output))
    train_mean = np.mean([_raw(corpus, ex, "gain") for ex in splits["train"]], dtype=np.float32)
    for ex in (ex for exs in splits.values() for ex in exs):
        assert ex["gain_centred"] == pytest.approx(_raw(corpus, ex, "gain") - train_mean, abs=1e-4)
    # 'xx' is out of vocabulary: the one OOV bucket, after the train languages.
    train_langs = {_raw(corpus, ex, "lang") for ex in splits["train"]}
    assert {ex["lang_id"] for exs in splits.values() for ex in exs
            if _raw(corpus, ex, "lang") == "xx"} == {len(train_langs)}
    assert sum(s["num_examples"] for s in info["splits"].values()) == 79

    # A rerun without preprocessing leaves no transform of the earlier run behind.
    plain = _run(corpus, output)
    assert "transform" not in plain and [f["name"] for f in plain["features"]] == [
        f.name for f in parse_features(FEATURES)]
    assert not {"transform_fn", "transformed_metadata", "metadata"} & set(os.listdir(output))
    with pytest.raises(ValueError, match="built without preprocessing"):
        reader.transform_output(str(output))



def test_features_passed_through_keep_their_bytes_without_a_parse(transformed):
    """The converter's transformer keeps the raw bytes of what the built-ins pass
    through: the same examples as parsing and encoding everything again."""
    output, _ = transformed
    raw_spec = parse_features(FEATURES)
    passed = Preprocessing.from_flags(normalize="gain=zscore,score=0_1", vocabulary="lang",
                                      bucketize="age=4").passed_through(raw_spec)
    assert passed == {"key", "payload", "label", "speaker", "flag"}
    spec = transformed_spec(tft.TFTransformOutput(output).transformed_metadata.schema, raw_spec,
                            passed)
    encoder = ExampleEncoder([(f.name, f.kind) for f in raw_spec])
    raw = [Example("train", i, encoder.encode({f.name: f.coerce(value) for f, value in zip(
        raw_spec, [f"k{i}", bytes([i]) * 9, i, f"spk{i}", 1.5 * i, 10.0 * i, 20 + i,
                   ["en", "fr", "xx"][i], i % 2 == 0])})) for i in range(3)]

    def transformed_bytes(passed_through):
        transformer = ExampleTransformer(output, raw_spec, spec, passed_through)
        return [e.serialized for e in transformer.add(raw[0]) + transformer.add(raw[1])
                + transformer.add(raw[2]) + transformer.flush()]

    kept = transformed_bytes(passed)
    assert kept == transformed_bytes(frozenset())
    assert tf.train.Example.FromString(kept[1]).features.feature["payload"].bytes_list.value == [
        bytes([1]) * 9]


def test_vocabularies_of_two_key_types_in_one_process(corpus, tmp_path):
    # A notebook's two jobs: tf.Transform's lookup tables of the first (string
    # keys) must not outlive it and clash with the second's (int64 keys).
    _run(corpus, tmp_path / "lang", "--vocabulary", "lang")
    info = _run(corpus, tmp_path / "label", "--vocabulary", "label")
    labels = {int(ex["label"]) for exs in _by_split(str(tmp_path / "label")).values()
              for ex in exs}
    assert info["transform"]["vocabulary"] == ["label"] and labels <= set(range(-1, 7))


def test_analysis_of_a_media_corpus_encodes_only_what_the_analyzers_read(tmp_path):
    """FLACs of 1-6 s made by sox, cut into 1 s windows: a z-score of a JSON
    number weights each sample by its windows, and the analysis pass builds
    every window but encodes the number alone."""
    files = tmp_path / "files"
    files.mkdir()
    gains = {}
    for i, seconds in enumerate([1, 6, 2, 5, 3, 4]):
        subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", "-b", "16",
                        str(files / f"s{i}.flac"), "synth", str(seconds), "sine", "300"],
                       check=True)
        gains[f"s{i}"] = 2.0 ** i
        (files / f"s{i}.json").write_text(json.dumps({"gain": gains[f"s{i}"]}))
    subprocess.run(["tar", "-cf", str(tmp_path / "a.tar"), *sorted(os.listdir(files))],
                   check=True, cwd=files)
    flags = ["--input", str(tmp_path / "a.tar"), "--cut", "audio_windows", "--audio_fields",
             "flac", "--features", "gain=json.gain:float", "--splits", "train=1"]
    tar_to_tfrecord.run([*flags, "--output", str(tmp_path / "plain")])
    tar_to_tfrecord.run([*flags, "--output", str(tmp_path / "zscore"), "--normalize",
                         "gain=zscore"])
    plain, scored = (_by_split(str(tmp_path / name))["train"] for name in ("plain", "zscore"))
    order = [(ex["source_key"], float(ex["start_time"])) for ex in plain]
    assert order == [(ex["source_key"], float(ex["start_time"])) for ex in scored]
    assert len(plain) == 21
    raw = np.array([ex["gain"] for ex in plain], np.float64)
    expected = (raw - raw.mean()) / raw.std()        # over the windows, not the samples
    np.testing.assert_allclose([ex["gain"] for ex in scored], expected, rtol=1e-5)
    for a, b in zip(plain, scored):
        np.testing.assert_array_equal(a["audio"], b["audio"])

    # The analysis pass itself: every window built, the analyzed feature alone encoded.
    cut = CutOptions(mode="audio_windows", audio_fields=("flac",))
    spec = FeatureSpec((*cut.features, Feature("gain", "float", source="json.gain")))
    recipe = ExampleRecipe(spec=spec, split_plan=SplitPlan.from_flags("train=1", "__key__"),
                           cut=cut)
    source = tfxio.TFExampleBeamRecord(physical_format="tfrecord",
                                       schema=manifest.schema_proto(spec))
    adapter = tfxio.TensorAdapterConfig(source.ArrowSchema(), source.TensorRepresentations())
    analyzed = analyzed_features(Preprocessing(normalize=(("gain", "zscore"),))
                                 .preprocessing_fn(), adapter)
    assert analyzed == {"gain"}
    analysis = _TrainExamplesFn(TarReader(), recipe, analyzed)
    analysis.setup()
    built = [tf.train.Example.FromString(serialized) for serialized in
             analysis.process(WorkUnit(0, (str(tmp_path / "a.tar"),), 0))]
    assert len(built) == 21 and all(set(ex.features.feature) == {"gain"} for ex in built)
    assert sorted(ex.features.feature["gain"].float_list.value[0] for ex in built) == sorted(raw)


def test_a_rerun_without_preprocessing_removes_the_transform_in_a_bucket(corpus, gcs_emulator,
                                                                          tmp_path):
    # An earlier run's transform under gs://, as objects only: a bucket has no
    # directory objects, so `transform_fn` itself does not "exist" there.
    old = tmp_path / "old"
    old.write_bytes(b"earlier run")
    for name in ("transform_fn/saved_model.pb", "transform_fn/variables/variables.index",
                 "transformed_metadata/schema.pbtxt", "metadata/schema.pbtxt"):
        gcs_emulator.upload(old, f"rerun/ds/{name}")
    info = _run(corpus, gcs_emulator.url("rerun/ds"))
    assert "transform" not in info
    left = {name.split("/")[0] for name in gcs_emulator.objects("rerun/ds/")}
    assert not left & {TRANSFORM_FN_DIR, TRANSFORMED_METADATA_DIR, RAW_METADATA_DIR}


@pytest.mark.parametrize("flags, message", [
    (["--preprocessing_fn", "no_such_module:fn"], "--preprocessing_fn .*cannot import"),
    (["--preprocessing_fn", f"{__name__}:missing"], "has no function 'missing'"),
    (["--preprocessing_fn", f"{__name__}:gain_features", "--vocabulary", "lang"],
     "cannot be combined"),
    (["--normalize", "nope=zscore"], "--normalize 'nope': no such feature"),
    (["--normalize", "gain=minmax"], "method must be zscore or 0_1"),
    (["--normalize", "lang=zscore"], "--normalize 'lang': a string feature"),
    (["--vocabulary", "gain"], "--vocabulary 'gain': a float feature"),
    (["--bucketize", "age=1"], "integer >= 2"),
    (["--normalize", "gain=zscore", "--bucketize", "gain=3"], "already has a built-in"),
    (["--vocabulary", "lang", "--splits", "a=0.5,b=0.5"], "analyzes the 'train' split"),
    (["--materialize_transform"], "--materialize_transform writes a transform's outputs: give "
                                  "--preprocessing_fn"),
])
def test_bad_preprocessing_flags_fail_before_any_work(corpus, tmp_path, flags, message):
    with pytest.raises(ValueError, match=message):
        _run(corpus, tmp_path / "bad", *flags)
    assert not (tmp_path / "bad").exists()


def test_from_python_the_errors_name_the_parameters():
    """The same checks, from Python: each names the Preprocessing parameter."""
    spec = FeatureSpec.parse("gain:float,lang:string")
    with pytest.raises(ValueError, match="^preprocessing.normalize 'nope': no such feature"):
        Preprocessing(normalize=(("nope", "zscore"),)).check(spec, ["train"])
    with pytest.raises(ValueError, match="^preprocessing.vocabulary 'gain': a float feature; "
                                         "preprocessing.vocabulary takes"):
        Preprocessing(vocabulary=("gain",)).check(spec, ["train"])
    with pytest.raises(ValueError, match="^preprocessing.fn cannot be combined with "
                                         "preprocessing.normalize"):
        Preprocessing(fn="json:dumps", normalize=(("gain", "zscore"),)).check(spec, ["train"])


# -- the stage's pure functions ----------------------------------------------------


def test_layout_is_tf_transforms():
    # transforms.tft.preprocessing names the directories without importing tf.Transform.
    assert (TRANSFORM_FN_DIR, TRANSFORMED_METADATA_DIR, RAW_METADATA_DIR) == (
        tft.TFTransformOutput.TRANSFORM_FN_DIR, tft.TFTransformOutput.TRANSFORMED_METADATA_DIR,
        tft.TFTransformOutput.RAW_METADATA_DIR)


def test_the_analysis_batches_are_what_tfx_bsls_decoder_gives():
    """record_batch takes float features' columns from their packed bytes: the
    same RecordBatch as decoding every example with tfx_bsl."""
    spec = parse_features("audio:float32[400],gain:float,v:float32[*],label:int64,s:string")
    schema = manifest.schema_proto(spec).SerializeToString()
    encoder = ExampleEncoder([(f.name, f.kind) for f in spec])
    rng = np.random.default_rng(0)
    serialized = [ExampleEncoder.kept(encoder.encode(
        {"audio": rng.normal(size=400).astype(np.float32), "gain": [1.5 * i],
         "v": rng.normal(size=i % 3), "label": [i], "s": [b"x"]}),
        frozenset({b"audio", b"gain", b"v", b"label"})) for i in range(7)]
    decoder = example_coder.ExamplesToRecordBatchDecoder(schema)
    expected = decoder.DecodeBatch(serialized)
    for floats in ({b"audio", b"gain", b"v"}, {b"audio"}, set()):
        batch = record_batch(serialized, decoder, frozenset(floats))
        assert batch.equals(expected) and batch.schema == expected.schema, floats
    assert expected.column(2).to_pylist()[3] == []   # an empty list stays one


def test_transformed_batches_become_per_example_values_that_encode_back():
    spec = parse_features("x:float,ids:int64[*],s:bytes,grid:float[2,2]")
    encoder = ExampleEncoder([(f.name, f.kind) for f in spec])
    values = [{"x": [i / 2], "ids": list(range(i)), "s": [f"s{i}".encode()],
               "grid": np.full(4, i, np.float32)} for i in range(5)]
    serialized = [encoder.encode(v) for v in values]
    parsed = tf.io.parse_example(serialized, {
        "x": tf.io.FixedLenFeature([], tf.float32), "ids": tf.io.VarLenFeature(tf.int64),
        "s": tf.io.FixedLenFeature([], tf.string),
        "grid": tf.io.FixedLenFeature([2, 2], tf.float32)})
    columns = {name: _rows(parsed[name]) for name in spec.names}
    # Dense, sparse (empty rows too), string and multi-dimensional features alike
    # give each example's flat values, which encode back to the very bytes.
    assert [encoder.encode({n: columns[n][i] for n in spec.names}) for i in range(5)] == serialized


def test_transformed_spec_keeps_declared_dtypes_of_passed_through_features():
    raw = parse_features("flag:bool,img:jpeg[8,8,3],n:int32,x:double,ids:int32[*]")
    # What tf.Transform would write: every output as its tf.Example kind.
    schema = manifest.schema_proto(parse_features(
        "x:float,n:float,img:bytes,flag:int64,ids:int64[*],bucket:int64[2]"))
    spec = transformed_spec(schema, raw, frozenset({"flag", "img", "ids"}))
    assert [(f.name, f.dtype, f.shape) for f in spec] == [
        ("flag", "bool", ()), ("img", "jpeg", (8, 8, 3)), ("n", "float", ()),
        ("x", "float", ()), ("ids", "int32", (None,)), ("bucket", "int64", (2,))]
    assert spec.features[1] == Feature("img", "jpeg", (8, 8, 3))
    # Without pass-through (a user's preprocessing_fn) every output is its stored kind.
    assert [f.dtype for f in transformed_spec(schema, raw)] == [
        "int64", "bytes", "float", "float", "int64", "int64"]


def test_unsupported_outputs_are_refused():
    schema = schema_pb2.Schema()
    feature = schema.feature.add(name="m", type=schema_pb2.FLOAT)
    feature.value_count.min = 0
    feature.value_count.max = 0
    schema.tensor_representation_group[""].tensor_representation["m"].ragged_tensor.feature_path.step.append("m")
    with pytest.raises(ValueError, match="'m' is a RaggedFeature"):
        transformed_spec(schema, parse_features("x:float"))

"""Text members as other tools write them, read by one rule everywhere.

`echo 3 > KEY.cls` writes `3\\n`; Windows tools write `\\ufeff3\\r\\n`; hand-edited
CSV cells carry spaces. The corpus here is made the way such corpora are: each
member written by bash's `printf` (trailing LF, CRLF, a UTF-8 byte-order mark,
surrounding spaces and tabs) and packed by GNU tar. Whatever reads a member as
text - numbers, bools, split keys, labels and their counts, `--where`,
`--split_column`, `--stratify_by`, `string` features, TFDS's ClassLabel and
the schema built from the label counts, the report - must see the same value
the feature gets.
"""

import io
import json
import subprocess

import numpy as np
import pytest
import webdataset
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipelines import tar_to_tfrecord
from transforms.format import reader
from transforms.format.infer import infer_spec
from transforms.format.sample import FieldReader, field_text
from transforms.format.spec import Feature, parse_features
from transforms.recipe.sample_ops import matches_where
from transforms.recipe.splits import SplitPlan
from transforms.report.gather import gather

# printf formats: the same value as LF-ended (echo), CRLF-ended, BOM + CRLF (Notepad,
# PowerShell) and padded with spaces and a tab.
WRAPPINGS = (r"%s\n", r"%s\r\n", r"\xef\xbb\xbf%s\r\n", r" %s \t")
SAMPLES = 24
CLASSES = 4


def _value(i: int, kind: str) -> str:
    return {"cls": str(i % CLASSES), "spk": f"spk{i % 6}", "lang": "fr" if i % 5 == 0 else "en",
            "split": ("train", "Test", "validation")[i % 3]}[kind]


def _printf(fmt_index: int, text: str) -> str:
    return f"printf '{WRAPPINGS[fmt_index % len(WRAPPINGS)]}' '{text}'"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two tars by GNU tar of members written by printf, each text member in one of
    the four wrappings (rotated per sample and per member)."""
    root = tmp_path_factory.mktemp("printf_corpus")
    lines = ["set -e", f"cd {root}"]
    for i in range(SAMPLES):
        key = f"s{i:02d}"
        lines.append(f"printf 'payload %d' {i} > {key}.bin")
        for j, kind in enumerate(("cls", "spk", "lang", "split")):
            lines.append(f"{_printf(i + j, _value(i, kind))} > {key}.{kind}")
    half = SAMPLES // 2
    for name, keys in (("a", range(half)), ("b", range(half, SAMPLES))):
        members = " ".join(f"s{i:02d}.{ext}" for i in keys
                           for ext in ("bin", "cls", "lang", "spk", "split"))
        lines.append(f"tar --format=gnu -cf {name}.tar {members}")
    subprocess.run(["bash", "-c", "\n".join(lines)], check=True)
    cls = (root / "s02.cls").read_bytes()
    assert cls == b"\xef\xbb\xbf2\r\n", cls  # the wrappings are really in the corpus
    return root


def _run(corpus, output, *flags):
    return tar_to_tfrecord.run([
        "--input", f"{corpus}/*.tar", "--output", str(output),
        "--features", "payload=bin:bytes,label=cls:int64,speaker=spk:string,raw_lang=lang:bytes",
        "--split_by", "spk", *flags])


def _examples(output, info) -> dict:
    """payload -> (split, example) of every example, read back with our reader."""
    return {bytes(ex["payload"]): (split, ex) for split in info["splits"]
            for ex in reader.load(str(output), split, batch_size=None).as_numpy_iterator()}


@pytest.fixture(scope="module")
def labelled(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("labelled") / "ds"
    info = _run(corpus, output, "--label_field", "cls", "--where", "lang=en",
                "--splits", "train=0.5,test=0.5")
    return output, info


def test_label_counts_and_classes_use_the_label_the_feature_holds(labelled):
    import tensorflow_datasets as tfds

    output, info = labelled
    english = [i for i in range(SAMPLES) if _value(i, "lang") == "en"]
    counts = {label: n for split in info["splits"].values()
              for label, n in split["label_counts"].items()}
    assert set(counts) <= {str(c) for c in range(CLASSES)}
    expected = {}
    for i in english:
        expected[_value(i, "cls")] = expected.get(_value(i, "cls"), 0) + 1
    totals = {}
    for split in info["splits"].values():
        for label, n in split["label_counts"].items():
            totals[label] = totals.get(label, 0) + n
    assert totals == expected
    assert sorted(int(ex["label"]) for _, ex in _examples(output, info).values()) == sorted(
        int(_value(i, "cls")) for i in english)

    label = tfds.builder_from_directory(str(output)).info.features["label"]
    assert isinstance(label, tfds.features.ClassLabel) and label.num_classes == CLASSES
    schema = text_format.Parse((output / "schema.pbtxt").read_text(), schema_pb2.Schema())
    domain = next(f for f in schema.feature if f.name == "label").int_domain
    assert (domain.min, domain.max, domain.is_categorical) == (0, CLASSES - 1, True)
    view = gather(str(output))
    assert {k for s in view.splits for k in s.label_counts} == set(expected)


def test_where_split_keys_and_string_features_read_the_stripped_text(corpus, labelled):
    output, info = labelled
    english = [i for i in range(SAMPLES) if _value(i, "lang") == "en"]
    assert info["accounting"]["samples_filtered_per_reason"] == {"where": SAMPLES - len(english)}
    examples = _examples(output, info)
    assert len(examples) == len(english)
    plan = SplitPlan.from_flags("train=0.5,test=0.5", "spk")
    for i in english:
        split, ex = examples[f"payload {i}".encode()]
        assert ex["speaker"] == _value(i, "spk").encode()        # a string feature: the text
        assert split == plan.split_of(_value(i, "spk"))           # the group key: the same text
        # A bytes feature keeps the member's bytes exactly as stored.
        assert ex["raw_lang"] == (corpus / f"s{i:02d}.lang").read_bytes()
    for name, split in info["splits"].items():
        assert split["num_groups"] == len({_value(i, "spk") for i in english
                                           if plan.split_of(_value(i, "spk")) == name})


def test_split_column_and_stratify_by_read_the_stripped_text(corpus, tmp_path):
    named = _run(corpus, tmp_path / "named", "--split_column", "split",
                 "--splits", "train=0.4,eval=0.3,test=0.3")
    by_payload = _examples(tmp_path / "named", named)
    for i in range(SAMPLES):
        split, _ = by_payload[f"payload {i}".encode()]
        assert split == {"train": "train", "Test": "test", "validation": "eval"}[_value(i, "split")]

    stratified = _run(corpus, tmp_path / "strata", "--stratify_by", "cls",
                      "--splits", "train=0.5,test=0.5")
    labels = {label for s in stratified["splits"].values() for label in s["label_counts"]}
    assert labels == {str(c) for c in range(CLASSES)}


@pytest.mark.parametrize("wrapping", ["{}\n", "{}\r\n", "\ufeff{}\r\n", " \t{} ", "{}"])
def test_every_text_reader_sees_one_value(wrapping):
    def member(text: str) -> bytes:
        return wrapping.format(text).encode("utf-8")

    assert field_text(member("spk 01")) == "spk 01"  # inner spaces are the value's
    assert Feature("n", "int64").coerce(member("3")).tolist() == [3]
    assert Feature("n", "int64", (None,)).coerce(member("1, 2 3")).tolist() == [1, 2, 3]
    assert Feature("x", "float").coerce(member("1.5")).tolist() == [1.5]
    assert Feature("b", "bool").coerce(member("True")).tolist() == [1]
    assert Feature("s", "string").coerce(member("spk01")) == [b"spk01"]
    assert Feature("r", "bytes").coerce(member("spk01")) == [member("spk01")]
    plan = SplitPlan.from_flags("train=0.5,eval=0.5", "spk", split_column="split",
                                label_field="cls")
    sample = {"__key__": "k", "spk": member("spk01"), "split": member("Validation"),
              "cls": member("3")}
    assert plan.assign(sample) == ("eval", "spk01", "3")
    assert matches_where(sample, (("cls", "3"),)) and not matches_where(sample, (("cls", "4"),))


@pytest.mark.parametrize("text", ["3", "03", "+3", "3.0", "3e0", "0.3e1"])
def test_a_label_under_an_integer_feature_is_the_integer_it_holds(text):
    spec = parse_features("label=cls:int64,speaker=spk:string")
    plan = SplitPlan.from_flags("train=1", "spk", label_field="cls", spec=spec)
    sample = {"__key__": "k", "spk": b"s", "cls": f"{text}\r\n".encode()}
    assert Feature("label", "int64", source="cls").coerce(sample["cls"]).tolist() == [3]
    assert plan.assign(sample)[2] == "3"
    assert matches_where(sample, (("cls", "3"),)) and matches_where(sample, (("cls", "3.00"),))
    assert not matches_where(sample, (("cls", "4"),)) and not matches_where(sample, (("cls", "x"),))
    # Without an integer feature reading it, a label is its text.
    assert SplitPlan.from_flags("train=1", "spk", label_field="cls").assign(sample)[2] == text


@pytest.mark.parametrize("text, value", [("9007199254740993.0", 9007199254740993),
                                         ("-12e2", -1200)])
def test_integral_text_is_read_exactly(text, value):
    assert Feature("n", "int64").coerce(text.encode()).tolist() == [value]


@pytest.mark.parametrize("text", ["3.5", "nan", "inf", "three", "1e400"])
def test_text_that_is_no_integer_is_a_dead_letter(text):
    with pytest.raises(ValueError, match="is not int64"):
        Feature("n", "int64").coerce(text.encode())


def test_a_bom_before_json_and_a_value_that_is_only_whitespace(tmp_path):
    sample = {"json": b"\xef\xbb\xbf" + json.dumps({"speaker": " spk01\n"}).encode() + b"\r\n"}
    plan = SplitPlan.from_flags("train=1", "json.speaker")
    assert plan.group_key(sample, FieldReader(sample)) == "spk01"
    with pytest.raises(ValueError, match="has 0 values"):
        Feature("n", "int64").coerce(b" \r\n")
    assert np.array_equal(Feature("n", "int64", (None,)).coerce(b"\r\n"), [])


def test_arrays_webdatasets_tarwriter_stores_as_npy(tmp_path):
    """WebDataset's own encoder writes numpy arrays as `.npy` members and ints as
    text: both read back as the values given to it."""
    embeddings = {f"k{i}": np.arange(4, dtype=np.float32) * (i + 0.5) for i in range(6)}
    with webdataset.TarWriter(str(tmp_path / "wds.tar")) as sink:
        for i, (key, emb) in enumerate(embeddings.items()):
            sink.write({"__key__": key, "emb.npy": emb, "pcm.npy": (emb * 100).astype(np.int16),
                        "cls": i % 3, "ok.npy": emb > 1})
        sink.write({"__key__": "objects", "emb.npy": np.array([{}], dtype=object),
                    "pcm.npy": np.zeros(4, np.int16), "cls": 0, "ok.npy": np.ones(4, bool)})
    info = tar_to_tfrecord.run([
        "--input", str(tmp_path / "wds.tar"), "--output", str(tmp_path / "ds"),
        "--features", "emb=emb.npy:float32[4],pcm=pcm.npy:int16[4],ok=ok.npy:bool[4],"
                      "label=cls:int64", "--splits", "train=1", "--max_failure_fraction", "0.2"])
    read = {tuple(ex["emb"]): ex for ex in reader.load(
        str(tmp_path / "ds"), "train", batch_size=None).as_numpy_iterator()}
    assert len(read) == len(embeddings)
    for i, emb in enumerate(embeddings.values()):
        ex = read[tuple(emb)]
        np.testing.assert_array_equal(ex["pcm"], (emb * 100).astype(np.int16))
        np.testing.assert_array_equal(ex["ok"], emb > 1)
        assert ex["label"] == i % 3
    letters = (tmp_path / "ds" / "failures" / "failures.jsonl").open()
    letter, = [json.loads(line) for line in letters]
    assert (letter["key"], letter["member"]) == ("objects", "emb.npy")
    assert "a .npy value that cannot be read" in letter["message"]
    assert info["accounting"]["samples_failed"] == 1


def test_features_auto_reads_npy_members_as_their_arrays():
    def npy(array) -> bytes:
        out = io.BytesIO()
        np.save(out, array)
        return out.getvalue()

    samples = [{"__key__": f"k{i}", "emb.npy": npy(np.zeros((2, 3), np.float32)),
                "ids.npy": npy(np.arange(i + 1)), "ok.npy": npy(np.bool_(True))} for i in range(2)]
    spec = {f.name: (f.dtype, f.shape) for f in infer_spec(samples)}
    assert spec == {"emb.npy": ("float", (2, 3)), "ids.npy": ("int64", (None,)),
                    "ok.npy": ("bool", ())}

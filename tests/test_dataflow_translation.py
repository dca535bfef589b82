"""Every pipeline translated into a Dataflow job, without submitting it.

Each pipeline module's `run()` goes through its launch-time checks against real
services on loopback (the GCS emulator holds the tar shard and the CSV
manifest, the Bigtable emulator the table), then the DataflowRunner with
`--dry_run True` builds the job and returns it instead of creating it
(tests/dataflow_dry_run.py). What a user's bill would otherwise find out:

- a DoFn or CombineFn that does not pickle (ParDo pickles its fn when the
  pipeline is built) or does not unpickle without this process's state: every
  fn payload of every job is unpickled in a fresh interpreter, as a worker
  would, with no main session;
- a transform Dataflow rejects at translation, or an unbounded PCollection
  that would silently turn the batch job into a streaming one;
- a flag a pipeline reads that its flex template does not declare.
"""

import base64
import os
import subprocess
import sys
import tarfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile
from apache_beam.options.pipeline_options import PipelineOptions
from google.cloud.dataflow import JobType

from pipelines import (
    bigtable_to_tfrecord,
    manifest_to_tfrecord,
    parquet_to_tfrecord,
    tar_to_bigtable,
    tar_to_tfrecord,
    template_metadata,
)
from pipelines.dataset_job import cut_options
from transforms.runner.runtime import wait_for
from transforms.sources.bigtable.admin import ensure_table
from transforms.sources.bigtable.table import BigtableTable
from transforms.testing.corpus import write_corpus

from dataflow_dry_run import IMAGE, translate

pytestmark = pytest.mark.slow  # Dataflow translations of every job

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def inputs(gcs_emulator, bigtable_emulator, tmp_path_factory):
    """gs:// locations of a tar shard, a CSV manifest, a Parquet file, a noise
    corpus and an RIR listing; Bigtable table datagen-test/i/raw."""
    root = tmp_path_factory.mktemp("inputs")
    shard = write_corpus(str(root), shards=1, samples_per_shard=2, payload_bytes=64)[0]
    (root / "clips.csv").write_text("audio,label,speaker\nclips/a.flac,1,spk01\n")
    pq.write_table(pa.table({"audio": [{"bytes": b"fLaC", "path": "a.flac"}],
                             "text": ["a"], "speaker": ["spk01"]}), root / "rows.parquet")
    soundfile.write(root / "hiss.flac", np.zeros(8000, np.float32), 16000)
    with tarfile.open(root / "noise.tar", "w") as tar:
        tar.add(root / "hiss.flac", "hiss.flac")
    # An RIR corpus as a listing, naming its file relative to itself.
    soundfile.write(root / "impulse.wav", np.eye(1, 800)[0].astype(np.float32), 16000)
    (root / "rirs.jsonl").write_text('{"audio_filepath": "impulse.wav"}\n')
    gcs_emulator.upload(root / "impulse.wav", "translate/rirs/impulse.wav")
    ensure_table(BigtableTable("datagen-test", "i", "raw"), ["raw"], create=True)
    return {"tar": gcs_emulator.upload(shard, "translate/raw/corpus-00000.tar"),
            "csv": gcs_emulator.upload(root / "clips.csv", "translate/lists/clips.csv"),
            "parquet": gcs_emulator.upload(root / "rows.parquet", "translate/rows.parquet"),
            "noise": gcs_emulator.upload(root / "noise.tar", "translate/noise.tar"),
            "rirs": gcs_emulator.upload(root / "rirs.jsonl", "translate/rirs/rirs.jsonl"),
            "out": gcs_emulator.url("translate/out")}


def _jobs(inputs) -> dict:
    """name -> (pipeline module, argv): representative options for every pipeline."""
    out, cut = inputs["out"], ["--cut", "audio_windows", "--window_s", "0.5"]
    return {
        "tar_to_tfrecord": (tar_to_tfrecord, [
            "--input", inputs["tar"], "--output", f"{out}/tar", "--audio_fields", "flac",
            "--cut", "speech", "--quality", "snr_db,bandwidth_hz", "--keep", "snr_db >= 10",
            "--features", "label=cls:int64", "--split_by", "json.speaker",
            "--augment_copies", "1", "--noise_input", inputs["noise"], "--snr_db", "0,10",
            "--rir_input", inputs["rirs"]]),
        "manifest_to_tfrecord": (manifest_to_tfrecord, [
            "--input", inputs["csv"], "--media_columns", "audio", "--output", f"{out}/csv",
            "--audio_fields", "audio", *cut, "--features", "label:int64",
            "--split_by", "speaker", "--stratify_by", "label", "--near_duplicates", "0.4"]),
        "parquet_to_tfrecord": (parquet_to_tfrecord, [
            "--input", inputs["parquet"], "--media_columns", "audio", "--output",
            f"{out}/parquet", "--audio_fields", "audio", "--cut", "utterances",
            "--audio_features", "fbank", "--features", "text:string", "--text_field", "text",
            "--split_by", "speaker"]),
        "bigtable_to_tfrecord": (bigtable_to_tfrecord, [
            "--instance", "i", "--table", "raw", "--columns", "raw:*", "--output", f"{out}/bt",
            "--cut", "frames", "--video_field", "mp4", "--frame_size", "64x64",
            "--features", "label=cls:int64", "--examples_table", "ex",
            "--create_examples_table"]),
        "tar_to_bigtable": (tar_to_bigtable, [
            "--input", inputs["tar"], "--instance", "i", "--table", "raw",
            "--failures_output", f"{out}/load_failures.jsonl"]),
    }


@pytest.fixture(scope="module")
def translations(inputs):
    """name -> Translation, every pipeline with the template image as its worker image."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return {name: translate(monkeypatch, module, [*argv, "--sdk_container_image", IMAGE])
                for name, (module, argv) in _jobs(inputs).items()}


def test_every_pipeline_translates_to_a_batch_job_on_the_image(translations):
    assert set(translations) == set(template_metadata.TEMPLATES)
    for name, t in translations.items():
        assert t.job.proto.type_ == JobType.JOB_TYPE_BATCH, name
        # One environment, the image; no pickled main session staged for it.
        assert t.environments() == [(IMAGE, ["submission_environment_dependencies.txt"])], name
        assert t.fn_payloads(), name


def test_each_job_has_its_steps(translations):
    for name in ("tar_to_tfrecord", "manifest_to_tfrecord", "parquet_to_tfrecord",
                 "bigtable_to_tfrecord"):
        names = translations[name].transform_names()
        steps = {"WriteDataset/Units", "WriteDataset/Convert", "WriteDataset/Finalise"}
        assert steps <= names, name
        assert "WriteDataset/WriteShards" not in names, name  # written where built
    near = translations["manifest_to_tfrecord"].transform_names()
    assert ("WriteDataset/Finalise/DatasetChecks/DuplicatesCheck/SharedContent/NearGroups"
            in near)
    sink_names = translations["bigtable_to_tfrecord"].transform_names()
    assert "WriteDataset/WriteExamplesSink" in sink_names
    load_names = translations["tar_to_bigtable"].transform_names()
    assert {"ReadTar", "WriteBigtable", "Report"} <= load_names


def test_the_global_layout_translates_with_its_shuffle(monkeypatch, inputs, tmp_path):
    module, argv = _jobs(inputs)["tar_to_tfrecord"]
    t = translate(monkeypatch, module, [*argv, "--shuffle", "global", "--num_shards", "4",
                                        "--sdk_container_image", IMAGE])
    assert {"WriteDataset/Convert", "WriteDataset/WriteShards",
            "WriteDataset/Finalise"} <= t.transform_names()
    _load_in_a_fresh_interpreter(t.fn_payloads(), tmp_path)


def _load_in_a_fresh_interpreter(payloads: list, tmp_path) -> None:
    """Unpickles every payload as a worker would: a new process, the project
    installed, no main session, nothing of this test process."""
    listing = tmp_path / "payloads.txt"
    listing.write_text("\n".join(base64.b64encode(p).decode() for p in payloads))
    script = ("import base64, sys\n"
              "from apache_beam.internal import pickler\n"
              "lines = open(sys.argv[1]).read().split()\n"
              "fns = [pickler.loads(base64.b64decode(line)) for line in lines]\n"
              "print(len(fns), 'loaded')\n")
    done = subprocess.run([sys.executable, "-c", script, str(listing)], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[0] == str(len(payloads))


def test_every_pickled_fn_loads_in_a_fresh_interpreter(translations, tmp_path):
    _load_in_a_fresh_interpreter([p for t in translations.values() for p in t.fn_payloads()],
                                 tmp_path)


def test_pipelines_read_no_flag_their_template_lacks(translations):
    """The template test checks metadata against the declared flags; this checks the
    declaration against what run() reads (a flag read but undeclared could never be set)."""
    declared = {name: {f.name for f in t.flags}
                for name, t in template_metadata.TEMPLATES.items()}
    ours = set().union(*declared.values())
    for name, t in translations.items():
        assert t.options_read & ours <= declared[name], name


def test_setup_file_stages_the_project(monkeypatch, inputs):
    module, argv = _jobs(inputs)["tar_to_tfrecord"]
    t = translate(monkeypatch, module, [*argv, "--setup_file", os.path.join(REPO, "setup.py")])
    [(image, staged)] = t.environments()
    assert "/beam_python3.11_sdk:2.77" in image  # Dataflow's Beam image, our sdist on it
    assert "workflow.tar.gz" in staged and "pickled_main_session" not in staged


def test_tf_transform_preprocessing_translates(monkeypatch, inputs, tmp_path):
    """tf.Transform's analyze-and-transform stage, on the image, pickles and translates.

    Its output is local here: tf.Transform writes its temporary files while the
    pipeline is built, through TensorFlow's GCS filesystem, which cannot reach
    the emulator (transforms/format/tf_paths.py).
    """
    t = translate(monkeypatch, tar_to_tfrecord, [
        "--input", inputs["tar"], "--output", str(tmp_path / "out"),
        "--features", "label=cls:int64,gain=json.gain:float,speaker=json.speaker:bytes",
        "--normalize", "gain=zscore", "--vocabulary", "speaker", "--sdk_container_image", IMAGE])
    assert t.job.proto.type_ == JobType.JOB_TYPE_BATCH
    assert any(name.startswith("WriteDataset/Preprocess/") for name in t.transform_names())
    _load_in_a_fresh_interpreter(t.fn_payloads(), tmp_path)


def test_video_decoding_is_single_threaded_on_dataflow_by_default():
    def threads(*flags):
        argv = ["--cut", "frames", "--video_field", "mp4", "--frame_size", "8x8", *flags]
        return cut_options(PipelineOptions(argv)).frames.threads

    assert threads() == 0                                       # FFmpeg's choice, locally
    assert threads("--runner", "DataflowRunner") == 1           # a process per vCPU already
    assert threads("--runner", "DataflowRunner", "--decode_threads", "4") == 4


def test_no_wait_until_finish_returns_at_once():
    class Running:
        def wait_until_finish(self):
            raise AssertionError("waited")

    assert wait_for(Running(), PipelineOptions(["--no_wait_until_finish"])) is False

"""The jobs as a newcomer runs them: real argv in a subprocess, exit codes and stderr.

Exit codes (pipelines/cli.py): 2 a flag error, 3 failed data, 4 infrastructure.
Every expected failure is one or two lines on stderr, never a traceback.
"""

import json
import os
import pickle
import re
import subprocess
import sys

import pytest

from pipelines import template_metadata
from pipelines.cli import EXIT_DATA, EXIT_FLAGS, EXIT_INFRASTRUCTURE
from transforms.testing.corpus import write_corpus

pytestmark = pytest.mark.slow  # jobs in subprocesses

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = sorted(template_metadata.TEMPLATES)


def _job(job: str, *argv: str, env: dict | None = None,
         unset: tuple = ()) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run([sys.executable, "-m", f"pipelines.{job}", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env={**environment, **(env or {})})


def _lines(text: str) -> list:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """2 shards x 20 samples, 40 speakers, one sample with an unparseable label."""
    root = tmp_path_factory.mktemp("corpus")
    write_corpus(str(root), shards=2, samples_per_shard=20, payload_bytes=256, speakers=40,
                 bad_samples=1)
    return root


def _tar_job(corpus, output, *flags):
    return _job("tar_to_tfrecord", "--input", f"{corpus}/*.tar", "--output", str(output),
                "--features", "payload=bin:bytes,label=cls:int64", "--split_by",
                "__key__:^([^_]+)", "--max_failure_fraction", "0.1", *flags)


@pytest.mark.parametrize("job", JOBS)
def test_help_lists_every_flag_the_job_takes_by_group(job):
    done = _job(job, "--help")
    assert done.returncode == 0, done.stderr
    for flag in template_metadata.TEMPLATES[job].flags:
        assert flag.option in done.stdout, flag.name
    assert "Beam's own flags pass through: --runner" in done.stdout
    assert "Exit codes:" in done.stdout and "examples:" in done.stdout
    assert "--direct_num_workers N" in done.stdout  # pointed to, not listed one by one
    assert "--dataflow_endpoint" not in done.stdout


def test_a_typo_is_refused_in_one_line_with_a_suggestion(corpus, tmp_path):
    done = _tar_job(corpus, tmp_path / "out", "--splti_by", "json.speaker")
    assert done.returncode == EXIT_FLAGS
    assert _lines(done.stderr) == [
        "error: unknown flag --splti_by; did you mean --split_by? "
        "(python -m pipelines.tar_to_tfrecord --help lists every flag)"]
    assert not (tmp_path / "out").exists()


def test_a_glob_the_shell_expanded_is_refused(corpus, tmp_path):
    first, second = sorted(str(p) for p in corpus.glob("*.tar"))
    done = _job("tar_to_tfrecord", "--input", first, second, "--output", str(tmp_path / "out"))
    assert done.returncode == EXIT_FLAGS
    [line] = _lines(done.stderr)
    assert line.startswith(f"error: unexpected argument '{second}'") and "quote a pattern" in line


def test_a_bad_value_is_one_line(corpus, tmp_path):
    done = _tar_job(corpus, tmp_path / "out", "--shuffle", "random")
    assert (done.returncode, _lines(done.stderr)) == (EXIT_FLAGS, [
        "error: argument --shuffle: invalid choice: 'random' (choose from 'none', 'global')"])


def test_beams_own_flags_pass_and_the_job_runs(corpus, tmp_path):
    done = _tar_job(corpus, tmp_path / "out", "--runner", "DirectRunner",
                    "--direct_num_workers", "1", "--splits", "train=0.5,test=0.5")
    assert done.returncode == 0, done.stderr
    assert _lines(done.stdout)[0].startswith("datagen: 40 samples read, 39 examples written")
    assert done.stderr == ""  # a clean run shows the job's own lines and nothing else


@pytest.mark.parametrize("workers", ["1", "2"])
def test_too_many_dead_letters_is_one_line_naming_them(corpus, tmp_path, workers):
    """With worker processes too: their failure reached the launcher as the
    runner's error, exit 1 (a bug) after Beam's traceback, ~100 lines."""
    done = _tar_job(corpus, tmp_path / "out", "--max_failure_fraction", "0",
                    "--direct_num_workers", workers)
    assert done.returncode == EXIT_DATA
    [line] = _lines(done.stderr)
    assert line.startswith("failed: 1 of 40 inputs failed (2.50% > --max_failure_fraction "
                           "0.00%); dead letters in ")
    path = line.split("dead letters in ", 1)[1].split(";", 1)[0]
    assert json.loads(open(path).read())["key"] == "spk00_00000"


def test_verbose_keeps_the_exit_code_and_shows_the_trace(corpus, tmp_path):
    done = _tar_job(corpus, tmp_path / "out", "--max_failure_fraction", "0", "--verbose")
    assert done.returncode == EXIT_DATA
    assert "Traceback (most recent call last)" in done.stderr


def test_an_empty_split_fails_unless_allowed(corpus, tmp_path):
    # 40 speakers cannot give a 1% split a single one.
    splits = ["--splits", "train=0.98,rare=0.01,test=0.01"]
    done = _tar_job(corpus, tmp_path / "out", *splits)
    assert done.returncode == EXIT_DATA
    [line] = _lines(done.stderr)
    # 39 groups: the failed sample's speaker has no other sample.
    assert "came out empty" in line and "the 39 groups of --split_by __key__:^([^_]+)" in line
    assert "--stratify_by" in line and line.endswith("or pass --allow_empty_splits")
    assert not (tmp_path / "out" / "manifest.json").exists()

    done = _tar_job(corpus, tmp_path / "out", *splits, "--allow_empty_splits")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in _lines(done.stdout) if line.startswith("warning: ")]
    info = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [f"warning: {w}" for w in info["warnings"]] == warnings and warnings
    assert sum(s["num_groups"] for s in info["splits"].values()) == 39  # one failed


def test_no_bigtable_credentials_is_an_infrastructure_error_with_a_hint(tmp_path):
    # No emulator, no credentials file, no gcloud login, no metadata server.
    env = {"GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9",
           "HOME": str(tmp_path)}
    done = _job("bigtable_to_tfrecord", "--project", "p", "--instance", "i", "--table", "t",
                "--columns", "raw:*", "--output", str(tmp_path / "out"), env=env,
                unset=("BIGTABLE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS"))
    assert done.returncode == EXIT_INFRASTRUCTURE, done.stderr
    first, hint = _lines(done.stderr)
    assert first.startswith("infrastructure error: DefaultCredentialsError: ")
    assert hint.startswith("  try: run `gcloud auth application-default login`")


def test_a_local_run_prints_progress_lines_from_its_counters(tmp_path, monkeypatch, capsys):
    from pipelines import tar_to_tfrecord
    from transforms.runner import progress

    write_corpus(str(tmp_path / "corpus"), shards=4, samples_per_shard=400,
                 payload_bytes=16384, speakers=40)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.05)
    info = tar_to_tfrecord.run(["--input", f"{tmp_path}/corpus/*.tar",
                                "--output", str(tmp_path / "out"), "--features", "bin:bytes"])
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("progress ")]
    read = [int(line.split()[2]) for line in lines]
    assert read == sorted(read) and 0 < max(read) <= info["accounting"]["samples_read"]
    total = sum(p.stat().st_size for p in (tmp_path / "corpus").glob("*.tar")) / 1e6
    assert re.search(rf" of {total:.1f} MB read \(\d+%\), [\d.]+ MB/s$", lines[-1]), lines[-1]


def test_progress_line_and_counter_totals():
    from apache_beam.metrics import monitoring_infos

    from transforms.runner.progress import counter_totals, progress_line

    def counter(name, value, namespace="datagen"):
        return monitoring_infos.int64_user_counter(namespace, name, value)

    bundles = [[counter("samples_read", 3), counter("tar_bytes_read", 2_000_000)],
               [counter("samples_read", 4), counter("examples_written", 9),
                counter("samples_read", 100, namespace="other")]]
    totals = counter_totals(bundles)
    assert totals == {"samples_read": 7, "tar_bytes_read": 2_000_000, "examples_written": 9}
    assert progress_line(totals, 65, 8_000_000) == (
        "progress 1:05  7 samples read, 9 examples written, 0 failed; 2.0 of 8.0 MB read "
        "(25%), 0.03 MB/s")
    assert progress_line({}, 0, None).endswith("0.0 MB read, 0.00 MB/s")


def test_beams_internals_are_checked_against_its_version(monkeypatch, caplog):
    import apache_beam
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    from transforms.runner import beam_internals

    assert beam_internals.SUPPORTED == apache_beam.__version__.startswith("2.77.")
    requester = fn_runner.ProgressRequester
    with beam_internals.watching_bundles(lambda run, infos: None) as active:
        assert fn_runner.ProgressRequester is not requester and active() == []
    assert fn_runner.ProgressRequester is requester   # put back
    monkeypatch.setattr(beam_internals, "SUPPORTED", False)
    with beam_internals.watching_bundles(lambda run, infos: None) as active:
        assert fn_runner.ProgressRequester is requester and active() == []
    assert "progress lines are off: they read Beam 2.77's runner internals" in caplog.text


def test_an_options_view_is_made_once_and_shares_its_sources_values():
    """beam_internals.remember_option_views (make_pipeline turns it on): the same
    view again, reading and writing what the source and its other views do."""
    from apache_beam.options.pipeline_options import (
        DirectOptions,
        PipelineOptions,
        StandardOptions,
    )

    from transforms import make_pipeline

    make_pipeline()
    options = PipelineOptions(["--direct_num_workers", "3"])
    direct = options.view_as(DirectOptions)
    assert options.view_as(DirectOptions) is direct and direct.direct_num_workers == 3
    options.view_as(StandardOptions).runner = "Direct"
    direct.direct_num_workers = 2
    assert options.view_as(StandardOptions).runner == "Direct"
    assert options.get_all_options()["direct_num_workers"] == 2
    assert direct.view_as(StandardOptions).runner == "Direct"
    # Values replaced wholesale (an unpickled copy does) make a fresh view.
    copy = pickle.loads(pickle.dumps(options))
    assert copy.view_as(DirectOptions) is not direct
    assert copy.view_as(DirectOptions).direct_num_workers == 2
    options._all_options = {**options._all_options, "direct_num_workers": 5}
    assert options.view_as(DirectOptions).direct_num_workers == 5


def test_a_dofns_specs_are_beams_own_answer_once_a_class():
    """beam_internals.remember_dofn_specs (make_pipeline turns it on): Beam's
    own answer, asked once a DoFn class whatever the instance, and each time
    for an instance that holds a method of its own (whose defaults may differ)."""
    import apache_beam as beam
    from apache_beam.coders import VarIntCoder
    from apache_beam.transforms import userstate

    from transforms import make_pipeline
    from transforms.runner import beam_internals

    spec = userstate.ReadModifyWriteStateSpec("count", VarIntCoder())
    state = beam.DoFn.StateParam(spec)   # Beam's way of asking for state: a default

    class Stateful(beam.DoFn):
        def process(self, x, count=state):
            yield x

    class Counter:
        def bump(self, x, count=state):
            return x

    class Holding(beam.DoFn):
        def __init__(self, method):
            self.method = method

        def process(self, x):
            yield self.method(x)

    make_pipeline()
    beams = beam_internals._DOFN_SPECS
    asked = []
    dofns = [Stateful(), Stateful(), Holding(Counter().bump), Holding(Counter().bump),
             beam.Map(len).fn, beam.Map(len).fn]
    try:
        beam_internals._DOFN_SPECS = lambda dofn: asked.append(type(dofn).__name__) or beams(dofn)
        answers = [userstate.get_dofn_specs(dofn) for dofn in dofns]
    finally:
        beam_internals._DOFN_SPECS = beams
    assert answers == [beams(dofn) for dofn in dofns]
    assert answers[0] == answers[2] == ({spec}, set()) and answers[4] == (set(), set())
    # Map's class was asked as the Maps were made.
    assert asked == ["Stateful", "Holding", "Holding"]


@pytest.mark.parametrize("flags, words", [
    (["--features", "label=cls:int64,json.nothing:int64"], "40 of 40 inputs failed"),
    (["--split_by", "json.nothing"], "40 of 40 inputs failed"),
])
def test_an_unknown_field_fails_in_one_line_naming_the_dead_letters(corpus, tmp_path, flags,
                                                                   words):
    done = _tar_job(corpus, tmp_path / "out", *flags)
    assert done.returncode == EXIT_DATA
    [line] = _lines(done.stderr)
    assert words in line and "dead letters in " in line and "'json.nothing'" in line


def test_a_file_that_is_no_tar_fails_in_one_line(tmp_path):
    (tmp_path / "notes.tar").write_text("not a tar at all\n" * 100)
    done = _job("tar_to_tfrecord", "--input", str(tmp_path / "notes.tar"),
                "--output", str(tmp_path / "out"), "--features", "bin:bytes")
    assert done.returncode == EXIT_DATA
    [line] = _lines(done.stderr)
    assert line.startswith("failed: 1 of 1 inputs failed") and "not a readable tar" in line


def test_two_workers_and_inspect_show_only_their_own_lines(corpus, tmp_path):
    done = _tar_job(corpus, tmp_path / "out", "--direct_num_workers", "2",
                    "--splits", "train=0.5,test=0.5")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    shown = _job("inspect", str(tmp_path / "out"), "--examples", "1")
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    assert shown.stdout.startswith(f"dataset {tmp_path / 'out'}\n")


def test_a_dataflow_job_prints_its_console_url(capsys):
    from apache_beam.options.pipeline_options import PipelineOptions

    from transforms.runner.runtime import announce_job

    class Submitted:  # what DataflowRunner.run_pipeline returns, as far as announce_job looks
        def job_id(self):
            return "2026-11-24_01_02_03-42"

    announce_job(Submitted(), PipelineOptions(["--project", "p", "--region", "europe-west4"]))
    assert capsys.readouterr().out == (
        "job 2026-11-24_01_02_03-42: https://console.cloud.google.com/dataflow/jobs/"
        "europe-west4/2026-11-24_01_02_03-42?project=p\n")


def test_a_job_imports_beam_without_the_bridges_it_never_uses():
    # pipelines/__init__.py: Beam's optional pandas, MongoDB and BigQuery imports
    # are refused while Beam imports, quietly, and import as usual afterwards.
    bridges = "('pandas', 'pymongo', 'apache_beam.io.gcp.bigquery')"
    code = ("import sys, pipelines.tar_to_tfrecord, apache_beam as beam; "
            f"print([m for m in {bridges} if m in sys.modules]); "
            "import pandas, apache_beam.io.gcp.bigquery; "
            "print(beam.Pipeline is not None, pandas.DataFrame({'a': [1]}).shape)")
    lean = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert lean.stdout.split("\n")[:2] == ["[]", "True (1, 1)"] and lean.stderr == ""
    # Another Beam than the one it was written for: Beam imported whole.
    other = ("import sys, transforms.runner.beam_import as lean; lean.BEAM_VERSION = '0.1'; "
             "lean.import_beam_lean(); print('pandas' in sys.modules)")
    whole = subprocess.run([sys.executable, "-c", other], cwd=REPO, capture_output=True,
                           text=True, check=True)
    assert whole.stdout.strip() == "True"

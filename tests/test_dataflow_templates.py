"""The flex templates: metadata against each pipeline's own flags, the image, the make targets.

A pipeline's own flags are those of its options classes and the single flags
it borrows (pipelines/template_metadata.py `TEMPLATES`; that a pipeline reads
no other flag is checked by test_dataflow_translation.py). They are not the
union of every options class loaded in the process, which Beam parses
together. No Docker engine or Google Cloud here: the image is checked by
reading its Dockerfile, the gcloud commands by `make -n` and by gcloud's own
offline `--print-only` build, and the launcher entry point by a dry run.
"""

import json
import os
import re
import runpy
import shutil
import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import template_metadata
from pipelines.flag_types import boolean
from transforms.testing.corpus import write_corpus

from dataflow_dry_run import DATAFLOW, IMAGE, dry_run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = template_metadata.TEMPLATES


def _metadata(name: str) -> dict:
    with open(template_metadata.path(name)) as f:
        return json.load(f)


def _flags(name: str) -> dict:
    return {f.name: f for f in TEMPLATES[name].flags}


def _make(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def _commands(*args) -> str:
    """What `make -n` would run, continuation lines joined, spaces collapsed."""
    return " ".join(_make("-n", *args).stdout.replace("\\\n", " ").split())


def test_a_template_for_every_pipeline():
    """Every Beam job in pipelines/ has a template, a metadata file and a Makefile entry."""
    def is_job(name):
        with open(os.path.join(REPO, "pipelines", name)) as f:
            text = f.read()
        return "def run(" in text and any(call in text for call in (
            "run_dataset_job(", "run_rows_job(", "make_pipeline("))

    # verify prints its findings: a template's launcher would print them nowhere.
    jobs = {name[:-3] for name in os.listdir(os.path.join(REPO, "pipelines"))
            if name.endswith(".py") and is_job(name)} - {"verify"}
    with_metadata = {d for d in os.listdir(template_metadata.TEMPLATE_DIR)
                     if os.path.exists(template_metadata.path(d))}
    make_list = re.search(r"^PIPELINES\s*:=\s*(.*)$", open(os.path.join(REPO, "Makefile")).read(),
                          re.M).group(1).split()
    assert jobs == set(TEMPLATES) == with_metadata == set(make_list)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_metadata_file_is_up_to_date(name):
    with open(template_metadata.path(name)) as f:
        assert f.read() == template_metadata.render(name), (
            "stale: run `python -m pipelines.template_metadata` and commit the result")


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_parameters_are_exactly_the_pipelines_flags(name):
    params = {p["name"]: p for p in _metadata(name)["parameters"]}
    flags = _flags(name)
    # Every parameter is a flag this pipeline reads, and every flag it reads a parameter.
    assert set(params) == set(flags)
    # Every required flag is a required parameter, and only those.
    required = {n for n, f in flags.items() if "Required." in f.help}
    assert {n for n, p in params.items() if not p["isOptional"]} == required
    assert required, "every pipeline needs something to read and somewhere to write"


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_parameter_is_documented_with_an_example_its_regexes_accept(name):
    flags = _flags(name)
    for p in _metadata(name)["parameters"]:
        assert p["label"] and p["helpText"], p["name"]
        assert "e.g." in p["helpText"] or "Example: " in p["helpText"], p["name"]
        value = template_metadata.example(flags[p["name"]])
        for regex in p.get("regexes", []):
            assert value is not None and re.fullmatch(regex, value), (p["name"], regex, value)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_pipeline_parses_every_parameter_as_a_launch_passes_it(name):
    """A flex template launch passes `--name=value`; a store_true flag would refuse it."""
    flags = _flags(name)
    argv = [f"--{n}={template_metadata.example(a) or 'x'}" for n, a in flags.items()]
    options = PipelineOptions(argv).get_all_options()
    for n, a in flags.items():
        value = template_metadata.example(a) or "x"
        parse = boolean if a.switch else a.type or str
        assert options[n] == ([parse(value)] if a.repeated else parse(value)), n
    switches = [n for n, a in flags.items() if a.switch]
    for n in switches:
        assert PipelineOptions([f"--{n}=false"]).get_all_options()[n] is False
        assert PipelineOptions([f"--{n}"]).get_all_options()[n] is True


def _dockerfile() -> list:
    with open(os.path.join(template_metadata.TEMPLATE_DIR, "Dockerfile")) as f:
        return f.read().splitlines()


def test_dockerfile_matches_the_project():
    lines = _dockerfile()
    instructions = [(i, line) for i, line in enumerate(lines)
                    if line and not line.startswith((" ", "#"))]
    # Every instruction is commented (the line above it is a comment).
    assert all(lines[i - 1].startswith("#") for i, _ in instructions)
    text = "\n".join(lines)
    setup = open(os.path.join(REPO, "setup.py")).read()
    beam = re.search(r'"apache-beam\[gcp\]==(\d+\.\d+)\.\*"', setup).group(1)
    python = re.search(r'python_requires=">=(\d+)\.(\d+)', setup).groups()
    assert f"ARG BEAM_IMAGE=apache/beam_python{'.'.join(python)}_sdk:{beam}.0" in text
    assert f"python{''.join(python)}-template-launcher-base" in text
    assert "COPY --from=launcher /opt/google/dataflow/python_template_launcher" in text
    assert "pip check" in text and 'ENTRYPOINT ["/opt/apache/beam/boot"]' in text
    for source in re.findall(r"^COPY (?!--from)(\S+)", text, re.M):
        assert os.path.exists(os.path.join(REPO, source)), source
    entry = re.search(r"^ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/template/(\S+)$", text, re.M).group(1)
    assert os.path.exists(os.path.join(REPO, entry))


def test_launch_entry_point_submits_its_pipeline_without_waiting(monkeypatch, tmp_path,
                                                                 gcs_emulator):
    """dataflow_templates/launch.py, as the template launcher runs it (dry run)."""
    write_corpus(str(tmp_path), shards=1, samples_per_shard=2, payload_bytes=64)
    monkeypatch.setenv("DATAGEN_PIPELINE", "tar_to_tfrecord")
    monkeypatch.setattr(sys, "argv", [
        "launch.py", f"--input={tmp_path}/*.tar", "--output=gs://datagen-test/launch",
        "--features=label=cls:int64", "--filter_empty=true", *DATAFLOW,
        f"--sdk_container_image={IMAGE}"])
    launch = os.path.join(template_metadata.TEMPLATE_DIR, "launch.py")
    t = dry_run(monkeypatch, lambda: runpy.run_path(launch, run_name="__main__"))
    options = t.job.options.get_all_options()
    assert options["no_wait_until_finish"] is True and options["filter_empty"] is True
    assert "WriteDataset/Finalise" in t.transform_names()


def test_make_template_targets_need_project_and_bucket():
    done = _make("template-run")
    assert done.returncode != 0 and "set PROJECT" in done.stderr


def test_make_template_run_and_image_commands():
    common = ["PROJECT=proj", "BUCKET=bkt", "REGION=europe-west4", "IMAGE=reg/img"]
    run = _commands("template-run", *common, "PIPELINE=tar_to_bigtable", "JOB=load-1",
                    "PARAMETERS=^;^input=gs://bkt/raw/*.tar;instance=media-1;table=raw")
    assert "gcloud dataflow flex-template run load-1 --project=proj --region=europe-west4" in run
    for part in ("--template-file-gcs-location=gs://bkt/templates/tar_to_bigtable.json",
                 "--temp-location=gs://bkt/tmp",
                 "--additional-pipeline-options=sdk_container_image=reg/img:tar_to_bigtable",
                 "--parameters='^;^input=gs://bkt/raw/*.tar;instance=media-1;table=raw'"):
        assert part in run
    image = _commands("template-image", *common)
    assert ("gcloud builds submit --project=proj --config=dataflow_templates/cloudbuild.yaml "
            f'--substitutions=_IMAGE=reg/img,_PIPELINES="{" ".join(TEMPLATES)}" .') in image
    cloudbuild = open(os.path.join(template_metadata.TEMPLATE_DIR, "cloudbuild.yaml")).read()
    assert "dataflow_templates/build_images.sh ${_IMAGE} ${_PIPELINES}" in cloudbuild


@pytest.mark.skipif(shutil.which("gcloud") is None and not os.environ.get("CI"),
                    reason="the Google Cloud CLI is not installed")
def test_make_template_build_gives_gcloud_a_valid_spec_for_every_pipeline():
    """gcloud builds each template spec offline (--print-only) from the metadata files."""
    done = _make("template-build", "PROJECT=proj", "BUCKET=bkt", "IMAGE=reg/img",
                 "BUILD_FLAGS=--print-only")
    assert done.returncode == 0, done.stderr[-2000:]
    specs = [json.loads(block) for block in re.split(r"^\|-\s*$", done.stdout, flags=re.M)
             if block.strip().startswith("{")]
    assert [s["image"] for s in specs] == [f"reg/img:{name}" for name in TEMPLATES]
    assert [s["metadata"] for s in specs] == [_metadata(name) for name in TEMPLATES]
    assert all(s["sdkInfo"]["language"] == "PYTHON" for s in specs)

"""Every command and marked Python program the README and the docs pages show,
run as written on the demo corpus; and every relative link between them.

The pages' code blocks holding `python -m pipelines.X` commands run in order
(the README first, then the docs pages in the order of its table of them),
in one scratch folder holding what `make demo` makes first (`demo/corpus`,
written with the Makefile's own sample_corpus flags), with the Bigtable
emulator at hand. Each must exit 0 without a traceback. A block marked
`<!-- readme-test: flags only (why) -->` (Dataflow, Cloud Storage, sketches) is
not run, but every flag in it must be one its job takes. Optional parts in
[brackets] are left out of a run and checked as flags.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

from pipelines import cli, template_metadata, verify

pytestmark = pytest.mark.slow  # jobs in subprocesses

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MARK = "<!-- readme-test: flags only"


def _pages() -> list:
    """README.md, then the docs pages in the order its table lists them, then
    any page it does not list (test_every_docs_page_is_in_the_readme fails)."""
    readme = open(os.path.join(REPO, "README.md")).read()
    listed = re.findall(r"(?m)^\| \[[^]]+\]\((docs/[\w.-]+\.md)\)", readme)
    others = sorted(f"docs/{name}" for name in os.listdir(os.path.join(REPO, "docs"))
                    if name.endswith(".md") and f"docs/{name}" not in listed)
    return ["README.md", *listed, *others]


def _text(page: str) -> str:
    with open(os.path.join(REPO, page)) as f:
        return f.read()


def _all_text() -> str:
    return "\n".join(_text(page) for page in _pages())


_PROGRAM = re.compile(r"(?m)^<!-- readme-test: python -->\n```python\n(.*?)^```\n"
                      r"(?:```\n(.*?)^```)?", re.S)


def _blocks() -> list:
    """(flags only?, [command argv, ...]) per code block with commands, in page order."""
    return [block for kind, block in _page_blocks() if kind == "commands"]


def _page_blocks() -> list:
    """("commands", (flags only?, [argv, ...])) and ("program", (code, shown))
    for every runnable block of every page, in reading order."""
    found = []
    for page in _pages():
        text = _text(page)
        blocks = [(m.start(), "program", (m.group(1), m.group(2) or ""))
                  for m in _PROGRAM.finditer(text)]
        for match in re.finditer(r"(?m)^```[a-z]*\n(.*?)^```", text, re.S):
            before = text[:match.start()].rstrip().rsplit("\n", 1)[-1]
            lines = match.group(1).replace("\\\n", " ").splitlines()
            commands = [shlex.split(line, comments=True) for line in lines
                        if line.startswith("python -m pipelines.")]
            if commands:
                blocks.append((match.start(), "commands", (before.startswith(_MARK), commands)))
        found += [(kind, block) for _, kind, block in sorted(blocks, key=lambda b: b[0])]
    return found


def _split_optional(argv: list) -> tuple:
    """(argv without the [optional] parts, argv with them, brackets dropped)."""
    required, everything, optional = [], [], False
    for token in argv:
        optional = optional or token.startswith("[")
        bare = token.strip("[]")
        everything.append(bare)
        if not optional:
            required.append(bare)
        optional = optional and not token.endswith("]")
    return required, everything


def _demo_corpus_argv() -> list:
    """The Makefile's demo recipe's sample_corpus command, $(DEMO) as demo/."""
    makefile = open(os.path.join(REPO, "Makefile")).read().replace("\\\n", " ")
    line = re.search(r"\$\(PY\) -m (pipelines\.sample_corpus .*)", makefile).group(1)
    return shlex.split(line.replace("$(DEMO)", "demo"))


def test_the_pages_have_runnable_and_flags_only_blocks():
    blocks = _blocks()
    assert sum(1 for flags_only, _ in blocks if not flags_only) >= 4
    assert sum(1 for flags_only, _ in blocks if flags_only) >= 2


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("readme")
    done = subprocess.run([sys.executable, "-m", *_demo_corpus_argv()], cwd=folder,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stderr
    return folder


def _run_commands(commands: list, flags_only: bool, scratch) -> int:
    """Runs a block's commands in `scratch` (checks only their flags when
    `flags_only`); how many ran."""
    ran = 0
    for argv in commands:
        module = argv[2]
        required, everything = _split_optional([t for t in argv[3:] if t != "..."])
        job = module.removeprefix("pipelines.")
        if "--help" not in everything and job in template_metadata.TEMPLATES:
            cli.checked_flags(job, everything)  # FlagError names what is wrong
        elif job == "verify":
            cli.checked_flags(job, everything, verify.parser())
        if flags_only:
            continue
        done = subprocess.run([sys.executable, "-m", module, *required], cwd=scratch,
                              capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": REPO})
        assert done.returncode == 0 and "Traceback" not in done.stderr, (
            f"{' '.join(argv)}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        ran += 1
    return ran


def _run_program(code: str, shown: str, scratch, name: str) -> None:
    """Runs a page's Python program in `scratch`; what it prints must be `shown`."""
    program = scratch / f"{name}.py"
    program.write_text(code)
    done = subprocess.run([sys.executable, str(program)], cwd=scratch, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0 and "Traceback" not in done.stderr, (
        f"{code}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    if shown:
        assert done.stdout.strip() == shown.strip(), code


def test_every_command_and_program_runs_as_written_in_reading_order(scratch, bigtable_emulator):
    """As a reader would: each page top to bottom, a program after the commands
    that wrote what it reads, each program printing what the page shows."""
    ran, programs, shown = 0, 0, 0
    for kind, block in _page_blocks():
        if kind == "commands":
            ran += _run_commands(block[1], block[0], scratch)
        else:
            _run_program(*block, scratch, f"program_{programs}")
            programs, shown = programs + 1, shown + bool(block[1])
    assert ran >= 8 and programs >= 5 and shown >= 5


def test_the_docs_name_every_flag_and_no_other():
    """The pages' flag tables name only flags a job takes, and every flag a job
    takes is named somewhere in them (--help has the details)."""
    text = _all_text()
    taken = {flag.name for template in template_metadata.TEMPLATES.values()
             for flag in template.flags}
    in_tables = {name for row in re.findall(r"(?m)^\| `--.*", text)
                 for name in re.findall(r"--([a-z][a-z0-9_]*)", row.split(" | ")[0])}
    assert in_tables - taken == set()
    assert taken - set(re.findall(r"--([a-z][a-z0-9_]*)", text)) == set()


def _steps(output, *flags: str) -> set:
    """(Beam label, transform, module path) of WriteDataset's own steps for `flags`."""
    import functools

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.dataset_job import dataset_config
    from transforms.recipe.units import Source
    from transforms.sources.tar import TarReader, plan_tar_units
    from transforms.writer.write import WriteDataset

    class Unread:
        """A reader that is never read: the pipeline is only built."""

        source = Source(functools.partial(plan_tar_units, ["unused"], 1), TarReader())

        def describe(self):
            return {}

        def first_samples(self):
            return iter(())

    # Building the graph writes nothing but tf.Transform's scratch folder, in `output`.
    options = PipelineOptions(["--output", str(output), "--split_by", "__key__", *flags])
    config = dataset_config(options, Unread())
    pipeline = beam.Pipeline()
    _ = pipeline | "WriteDataset" >> WriteDataset(config, Unread.source)
    steps = set()

    class Steps(beam.pipeline.PipelineVisitor):
        def enter_composite_transform(self, node):
            module = type(node.transform).__module__
            if node.full_label.count("/") == 1 and module.startswith("transforms."):
                steps.add((node.full_label, type(node.transform).__name__,
                           module.replace(".", "/") + ".py"))

    pipeline.visit(Steps())
    return steps


def test_the_docs_map_every_step_to_its_module(tmp_path):
    text = _text("docs/layout.md")
    table = set(re.findall(r"(?m)^\| `(WriteDataset/\w+)` \| `(\w+)` \| `([\w/.]+)` \|", text))
    built = (_steps(tmp_path, "--features", "cls:int64")
             | _steps(tmp_path, "--features", "cls:int64", "--stratify_by", "cls",
                      "--shuffle", "global", "--duplicates", "drop")
             | _steps(tmp_path, "--features", "gain=json.gain:float", "--normalize",
                      "gain=zscore", "--materialize_transform"))
    assert table == built


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped,
    spaces made hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(text: str) -> set:
    anchors, seen = set(), {}
    body = re.sub(r"(?ms)^```.*?^```", "", text)  # a # in a code block is no heading
    for heading in re.findall(r"(?m)^#{1,6} (.+)$", body):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in _pages():
        text = re.sub(r"(?ms)^```.*?^```", "", _text(page))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            resolved = (os.path.normpath(os.path.join(REPO, os.path.dirname(page), path))
                        if path else os.path.join(REPO, page))
            if not os.path.exists(resolved):
                broken.append(f"{page}: {target}: no such file")
            elif anchor and resolved.endswith(".md") and anchor not in _anchors(
                    open(resolved).read()):
                broken.append(f"{page}: {target}: no such heading")
    assert broken == []


def test_every_docs_page_is_in_the_readme():
    readme = _text("README.md")
    pages = {f"docs/{name}" for name in os.listdir(os.path.join(REPO, "docs"))
             if name.endswith(".md")}
    assert pages == set(re.findall(r"(?m)^\| \[[^]]+\]\((docs/[\w.-]+\.md)\)", readme))
    assert len(readme.splitlines()) <= 250


def test_the_slugs_are_githubs():
    assert _slug("Writing: where examples become shards") == (
        "writing-where-examples-become-shards")
    assert _slug("Plan before spending: `--dry_run_samples`") == (
        "plan-before-spending---dry_run_samples")
    assert _anchors("# A\n```\n# not a heading\n```\n## A\n") == {"a", "a-1"}

"""The layers the public API stands on (transforms/__init__.py, DESIGN.md):

- each package imports only the packages below it, the Beam-free bottom
  (format < media < recipe) never a Beam one;
- the writer is one folder that the rest of the project reaches through two
  faces only: `write` (WriteDataset, DatasetConfig) and, for a launcher that
  resumes earlier work (pipelines/launch.py), `ledger`;
- a job (pipelines/*_to_*.py) is a composition of public names: it imports
  `transforms`, a package's own names (its __init__), or the Beam-free format
  layer, never a module inside a Beam package;
- Beam's and argparse's private names are used in one module,
  transforms/runner/beam_internals.py, which checks the Beam version;
- the library speaks Python: no error it raises names a command-line flag
  (an ArgumentError names the parameter, which the command line says as its
  flag: pipelines/cli.py).

Read from the source, so an import inside a function counts too."""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TRANSFORMS = ROOT / "transforms"
# Each package and the packages it may import from, bottom up.
BELOW = {
    "format": {"format"},
    "media": {"format", "media"},
    "recipe": {"format", "media", "recipe"},
    "testing": {"format", "media", "testing"},
    "runner": {"format", "runner"},   # format: the lazy-export helper
    "storage": {"format", "storage"},
    "report": {"format", "media", "report"},  # media: it decodes whole recordings
    # media: a noise or RIR corpus is listed by probing its recordings' audio headers
    "sources": {"format", "media", "recipe", "runner", "sources", "storage"},
    "tft": {"format", "media", "recipe", "runner", "sources", "tft"},
    "checks": {"format", "media", "recipe", "runner", "sources", "checks"},
    "writer": {"format", "media", "recipe", "runner", "sources", "storage", "tft", "checks",
               "writer"},
    "examples": {"format", "media", "recipe", "runner", "examples"},
    # checks: verify runs the writer's checks on what was published
    "verify": {"format", "media", "recipe", "runner", "storage", "tft", "checks", "verify"},
}
# The writer's faces, and the one module that builds on its converter.
WRITER_FACES = {"transforms.writer", "transforms.writer.write", "transforms.writer.ledger"}


def _imports(path: pathlib.Path) -> set:
    """The transforms.* modules a module imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return {name for name in found if name == "transforms" or name.startswith("transforms.")}


def _packages(path: pathlib.Path) -> set:
    """The packages of transforms a module imports; `transforms` itself (the
    public API, which loads them all) as the package "<root>", which no layer
    may import."""
    return {name.split(".")[1] if "." in name else "<root>" for name in _imports(path)
            if name != "transforms" or path.name != "__init__.py" or path.parent != TRANSFORMS}


def test_every_package_has_a_place_in_the_layers():
    packages = {p.name for p in TRANSFORMS.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(BELOW)


@pytest.mark.parametrize("package", sorted(BELOW))
def test_a_layer_imports_only_the_layers_below_it(package):
    above = {f"{path.relative_to(TRANSFORMS)}: {sorted(_packages(path) - BELOW[package])}"
             for path in sorted((TRANSFORMS / package).rglob("*.py"))
             if _packages(path) - BELOW[package]}
    assert not above


def test_the_writer_is_reached_through_its_two_faces():
    outside = [path for folder in ("transforms", "pipelines")
               for path in sorted((ROOT / folder).rglob("*.py"))
               if TRANSFORMS / "writer" not in path.parents]
    reaching_in = {f"{path.relative_to(ROOT)}: {name}" for path in outside
                   for name in _imports(path)
                   if name.startswith("transforms.writer") and name not in WRITER_FACES}
    assert not reaching_in


def _is_package_or_format(name: str) -> bool:
    parts = name.split(".")
    return ((ROOT.joinpath(*parts) / "__init__.py").exists()
            or parts[:2] == ["transforms", "format"])


@pytest.mark.parametrize("job", sorted(p.name for p in (ROOT / "pipelines").glob("*_to_*.py")))
def test_a_job_composes_public_names(job):
    private = sorted(name for name in _imports(ROOT / "pipelines" / job)
                     if not _is_package_or_format(name))
    assert not private


# Beam's runner internals, its parser, and argparse's private fields.
INTERNALS = re.compile(r"\._(actions|group_actions|add_action|option_string_actions)\b"
                       r"|_BeamArgumentParser|\._add_argparse_args\(|ProgressRequester"
                       r"|EmbeddedWorkerHandler|bundle_processor_cache")
INTERNALS_MODULE = TRANSFORMS / "runner" / "beam_internals.py"


def test_internals_are_used_in_one_module():
    users = {str(path.relative_to(ROOT)) for folder in ("transforms", "pipelines")
             for path in (ROOT / folder).rglob("*.py")
             if INTERNALS.search(path.read_text())}
    assert users == {str(INTERNALS_MODULE.relative_to(ROOT))}


# A flag in an error's text: --name (GNU tar's own flags, which a hint about
# making a tar names, are tar's, not ours).
FLAG = re.compile(r"(?<![\w-])--(?!dereference\b|hard\b)[a-z][a-z_]+")


def test_no_error_the_library_raises_names_a_flag():
    named = [f"{path.relative_to(ROOT)}:{node.lineno}"
             for path in TRANSFORMS.rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Raise) and node.exc is not None
             and any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                     and FLAG.search(c.value) for c in ast.walk(node.exc))]
    assert named == []

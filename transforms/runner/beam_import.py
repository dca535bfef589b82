"""Importing Apache Beam without the optional bridges a datagen job never uses.

`import apache_beam` also imports, where they are installed, the bridges to
libraries the project does not call through Beam: the pandas batch
converters of its type hints (pandas itself, about 0.4 s), its MongoDB IO's
client (pymongo, 0.15 s) and its BigQuery and Pub/Sub IOs (0.15 s). Each is
imported inside a `try: ... except ImportError`, so Beam runs without them.
A job's command line (pipelines/__init__.py) imports Beam with those imports
refused, about a third of Beam's import and of a small job's fixed cost
(docs/performance.md, "Beam imported without its bridges").

Only Beam's own first import is affected: the finder is removed once it is
done, so pandas, pymongo or Beam's BigQuery IO import as usual when the job
itself asks for them (tf.Transform imports pandas). What is lost is their
names in `apache_beam.io` (`beam.io.ReadFromBigQuery`, `ReadFromMongoDB`) and
Beam's pandas batch converters, which none of the jobs use; a pipeline built
from Python (`import transforms`) imports Beam whole.

It is written for the Beam that setup.py pins (`BEAM_VERSION`, which
transforms/runner/beam_internals.py checks too); on another version, or
where Beam was imported already, Beam is imported as it is.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import re
import sys
from typing import Iterator

__all__ = ["BEAM_VERSION", "REFUSED", "import_beam_lean"]

# The Beam series the project is written for (setup.py pins it).
BEAM_VERSION = "2.77"

# The top-level packages and Beam modules refused while Beam imports, and
# why each is safe to refuse: Beam catches the ImportError of each.
REFUSED = frozenset({
    "pandas",                       # apache_beam.typehints: the pandas batch converters
    "bson", "pymongo",              # apache_beam.io.mongodbio: its client
    "apache_beam.io.gcp.bigquery",  # apache_beam.io: BigQuery, then Pub/Sub, in one try
})

# Beam's MongoDB IO logs a warning when its client is missing.
_WARNS_WHEN_REFUSED = "apache_beam.io.mongodbio"


class _Refuse(importlib.abc.MetaPathFinder):
    """Refuses the imports of REFUSED (a package and its submodules)."""

    def find_spec(self, name, path, target=None):  # noqa: ARG002
        if name in REFUSED or name.split(".", 1)[0] in REFUSED:
            raise ImportError(f"{name}: not imported with Beam (transforms/runner/beam_import.py)",
                              name=name)
        return None


def import_beam_lean() -> None:
    """Imports Apache Beam, refusing the optional imports of REFUSED while it
    does (module docstring); a plain import on another Beam version or once
    Beam is loaded. (One of them loaded already is never refused: an import
    finds it in sys.modules before asking any finder.)"""
    if "apache_beam" in sys.modules or not _pinned_beam():
        importlib.import_module("apache_beam")
        return
    with _refusing(), _quiet(_WARNS_WHEN_REFUSED):
        importlib.import_module("apache_beam")


def _pinned_beam() -> bool:
    # Read from Beam's version.py: importing it would import Beam, and
    # importlib.metadata takes 50 ms to find it.
    spec = importlib.util.find_spec("apache_beam")
    if spec is None or not spec.submodule_search_locations:
        return False
    path = os.path.join(spec.submodule_search_locations[0], "version.py")
    try:
        with open(path, encoding="utf-8") as f:
            found = re.search(r"""__version__ = ['"]([^'"]+)['"]""", f.read())
    except OSError:
        return False
    return bool(found) and found.group(1).startswith(BEAM_VERSION + ".")


@contextlib.contextmanager
def _refusing() -> Iterator[None]:
    finder = _Refuse()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)

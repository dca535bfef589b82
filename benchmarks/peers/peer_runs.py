"""What the peer benchmarks share: the arguments, a peer's venv, and the runs
measured side by side (each once untimed for the bytes it writes, then
interleaved and repeated: benchmarks/process_tree.py), as medians."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Mapping, Sequence

from benchmarks.process_tree import interleaved

__all__ = ["bytes_in", "measured_medians", "peer_arguments", "peer_python"]

_FIELDS = ("cpu_seconds", "seconds", "peak_rss", "peak_pss")


def peer_arguments(doc: str, utterances: int, argv=None) -> tuple[argparse.Namespace, str]:
    """The benchmark's arguments (--utterances, --repeats, --workdir) and its
    work folder (a fresh temporary one unless given)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--utterances", type=int, default=utterances)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default="", help="kept between runs: the corpus, the venv")
    args = parser.parse_args(argv)
    # Absolute: a peer's manifests name the corpus's files by the paths given.
    return args, os.path.abspath(args.workdir) if args.workdir else tempfile.mkdtemp(
        prefix="peer-bench-")


def peer_python(workdir: str, name: str, packages: Sequence[str],
                without_dependencies: Sequence[str] = ()) -> str:
    """The Python of the venv `name` under `workdir` holding `packages`, and
    `without_dependencies` installed without theirs, made on first use."""
    venv = os.path.join(workdir, name)
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, ".installed")):
        subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", *packages], check=True)
        if without_dependencies:
            subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps",
                            *without_dependencies], check=True)
        open(os.path.join(venv, ".installed"), "w").close()
    return python


def bytes_in(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(folder)
               for n in names)


def measured_medians(runs: Mapping[str, Sequence[str]], corpus: str, output: str,
                     repeats: int) -> tuple[dict, dict]:
    """({name: bytes it wrote}, {name: {field: median}}) of each run: once
    untimed (what it writes, and any first-use cost), then `repeats`
    interleaved rounds, each from an empty `output` with `corpus` cached."""
    disk = {}
    for name, command in runs.items():
        shutil.rmtree(output, ignore_errors=True)
        subprocess.run(command, check=True, capture_output=True)
        disk[name] = bytes_in(output)
    measured = interleaved(runs, corpus, output, repeats)
    return disk, {name: {field: statistics.median(getattr(m, field) for m in measures)
                         for field in _FIELDS}
                  for name, measures in measured.items()}

"""Input file patterns matched through Beam's filesystems (local, gs://, ...).

Launchers match their inputs before the job starts, so a pattern matching
nothing is a clear error then, and the sources plan their work units from the
matched files and sizes.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystems import FileSystems

__all__ = ["as_patterns", "match_files", "matched_files"]


def as_patterns(file_pattern: str | Iterable[str]) -> list[str]:
    """A pattern or a list of them as a non-empty list; ValueError otherwise."""
    patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise ValueError(f"expected a file pattern or a list of them, got {file_pattern!r}")
    return patterns


def matched_files(patterns: str | Sequence[str]) -> list[FileMetadata]:
    """The files matching `patterns` with their sizes, sorted by path, each once;
    ValueError naming a pattern that matches none: `no files match --input 'X'`."""
    found = {}
    for pattern in as_patterns(patterns):
        # One call per pattern: FileSystems.match picks the filesystem of the
        # first pattern for all of them, which breaks mixed local/gs:// lists.
        result = FileSystems.match([pattern])[0]
        if not result.metadata_list:
            raise ValueError(f"no files match --input {pattern!r}")
        found.update((m.path, m) for m in result.metadata_list)
    return [found[path] for path in sorted(found)]


def match_files(patterns: str | Sequence[str]) -> list[str]:
    """The paths of `matched_files(patterns)`."""
    return [m.path for m in matched_files(patterns)]

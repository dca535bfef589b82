"""Input file patterns matched through Beam's filesystems (local, gs://, ...).

Launchers match their inputs before the job starts, so a pattern matching
nothing, or matching a FIFO, a device or a socket (whose reading would block
or never end), is a clear error then; the sources plan their work units from
the matched files and sizes.
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystems import FileSystems

from transforms.format.arguments import ArgumentError, ArgumentTypeError
from transforms.sources.input_files import NotARegularFile, check_regular
from transforms.storage.folders import is_local

__all__ = ["FILE_PATTERN", "as_patterns", "file_version", "match_files", "matched_files"]


# The parameter a reader's patterns are given by (the command line's --input).
FILE_PATTERN = "file_pattern"


def as_patterns(file_pattern: str | os.PathLike | Iterable[str | os.PathLike],
                parameter: str = FILE_PATTERN) -> list[str]:
    """A pattern (str or os.PathLike) or a list of them as a non-empty list of
    str; ArgumentError naming `parameter` otherwise."""
    single = isinstance(file_pattern, (str, os.PathLike))
    patterns = [file_pattern] if single else list(file_pattern) if isinstance(
        file_pattern, Iterable) else []
    patterns = [os.fspath(p) if isinstance(p, os.PathLike) else p for p in patterns]
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise ArgumentTypeError(parameter, f"must be a file pattern or a list of them, got "
                                           f"{file_pattern!r}")
    return patterns


def matched_files(patterns: str | Sequence[str],
                  parameter: str = FILE_PATTERN) -> list[FileMetadata]:
    """The files matching `patterns` with their sizes, sorted by path, each once;
    ArgumentError naming `parameter` (the command line: its flag, --input,
    --noise_input, ...) and a pattern that matches none or that matches
    something other than a regular file."""
    found = {}
    for pattern in as_patterns(patterns, parameter):
        # One call per pattern: FileSystems.match picks the filesystem of the
        # first pattern for all of them, which breaks mixed local/gs:// lists.
        # Beam's local glob finds nothing for a bare name ("c*.tar"): it needs a folder.
        local_bare = "://" not in pattern and "/" not in pattern
        result = FileSystems.match(["./" + pattern if local_bare else pattern])[0]
        if not result.metadata_list:
            raise ArgumentError(parameter, f"{pattern!r} matches no file")
        for m in result.metadata_list:
            try:
                check_regular(m.path)
            except NotARegularFile as e:
                raise ArgumentError(parameter, f"{pattern!r} matches {e.path}, {e.kind}, not "
                                    f"a regular file; narrow the pattern to the files") from None
        found.update((m.path, m) for m in result.metadata_list)
    return [found[path] for path in sorted(found)]


def match_files(patterns: str | Sequence[str], parameter: str = FILE_PATTERN) -> list[str]:
    """The paths of `matched_files(patterns, parameter)`."""
    return [m.path for m in matched_files(patterns, parameter)]


def file_version(metadata: FileMetadata) -> str:
    """What a matched file held when it was matched, as text that changes whenever
    its bytes do: a receipt of work done on the file is reused only while it
    reads the same (transforms/writer/ledger.py).

    A local file: its size, modification time and status-change time in
    nanoseconds. The ctime is set by the kernel on every write and cannot be set
    back, so even a file rewritten with its old size and mtime (`cp -p`,
    `touch -r`) reads as changed; a `touch`, a `chmod` or a copy to another disk
    reads as changed too, which costs a conversion, never a stale reuse.
    An object store (gs://): its size and `updated` time, which the store sets
    on every new generation of the object (clients cannot set it) and on a
    metadata change.
    """
    if is_local(metadata.path):
        st = os.stat(metadata.path)
        return f"size={st.st_size} mtime_ns={st.st_mtime_ns} ctime_ns={st.st_ctime_ns}"
    return f"size={metadata.size_in_bytes} updated={metadata.last_updated_in_seconds!r}"

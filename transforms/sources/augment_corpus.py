"""Noise and RIR corpora for augmentation, listed once at launch.

`list_recordings(patterns, corpus)` gives a `Recording` for each recording
of the files matching `patterns`, in file order:

- an uncompressed tar file: each audio member, by its headers (the reader
  seeks past the members' data), where it lies in the file;
- an audio file (.flac, .wav, ...): itself;
- a CSV, TSV or JSONL listing: the file each row names in its
  `audio_filepath` column (NeMo's noise manifests as they are), else its
  `audio` or `path` column;
- a Kaldi `wav.scp` (`data/musan_noise/wav.scp`): each recording's file,
  keyed by its id (a command instead of a file stops the job).

A relative path is from the listing's folder; a path leading out of it and
of every media root (`--media_root`: transforms/sources/media_paths.py)
stops the job, naming it.

Each recording's audio header is probed for its length. The list is the
job's configuration, so every worker draws from the same recordings in the
same order; a worker reads a recording only when a copy uses it
(transforms/media/augment.py keeps a bounded cache of decoded ones). A file
or member that does not probe as audio, a compressed tar (whose members
cannot be read where they lie), a listing without a path column, or a
corpus of no recording stops the job before any work, naming it.
`files_shared` names the corpus files that are also speech inputs.
"""

from __future__ import annotations

import posixpath
import tarfile
from typing import Iterator, Sequence

from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystems import FileSystems

from transforms.format.arguments import ArgumentError
from transforms.media.audio import probe_audio
from transforms.media.augment import Recording
from transforms.media.decoded import MediaError
from transforms.sources.compression import codec_of_name
from transforms.sources.file_match import as_patterns, file_version, matched_files
from transforms.sources.input_files import open_input
from transforms.sources.kaldi_dir import recording_path
from transforms.sources.listing_rows import (
    ListingLayout,
    header_columns,
    listing_format,
    parse_row,
)
from transforms.sources.media_paths import MediaRoots, OutsideCorpus
from transforms.sources.stored import StoredMember

__all__ = ["AUDIO_EXTENSIONS", "PATH_COLUMNS", "files_shared", "list_recordings"]

AUDIO_EXTENSIONS = frozenset({"flac", "wav", "ogg", "mp3", "opus", "m4a"})
# A listing's column naming each recording's file, the first found.
PATH_COLUMNS = ("audio_filepath", "audio", "path")


def _extension(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[-1].lower()


def _stem(path: str) -> str:
    return posixpath.basename(path).split(".", 1)[0]


def _tar_members(matched: FileMetadata) -> Iterator[Recording]:
    path, version = matched.path, file_version(matched)
    with open_input(path) as f, tarfile.open(fileobj=f, mode="r:") as tar:
        members = [m for m in tar if m.isfile() and _extension(m.name) in AUDIO_EXTENSIONS]
    for member in members:
        yield Recording(_stem(member.name), StoredMember(path, member.offset_data, member.size),
                        0.0, f"{path}:{member.name}", version)


def _audio_file(matched: FileMetadata, key: str) -> Recording:
    return Recording(key, StoredMember(matched.path, 0, matched.size_in_bytes), 0.0,
                     matched.path, file_version(matched))


def _listing_format(path: str) -> str | None:
    try:
        return listing_format(path)
    except ValueError:
        return None


def _listed_files(path: str, corpus: str, roots: MediaRoots) -> Iterator[Recording]:
    fmt = _listing_format(path)
    if fmt not in ("csv", "tsv", "jsonl", "kaldi"):
        raise ValueError(f"{corpus} corpus {path}: neither a tar file, an audio file "
                         f"({', '.join(sorted(AUDIO_EXTENSIONS))}), a CSV, TSV or JSONL "
                         "listing nor a Kaldi wav.scp")
    with open_input(path) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    named = _kaldi_paths(lines) if fmt == "kaldi" else _column_paths(lines, fmt)
    try:
        for key, written in named:
            try:
                file = roots.place(path, written)
            except OutsideCorpus as e:
                raise ArgumentError("media_root", f"is needed: {corpus} corpus {path}: "
                                                  f"{e}") from None
            found = FileSystems.match([file])[0].metadata_list
            if not found:
                raise ValueError(f"{file} cannot be read (no such file)")
            yield _audio_file(found[0], key)
    except OSError as e:
        raise ValueError(f"{corpus} corpus {path}: {file} cannot be read ({e})") from None
    except ArgumentError:
        raise
    except ValueError as e:   # a line that is not a row, a file that is not there
        raise ValueError(f"{corpus} corpus {path}: {e}") from None


def _kaldi_paths(lines: list) -> Iterator[tuple]:
    """(recording id, path) of each `<id> <path>` line of a wav.scp."""
    for line in lines:
        key, entry = (line.decode("utf-8").split(maxsplit=1) + [""])[:2]
        yield key, recording_path(key, entry.strip())


def _column_paths(lines: list, fmt: str) -> Iterator[tuple]:
    """(file stem, path) of each row of a CSV, TSV or JSONL listing."""
    columns = header_columns(lines[0], fmt) if lines else ()
    column = next((c for c in PATH_COLUMNS if c in columns), None)
    if column is None:
        raise ValueError(f"a listing names its recordings in a column "
                         f"{' or '.join(PATH_COLUMNS)}; it has {', '.join(columns) or 'none'}")
    layout = ListingLayout(fmt, columns, (column,))
    for line in lines if fmt == "jsonl" else lines[1:]:
        written = str(parse_row(line, layout)[column])
        yield _stem(written), written


def _recordings(matched: FileMetadata, corpus: str, roots: MediaRoots) -> Iterator[Recording]:
    """Each recording a matched file holds, with the version of the file
    holding it; its length is still to be probed."""
    path = matched.path
    if codec_of_name(path) is not None:
        raise ValueError(f"{corpus} corpus {path}: compressed, so its recordings cannot be "
                         "read where they lie; give it uncompressed")
    if _extension(path) == "tar":
        return _tar_members(matched)
    if _extension(path) in AUDIO_EXTENSIONS:
        return iter([_audio_file(matched, _stem(path))])
    return _listed_files(path, corpus, roots)


def list_recordings(patterns: str | Sequence[str], corpus: str = "noise",
                    media_root: str | Sequence[str] | None = None,
                    parameter: str = "patterns") -> tuple:
    """The Recordings of the files matching `patterns` (tar shards, audio
    files, listings whose paths lie under their folder or a `media_root`), in
    file and member order; ValueError naming what cannot be one (module
    docstring). `corpus` names it in messages, `parameter` the patterns (the
    command line: --noise_input, --rir_input)."""
    patterns = as_patterns(patterns, parameter)
    roots = MediaRoots.of(media_root)
    recordings = []
    for matched in matched_files(patterns, parameter):
        for recording in _recordings(matched, corpus, roots):
            try:
                frames, rate = probe_audio(recording.audio, name=recording.where)
            except MediaError as e:
                raise ValueError(f"{corpus} corpus {recording.where}: not audio ({e})") from None
            recordings.append(recording._replace(seconds=frames / rate))
    if not recordings:
        raise ValueError(f"{corpus} corpus {', '.join(patterns)}: no recording (tar members "
                         f"or files ending {', '.join(sorted(AUDIO_EXTENSIONS))})")
    return tuple(recordings)


def files_shared(recordings: Sequence[Recording], input_files: Sequence[str]) -> list:
    """The files of `recordings` that are also among `input_files` (the
    speech), sorted: a corpus drawn from the data it augments."""
    return sorted({getattr(r.audio, "url", None) for r in recordings} & set(input_files))

"""Listings made of several files: a Kaldi data directory, Lhotse's manifests.

Beam-free. Given as a listing (`--input`), one file stands for the set: a
Kaldi directory's `wav.scp` (transforms/sources/kaldi_dir.py), a Lhotse
recordings manifest or CutSet (transforms/sources/lhotse_manifests.py). A `ListingSet`
says how the listing source (transforms/sources/listing.py) reads such a set:
which files it has, which of them holds the rows (byte ranges of it are the
work units), the rows' columns, the tables a worker loads whole to complete
each row, and the first row's media (checked at launch to lie in the corpus).
Each row is an utterance: its key the `utterance` column, its audio `audio`,
and where the set cuts recordings into segments, `start` and `end`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from transforms.sources import kaldi_dir, lhotse_manifests

__all__ = ["LISTING_SETS", "ListingSet", "listing_set_of"]


class ListingSet(NamedTuple):
    """How to read one kind of listing set (the module docstring)."""

    describes: str                       # what it is, in a sentence's words
    owns: Callable[[str], bool]          # whether a path is its listing file
    files: Callable[[str], dict]         # the listing file -> {role: path} of the set
    columns: Callable[[dict], tuple]     # the rows' columns
    rows_file: Callable[[dict], str]     # the file whose lines are the rows
    tables: Callable[[dict], object]     # loaded whole on a worker: `.row(line) -> dict`
    first_media: Callable[[bytes], str]  # the listing file's first line -> its media path


def _kaldi_first_media(line: bytes) -> str:
    recording, _, entry = line.decode("utf-8", "replace").strip().partition(" ")
    return kaldi_dir.recording_path(recording, entry.strip())


LISTING_SETS = {
    kaldi_dir.KALDI: ListingSet(
        "a Kaldi data directory with a segments file", kaldi_dir.is_kaldi_listing,
        kaldi_dir.kaldi_files, kaldi_dir.kaldi_columns, kaldi_dir.rows_file,
        kaldi_dir.KaldiTables, _kaldi_first_media),
    lhotse_manifests.LHOTSE: ListingSet(
        "Lhotse supervisions or cuts", lhotse_manifests.is_lhotse_listing,
        lhotse_manifests.lhotse_files, lhotse_manifests.lhotse_columns,
        lhotse_manifests.rows_file, lhotse_manifests.LhotseTables,
        lhotse_manifests.first_recording_path),
}


def listing_set_of(path: str) -> str | None:
    """The kind of listing set `path` stands for ("kaldi", "lhotse"), or None."""
    return next((kind for kind, found in LISTING_SETS.items() if found.owns(path)), None)

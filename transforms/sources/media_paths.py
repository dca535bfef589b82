"""Media paths stay in their corpus: where a listing's path may lead.

A listing, a Parquet file or a Kaldi `wav.scp` names its media by path. Such
a file may come from anywhere (a dataset downloaded from a hub, a manifest a
colleague wrote), and a path in it may lead anywhere: `../../etc/passwd`,
`/home/me/.ssh/id_rsa`. Read and written as a `bytes` feature, that file
would be published inside a dataset. So a path is read only when it lies
in the corpus:

- under the folder of the file that names it (a listing's, a Parquet
  file's, a Kaldi data directory's), or
- under a media root the user names (`--media_root`, `media_root=`): the
  folder a NeMo manifest's or a `wav.scp`'s absolute paths point into.

Anything else is a dead letter naming the row and the path; the launcher,
finding the first row already outside, stops before any work and says
which root to name (`MediaRoots.first_row_outside`). A local path is judged
where it really is (symbolic links followed): a link inside the corpus
pointing out of it leads out of it. A URI (`gs://...`) is judged by its
normalised name, and lies in a root of its own scheme only.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import posixpath
import re
from typing import Any

from apache_beam.io.filesystems import FileSystems

from transforms.format.arguments import ArgumentError, ArgumentTypeError
from transforms.storage.folders import is_local

__all__ = ["MediaRoots", "OutsideCorpus", "resolve"]

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def resolve(listing_url: str, path: str) -> str:
    """A media path as written in a listing -> the path or URI to open.

    URIs (`gs://...`) and absolute paths stay; a relative path is joined to the
    listing's directory (`gs://b/lists/m.csv` + `../clips/a.wav` ->
    `gs://b/clips/a.wav`).
    """
    if _URI.match(path) or posixpath.isabs(path):
        return path
    scheme = _URI.match(listing_url)
    prefix = scheme.group(0) if scheme else ""
    directory = posixpath.dirname(listing_url[len(prefix):])
    return prefix + posixpath.normpath(posixpath.join(directory, path))


def _where(path: str) -> str:
    """Where a path or URI really is: a URI's normalised name, a local path's
    absolute real path (its links followed)."""
    scheme = _URI.match(path)
    if scheme:
        return scheme.group(0) + posixpath.normpath(path[scheme.end():])
    return os.path.realpath(path)


def _under(where: str, root: str) -> bool:
    return where == root or where.startswith(root.rstrip("/") + "/")


class OutsideCorpus(ValueError):
    """A media path outside its listing's folder and every media root."""


@functools.lru_cache(maxsize=64)
def _folder_of(listing_url: str) -> str:
    return _where(posixpath.dirname(listing_url) or ".")


def _check_folder(root: str, parameter: str) -> None:
    """ArgumentError naming `parameter` unless `root` may be a folder: on disk,
    one that exists; on a store (gs://, which has no folders), not an object's
    own name."""
    if is_local(root):
        if not os.path.exists(root):
            raise ArgumentError(parameter, f"{root!r} does not exist: a media root is a "
                                           "folder the listing's paths may lead into")
        if not os.path.isdir(root):
            raise ArgumentError(parameter, f"{root!r} is a file, not a folder the listing's "
                                           "paths may lead into")
    elif FileSystems.exists(root):
        raise ArgumentError(parameter, f"{root!r} is an object, not a folder the listing's "
                                       "paths may lead into")


@dataclasses.dataclass(frozen=True)
class MediaRoots:
    """The folders beside a listing's own whose media it may name; pickled
    to workers, so configuration only (each root where it really is).

    >>> import os, tempfile
    >>> from transforms.sources.media_paths import MediaRoots
    >>> corpus = tempfile.mkdtemp()
    >>> roots = MediaRoots.of([corpus])
    >>> roots.place("lists/a.csv", os.path.join(corpus, "clips", "x.flac")) != ""
    True
    >>> roots.place("lists/a.csv", "../../etc/passwd")
    Traceback (most recent call last):
    transforms.sources.media_paths.OutsideCorpus: '../../etc/passwd' is outside the corpus: ...
    """

    roots: tuple = ()

    @classmethod
    def of(cls, roots: Any, parameter: str = "media_root") -> "MediaRoots":
        """`roots` (a folder, os.PathLike or URI, or a list of them; None or ()
        for none) as MediaRoots; ArgumentError naming `parameter` otherwise."""
        if roots is None:
            roots = ()
        if isinstance(roots, (str, os.PathLike)):
            roots = (roots,)
        if not isinstance(roots, (list, tuple)) or not all(
                isinstance(root, (str, os.PathLike)) and os.fspath(root).strip()
                for root in roots):
            raise ArgumentTypeError(parameter, f"must be a folder (str or os.PathLike) or a "
                                               f"list of them, got {roots!r}")
        for root in map(os.fspath, roots):
            _check_folder(root, parameter)
        return cls(tuple(_where(os.fspath(root)) for root in roots))

    def place(self, listing_url: str, written: str) -> str:
        """The path to open for `written`, a media path as the listing at
        `listing_url` has it; OutsideCorpus when it leads out of the corpus."""
        path = resolve(listing_url, written)
        where = _where(path)
        folder = _folder_of(listing_url)
        if _under(where, folder) or any(_under(where, root) for root in self.roots):
            return path
        roots = f" or the media roots {', '.join(self.roots)}" if self.roots else ""
        raise OutsideCorpus(
            f"{written!r} is outside the corpus: it is {where}, not under the folder of "
            f"{posixpath.basename(listing_url)} ({folder}){roots}; a media root "
            "(media_root) names a folder the listing's paths may lead into")

    def first_row_outside(self, listing_url: str, row: str, written: str,
                          parameter: str = "media_root") -> None:
        """ArgumentError, for a launcher before any work, when the first row's
        media path `written` (the row said as `row`) leads out of the corpus:
        such a listing names media elsewhere throughout (a NeMo manifest's,
        a wav.scp's absolute paths), which one media root admits."""
        try:
            self.place(listing_url, written)
        except OutsideCorpus:
            where = posixpath.dirname(_where(resolve(listing_url, written)))
            raise ArgumentError(parameter, f"is needed: {row} of {listing_url} names "
                                           f"{written!r}, outside the listing's folder; give "
                                           f"{{{parameter}}} {where} (or a folder above it) "
                                           "to read media there") from None

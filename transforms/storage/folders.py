"""Directory operations through Beam's FileSystems, alike on local disk and gs://.

Object stores have no directories: `gs://b/out/train/x` exists without any
`gs://b/out/train`, `mkdirs` is a no-op and deleting the "directory" object
fails or deletes nothing. Code that writes a dataset needs these on both
kinds of store, and gets them here:

- `ensure_dir`: make the directory before a local rename into it;
- `remove_tree`: delete a directory and everything under it, at any depth;
- `remove_trees_named`: the same for every directory in a folder whose name
  starts with a prefix (the temporary folders of earlier runs);
- `delete_if_exists`: delete one file that may be absent;
- `is_local`: whether a path is on this machine's disk;
- `check_writable`: create and delete a probe file, so a job learns that it
  cannot write its output before it reads anything;
- `write_text`: a text file, written whole;
- `write_failures`: a dead-letters file (JSON lines), even an empty one;
- `read_manifest`: a published dataset's manifest.json, parsed.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Iterable, Mapping

from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem

from transforms.format import manifest
from transforms.format.dead_letters import failures_jsonl

__all__ = ["check_writable", "delete_if_exists", "ensure_dir", "is_local", "read_manifest",
           "remove_tree", "remove_trees_named", "write_failures", "write_text"]

_GCS = "gs://"


def is_local(path: str) -> bool:
    """Whether `path` is on this machine's disk (not gs:// or another store)."""
    return isinstance(FileSystems.get_filesystem(path), LocalFileSystem)


def ensure_dir(path: str) -> None:
    """Creates the directory (and parents) where the filesystem has directories."""
    filesystem = FileSystems.get_filesystem(path)
    if filesystem.has_dirs() and not filesystem.exists(path):
        filesystem.mkdirs(path)


def remove_tree(path: str) -> None:
    """Deletes `path` and everything under it; nothing to do if there is nothing.

    On an object store that is every object whose name starts with `path/`
    (Beam's GCS filesystem deletes a trailing-slash path recursively); a
    `path/*` match would miss nested objects.
    """
    filesystem = FileSystems.get_filesystem(path)
    path = path.rstrip("/")
    if not filesystem.has_dirs():
        filesystem.delete([path + "/"])
    elif filesystem.exists(path):
        filesystem.delete([path])  # a directory goes with its contents


def remove_trees_named(parent: str, prefix: str) -> None:
    """Deletes every directory directly in `parent` whose name starts with
    `prefix`, with everything under it."""
    if is_local(parent):
        # Beam's match lists files only; an emptied folder is found by its name.
        if os.path.isdir(parent):
            for entry in os.scandir(parent):
                if entry.is_dir() and entry.name.startswith(prefix):
                    remove_tree(entry.path)
        return
    objects = FileSystems.match([FileSystems.join(parent, prefix + "*", "**")])[0].metadata_list
    if objects:
        FileSystems.delete([m.path for m in objects])


def delete_if_exists(path: str) -> None:
    """Deletes one file if it is there."""
    if FileSystems.exists(path):
        FileSystems.delete([path])


def _missing_bucket(folder: str) -> str | None:
    """The bucket of a gs:// folder, when it does not exist: looked up first, as
    a probe file written into no bucket fails, then retries its upload for
    minutes when it is collected, holding up the process."""
    if not folder.startswith(_GCS):
        return None
    from apache_beam.io.gcp.gcsio import GcsIO  # the gcp extra's: only for gs://

    bucket = folder[len(_GCS):].split("/", 1)[0]
    return bucket if GcsIO().get_bucket(bucket) is None else None


def check_writable(folder: str, flag: str = "--output") -> None:
    """Makes `folder` if it is missing, then creates and deletes a probe file in
    it; ValueError in one line naming the folder when any of that fails (no
    such bucket, under a regular file, a read-only filesystem, a bucket the
    credentials cannot write or delete in - the final step renames, which
    deletes)."""
    probe = FileSystems.join(folder, f".datagen-write-probe-{uuid.uuid4().hex}")
    try:
        bucket = _missing_bucket(folder)
        if bucket:
            raise ValueError(f"there is no bucket {bucket!r}")
        ensure_dir(folder)
        with FileSystems.create(probe) as f:
            f.write(b"probe")
        FileSystems.delete([probe])
    except Exception as e:  # noqa: BLE001 - whatever the filesystem says, in one line
        cause = e
        while cause.__cause__ is not None or cause.__context__ is not None:
            cause = cause.__cause__ or cause.__context__
        raise ValueError(f"{flag} {folder!r} is not writable: {type(cause).__name__}: "
                         f"{str(cause).splitlines()[0] if str(cause) else ''}") from None


def read_manifest(output: str) -> dict:
    """The manifest of the dataset in `output`; OSError when it has none, ValueError
    when it is not JSON."""
    with FileSystems.open(FileSystems.join(output, manifest.MANIFEST)) as f:
        return json.loads(f.read())


def write_text(path: str, text: str) -> None:
    """Writes `text` (UTF-8) to the file `path`, replacing it."""
    with FileSystems.create(path) as f:
        f.write(text.encode("utf-8"))


def write_failures(path: str, failures: Iterable[Mapping]) -> None:
    """Dead letters as JSON lines; written even when there are none, so the file
    always describes the latest run."""
    write_text(path, failures_jsonl(failures))

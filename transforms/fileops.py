"""Directory operations through Beam's FileSystems, alike on local disk and gs://.

Object stores have no directories: `gs://b/out/train/x` exists without any
`gs://b/out/train`, `mkdirs` is a no-op and deleting the "directory" object
fails or deletes nothing. Code that writes a dataset needs three things on
both kinds of store, and gets them here:

- `ensure_dir`: make the directory before a local rename into it;
- `remove_tree`: delete a directory and everything under it, at any depth;
- `delete_if_exists`: delete one file that may be absent.
"""

from __future__ import annotations

from apache_beam.io.filesystems import FileSystems

__all__ = ["ensure_dir", "remove_tree", "delete_if_exists"]


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


def delete_if_exists(path: str) -> None:
    """Deletes one file if it is there."""
    if FileSystems.exists(path):
        FileSystems.delete([path])

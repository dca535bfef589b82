"""Folders and files on any of Beam's filesystems (local disk, gs://), for whatever
writes or checks an output folder (the writer, verify, the launchers) or asks
whether a file is local (the readers)."""

from transforms.storage.folders import check_writable, read_manifest, write_failures

# What the launchers use; the writer and verify use the folders module whole.
__all__ = ["check_writable", "read_manifest", "write_failures"]

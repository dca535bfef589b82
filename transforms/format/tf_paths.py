"""Paths TensorFlow can open: gs:// as it is, or through a storage emulator.

TensorFlow's own GCS filesystem (behind tf.io.gfile and tf.data) has its
endpoint compiled in (`https://www.googleapis.com/storage/v1/`) and no
emulator setting: it ignores STORAGE_EMULATOR_HOST, which google-cloud-storage
(and so Beam and the pipelines) honour. Left alone, a reader on a machine
pointed at an emulator would read the real bucket of the same name, or fail.

So `tf_readable(url)`: without STORAGE_EMULATOR_HOST, or for any other
scheme, the url itself, which TensorFlow opens and streams (production).
With it, a gs:// object is fetched through google-cloud-storage from the
emulator into TensorFlow's in-memory filesystem (`ram://`), whose path is
returned. That copy is whole-file and in memory: meant for emulator-sized
data. Beam-free, like the reader that uses it.
"""

from __future__ import annotations

import os

import tensorflow as tf

__all__ = ["EMULATOR_ENV", "tf_readable"]

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


def tf_readable(url: str) -> str:
    """A path TensorFlow can open for `url`; FileNotFoundError if the emulator lacks it."""
    if not (url.startswith("gs://") and os.environ.get(EMULATOR_ENV)):
        return url
    from google.api_core.exceptions import NotFound
    from google.cloud import storage  # only on this route: a training job may lack it

    bucket, _, name = url[len("gs://"):].partition("/")
    try:
        data = storage.Client().bucket(bucket).blob(name).download_as_bytes()
    except NotFound:
        raise FileNotFoundError(f"{url} not found on the storage emulator at "
                                f"{os.environ[EMULATOR_ENV]}") from None
    copy = f"ram://{EMULATOR_ENV.lower()}/{bucket}/{name}"
    if tf.io.gfile.exists(copy):
        tf.io.gfile.remove(copy)  # ram:// appends to an existing file even in "wb" mode
    with tf.io.gfile.GFile(copy, "wb") as f:
        f.write(data)
    return copy

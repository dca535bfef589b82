"""A local Cloud Storage: `gcp-storage-emulator` (PyPI, the `test` extra) for tests.

`pytest_plugins` in conftest.py loads this; the session fixture `gcs_emulator`
starts one in-memory emulator on a free loopback port, creates a bucket and,
while tests run, sets:

- STORAGE_EMULATOR_HOST, which google-cloud-storage honours, so Beam's
  `gs://` filesystem and the reader's (transforms/format/tf_paths.py) talk to it;
- GOOGLE_APPLICATION_CREDENTIALS, an authorized-user file holding an access
  token that expires in 2999. Beam looks up Application Default Credentials
  before it makes a storage client; without any it would probe the GCE
  metadata server and retry with backoff for half a minute. This file is
  found at once, its token is never refreshed (no call to Google's token
  endpoint), and the emulator accepts any token.
"""

import json
import os
import subprocess
import sys

import pytest
from google.cloud import storage

from loopback import free_port, wait_until_listening

BUCKET = "datagen-test"


class GcsEmulator:
    """A running emulator with one bucket; `url(path)` is `gs://BUCKET/path`."""

    def __init__(self, bucket: str = BUCKET):
        self.bucket_name = bucket
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
             "--port", str(self.port), "--in-memory", "--default-bucket", bucket, "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_listening(self.port, self.process, "gcp-storage-emulator")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)

    def url(self, path: str) -> str:
        return f"gs://{self.bucket_name}/{path}"

    def bucket(self) -> storage.Bucket:
        """The bucket through a fresh client (one per call: clients are cheap here)."""
        return storage.Client().bucket(self.bucket_name)

    def upload(self, local_path, path: str) -> str:
        """Copies a local file to `gs://BUCKET/path`; returns that URL."""
        self.bucket().blob(path).upload_from_filename(str(local_path))
        return self.url(path)

    def objects(self, prefix: str) -> dict:
        """{name relative to `prefix`: bytes} of every object under `prefix`."""
        return {blob.name[len(prefix):]: blob.download_as_bytes()
                for blob in self.bucket().list_blobs(prefix=prefix)}


def _credentials_file(directory) -> str:
    path = os.path.join(directory, "adc.json")
    with open(path, "w") as f:
        json.dump({"type": "authorized_user", "client_id": "test", "client_secret": "test",
                   "refresh_token": "test", "token": "emulator-accepts-any-token",
                   "expiry": "2999-01-01T00:00:00Z"}, f)
    return path


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory):
    """A session-wide emulator and bucket; the environment points at it while tests run."""
    emulator = GcsEmulator()
    env = {"STORAGE_EMULATOR_HOST": emulator.endpoint,
           "GOOGLE_APPLICATION_CREDENTIALS": _credentials_file(tmp_path_factory.mktemp("adc"))}
    previous = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    yield emulator
    emulator.stop()
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value

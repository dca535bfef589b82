"""The Cloud Bigtable emulator (cbtemulator from the Google Cloud CLI) for tests.

`pytest_plugins` in conftest.py loads this; the session fixture starts one
emulator on a free loopback port and sets BIGTABLE_EMULATOR_HOST, which the
google-cloud-bigtable client and the `cbt` CLI both honour. Where the binary is
missing the Bigtable tests are skipped, except in CI (CI set), where they fail.
"""

import os
import shutil
import subprocess

import pytest

from loopback import free_port, wait_until_listening

_CANDIDATES = (
    "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator",
    "/usr/share/google-cloud-sdk/platform/bigtable-emulator/cbtemulator",
)


def find_cbtemulator() -> str | None:
    """The emulator binary: on PATH, next to gcloud, or in the SDK's usual places."""
    found = shutil.which("cbtemulator")
    gcloud = shutil.which("gcloud")
    candidates = list(_CANDIDATES)
    if gcloud:
        sdk = os.path.dirname(os.path.dirname(os.path.realpath(gcloud)))
        candidates.insert(0, os.path.join(sdk, "platform", "bigtable-emulator", "cbtemulator"))
    return found or next((c for c in candidates if os.access(c, os.X_OK)), None)


class Emulator:
    """A running emulator: `host` is what BIGTABLE_EMULATOR_HOST holds."""

    def __init__(self, binary: str):
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [binary, "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_listening(self.port, self.process, "cbtemulator")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def bigtable_emulator():
    """A session-wide emulator; BIGTABLE_EMULATOR_HOST points at it while tests run."""
    binary = find_cbtemulator()
    if binary is None:
        message = "cbtemulator (Google Cloud CLI's Bigtable emulator) not found"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    emulator = Emulator(binary)
    previous = os.environ.get("BIGTABLE_EMULATOR_HOST")
    os.environ["BIGTABLE_EMULATOR_HOST"] = emulator.host
    yield emulator
    emulator.stop()
    if previous is None:
        os.environ.pop("BIGTABLE_EMULATOR_HOST", None)
    else:
        os.environ["BIGTABLE_EMULATOR_HOST"] = previous

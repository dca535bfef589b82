"""Shared fixtures: the local runner without the Prism download attempt."""

import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from transforms.runner.runtime import local_runner

pytest_plugins = ["bigtable_emulator", "gcs_emulator"]


@pytest.fixture
def pipeline():
    """A TestPipeline on the in-process FnApiRunner (see transforms/runner/runtime.py)."""
    return TestPipeline(runner=local_runner())

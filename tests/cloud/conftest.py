"""Fixtures of the cloud tests: the wheel of this checkout that the SSH tests install on
the "box" (built once per session: ``pip wheel`` takes seconds on two cores)."""

import sys
from pathlib import Path

import pytest

from tokenwatt.cloud.remote_files import build_wheel

# The double and the fake runner are imported by their unique module names.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel of this checkout, shared by ``test_remote.py`` and ``test_cloud_e2e.py``.

    Each module keeps its own box virtual environment: the first test of each checks a
    fresh install from it.
    """
    return build_wheel(tmp_path_factory.mktemp("wheel"))

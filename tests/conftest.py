"""Suite-wide fixtures and the strict-skip rule for CI.

Tests that need a part this machine may lack (Debian's chromium, the vLLM virtual
environment, the GSM8K copy in ``../shared`` beside the clone) skip with a reason on a
developer's machine. Under ``TOKENWATT_STRICT_SKIPS=1``
(set by ``.ci/run``) such a skip fails the run instead, so CI cannot go green without them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"

_STRICT_MARKERS = ("browser", "engine", "vllm", "gsm8k")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("TOKENWATT_STRICT_SKIPS") != "1" or not report.skipped:
        return
    if any(item.get_closest_marker(m) for m in _STRICT_MARKERS):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under TOKENWATT_STRICT_SKIPS=1: {reason}"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's root folder."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the clone (CI lays it there); skips when absent."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent (the project's shared folder beside the clone)")
    return SHARED


@pytest.fixture(scope="session")
def gsm8k_dir(shared_dir: Path) -> Path:
    """The GSM8K copy for tests (never committed into the project)."""
    path = shared_dir / "data" / "gsm8k"
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path

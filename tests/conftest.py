"""Suite-wide fixtures, the test tiers and the strict-skip rule for CI.

Tiers. Plain ``python -m pytest`` runs the fast tier: every pure and in-process test. The
``e2e`` tier (``python -m pytest -m e2e``, run by ``.ci/run`` after the fast tier) holds the
tests that start ``tokenwatt`` or a server as a child process, SSH boxes and wheels, Ray
clusters, real engines, Chromium and MkDocs builds. ``e2e`` is applied here at collection,
from the test's folder (:data:`E2E_DIRS`, folders that are wholly slow) or its file's
basename (:data:`E2E_FILES`; basenames, so that a file keeps its tier when it moves into a
subfolder), and to every test marked ``engine``, ``vllm``, ``ray`` or ``browser``. The tiers
do not overlap: a test marked ``stress`` or ``shared`` is in that tier only.

Tests that need a part this machine may lack (Debian's chromium, the vLLM virtual
environment) skip with a reason on a developer's machine. Under ``TOKENWATT_STRICT_SKIPS=1``
(set by ``.ci/run``) such a skip fails the run instead, so CI cannot go green without them.

The GSM8K tests run on the excerpt committed in ``tests/fixtures/gsm8k/``. The few tests
that check the project's full data copies (marker ``shared``: the full GSM8K test split
against its pinned hash, the seed report against its original) are deselected by default
and run by ``.ci/run`` with ``-m shared``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.gsm8k_splits import EXCERPT_SPLITS, Gsm8kSplits

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"

TESTS = Path(__file__).resolve().parent

E2E_DIRS = frozenset({"engines"})
"""Folders under ``tests/`` whose every test is ``e2e``: real engines."""

E2E_FILES = frozenset(
    {
        # `tokenwatt cloud` as a child process; the SSH box and the wheel installed on it
        "test_cli_session.py",
        "test_cloud_e2e.py",
        "test_remote.py",
        # `tokenwatt collect`, `session`, `init` (or the simulator) as child processes
        "test_accuracy_sim.py",
        "test_replicate_e2e.py",
        "test_engine_launch.py",
        "test_fault_matrix.py",
        "test_init.py",
        "test_session.py",
        "test_signals.py",
        "test_workers.py",
        "test_workers_run.py",
        "test_e2e.py",
        "test_init_smoke_e2e.py",
        "test_mode_e2e.py",
        "test_point_e2e.py",
        "test_overload_recovery_sim.py",
        "test_window_scraper_race.py",
        "test_build_bad_input.py",
        "test_pipe_width.py",
        # MkDocs builds
        "test_site_mkdocs.py",
    }
)
"""Basenames of the test files whose every test is ``e2e``, wherever the file lies.

A basename two folders share cannot be listed here: such a file (``tests/collect/
test_run_warnings.py``) carries a module-level ``pytestmark = pytest.mark.e2e`` instead."""

E2E_TESTS = frozenset(
    {
        "test_dataset_e2e.py::test_collect_replays_the_dataset_on_the_chat_api",
        "test_outside_input.py::test_a_report_names_the_run_file_of_an_over_long_label",
        "test_outside_input.py::test_a_session_whose_spec_is_itself_gets_one_line",
        "test_point.py::test_a_fixed_load_run_names_its_loads_as_the_tables_do",
    }
)
"""``basename::function`` of the single ``e2e`` tests in files whose other tests are fast."""

E2E_FIXTURES = frozenset({"sim_run"})
"""Fixtures that start ``tokenwatt`` as a child process: a test that uses one is ``e2e``
(``sim_run``: ``tests/sim/conftest.py``'s run of ``collect`` against the simulator)."""

E2E_MARKERS = ("engine", "vllm", "ray", "browser")
"""Markers that imply ``e2e``."""

SLOW_TIMEOUT_S = 900
"""pytest-timeout's limit for the vLLM tests, whose session server starts in minutes on
two cores (the ini's ``timeout`` holds for every other test)."""

_STRICT_MARKERS = ("browser", "engine", "vllm", "shared", "e2e")


def tier_of(item: pytest.Item) -> str | None:
    """``"e2e"`` for a test of that tier, else None (fast, or already ``stress``/``shared``)."""
    if item.get_closest_marker("stress") or item.get_closest_marker("shared"):
        return None
    path = Path(str(item.path))
    try:
        folders = path.relative_to(TESTS).parts[:-1]
    except ValueError:
        folders = ()
    name = getattr(item, "originalname", item.name)
    if E2E_DIRS.intersection(folders) or path.name in E2E_FILES:
        return "e2e"
    if f"{path.name}::{name}" in E2E_TESTS or E2E_FIXTURES.intersection(item.fixturenames):
        return "e2e"
    if any(item.get_closest_marker(m) for m in E2E_MARKERS):
        return "e2e"
    return None


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the ``e2e`` tier, and give the vLLM tests a longer timeout."""
    for item in items:
        if tier_of(item) == "e2e":
            item.add_marker(pytest.mark.e2e)
        if item.get_closest_marker("vllm") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


_TERMINAL_ENV = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, on the controller: hand each worker this run's ``COLUMNS`` and ``LINES``
    (a worker starts with 80 and 24 set, and the piped-table tests need them as given)."""
    node.workerinput["terminal_env"] = {k: os.environ.get(k) for k in _TERMINAL_ENV}


def pytest_configure(config: pytest.Config) -> None:
    """In a pytest-xdist worker: ``COLUMNS`` and ``LINES`` as the controller had them."""
    given = getattr(config, "workerinput", {}).get("terminal_env")
    if given is None:
        return
    for key, value in given.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


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
    """The project's shared data folder beside the clone, for tests marked ``shared``.

    Skips when absent (such tests are deselected by default; ``.ci/run`` runs them strictly).
    """
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent (the project's shared data folder beside the clone)")
    return SHARED


@pytest.fixture(scope="session")
def gsm8k() -> Gsm8kSplits:
    """The committed excerpt: GSM8K's first 45 test rows and first 5 train rows (MIT)."""
    return EXCERPT_SPLITS


@pytest.fixture(scope="session")
def gsm8k_full(shared_dir: Path) -> Gsm8kSplits:
    """The full GSM8K test split (and the first 200 train rows) in the shared data folder."""
    path = shared_dir / "data" / "gsm8k"
    if not (path / "test.jsonl").is_file():
        pytest.skip(f"{path} must hold GSM8K's test.jsonl and train-first200.jsonl")
    return Gsm8kSplits(path / "test.jsonl", path / "train-first200.jsonl")

"""``--ray-address`` and ``measurement.ray_address``: recorded in the spec outside the
fingerprint, refused with a clear error (exit 2, nothing written) without Ray or with the
closed loop, and the pool it asks for. No Ray cluster is started here."""

from __future__ import annotations

import shutil
import socket
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.collect.load.pool.choice import pool_for
from tokenwatt.collect.load.pool.pool_window import WorkerStartError
from tokenwatt.collect.load.pool.ray_pool import RayPool
from tokenwatt.collect.load.pool.workers import WorkerPool
from tokenwatt.collect.plan.runfile import adjust_run_spec
from tokenwatt.records import load_spec
from tokenwatt.records.spec.spec import fingerprint

REPO = Path(__file__).resolve().parents[4]
SPEC = REPO / "specs" / "sim-demo.spec.yaml"
ARGS = ["collect", "--spec", SPEC.name, "--role", "baseline", "--label", "x", "--out", "run.json"]
NO_RAY = "needs Ray, which is not installed: pip install 'tokenwatt-bench[ray]'"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copy(SPEC, tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_address_is_recorded_in_the_spec_outside_the_fingerprint() -> None:
    plain = load_spec(SPEC)
    spread = adjust_run_spec(plain, None, workers="3", ray_address=" 10.0.0.7:6379 ")
    assert plain.measurement.ray_address is None
    assert spread.measurement.ray_address == "10.0.0.7:6379"
    assert fingerprint(plain) == fingerprint(spread)


def test_the_pool_a_spec_asks_for() -> None:
    spec = load_spec(SPEC)
    assert pool_for(spec, 1) is None
    local = pool_for(spec, 3)
    assert isinstance(local, WorkerPool) and local.workers == 3
    per_node = pool_for(adjust_run_spec(spec, None, ray_address="auto"), 1)
    assert isinstance(per_node, RayPool) and (per_node.address, per_node.workers) == ("auto", None)
    auto = pool_for(adjust_run_spec(spec, None, workers="auto", ray_address="h:1"), 1)
    assert isinstance(auto, RayPool) and auto.workers is None
    spread = pool_for(adjust_run_spec(spec, None, workers="4", ray_address="h:1"), 4)
    assert isinstance(spread, RayPool) and spread.workers == 4


def test_an_empty_address_is_refused(here: Path) -> None:
    result = CliRunner().invoke(cli, [*ARGS, "--ray-address", " "])
    assert result.exit_code == 2, result.output
    assert result.output == "error: --ray-address: is empty\n"
    assert not (here / "run.json").exists()


def test_without_ray_the_flag_is_one_clear_error(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    result = CliRunner().invoke(cli, [*ARGS, "--ray-address", "127.0.0.1:1"])
    assert result.exit_code == 2, result.output
    assert result.output == f"error: --ray-address: {NO_RAY}\n"
    assert not (here / "run.json").exists()


def test_without_ray_the_spec_field_is_named(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = yaml.safe_load(SPEC.read_text())
    data["measurement"]["ray_address"] = "127.0.0.1:1"
    (here / SPEC.name).write_text(yaml.safe_dump(data))
    monkeypatch.setitem(sys.modules, "ray", None)
    result = CliRunner().invoke(cli, ARGS)
    assert result.exit_code == 2, result.output
    assert result.output == f"error: {SPEC.name}: measurement.ray_address: {NO_RAY}\n"
    assert not (here / "run.json").exists()


def test_the_closed_loop_is_refused(here: Path) -> None:
    args = [*ARGS, "--profile", "concurrency", "--ray-address", "127.0.0.1:1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output == (
        "error: --ray-address: Ray workers cannot drive a closed loop yet (measurement.profile: "
        "concurrency runs its clients in this process); leave the Ray address out\n"
    )
    assert not (here / "run.json").exists()


def test_an_unreachable_cluster_is_a_clear_error_within_seconds() -> None:
    """``ray.init`` alone would retry an address where nothing listens without end."""
    ray = pytest.importorskip("ray")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])  # closed again: nothing listens there
    pool = RayPool(f"127.0.0.1:{port}")
    started = time.monotonic()
    with pytest.raises(WorkerStartError, match=f"cannot reach the Ray cluster at 127.0.0.1:{port}"):
        pool.start()
    assert time.monotonic() - started < 10.0
    assert not ray.is_initialized()

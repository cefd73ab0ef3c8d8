"""Workers as Ray actors on a real two-node Ray cluster on this machine, against the
simulated engine: the merged window equals one process's, a skewed actor clock is measured
and corrected, a killed actor leaves a valid flagged window, and ``collect --ray-address``
runs end to end.

One cluster (a head and one more node, two CPUs each as Ray counts them, small object
stores) and one pool (one actor per node, worker 1's clock skewed +5 s) serve the whole
module: starting Ray takes about 20 s on two cores. The second CPU of each node is for
the actors of the ``collect --ray-address`` run. Every node listens on 127.0.0.1 only: on
Linux ``ray.init`` turns a loopback address into the host's own address before it connects
(``ray._private.services.resolve_ip_for_localhost``) unless Ray's multi-node support for
Windows and macOS is off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: the loopback address
is then every node's address), which ``tests/collect/conftest.py`` sets before Ray is first
imported and which the nodes' processes inherit; the fixture asserts that no node has
another address. Marked ``ray`` (deselect with ``-m 'not ray'``); the default test command
runs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.collect.load.arrivals import window_schedule
from tokenwatt.collect.load.loadgen import run_window
from tokenwatt.collect.load.pool.ray_pool import RayPool
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.records.run.window import WindowSummary

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "sim"))
from sim_process import SimProcess, start_sim
from test_workers import (
    Recorded,
    _percentiles_are_of_the_union,
    config,
    killed_mid_window,
    offsets,
    prompts,
)

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[4]
SKEW_S = 5.0
"""Worker 1's clock runs this far ahead of the driver's (s, test-only option)."""
STORE_BYTES = 80 * 1024 * 1024
"""Each node's object store (Ray's floor is 75 MiB): the messages are small."""
WAIT_S = 60.0
"""Upper bound on any wait (s): about the machine, not the tool."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    # The actors' processes must import this checkout's tokenwatt (the nodes' processes
    # inherit the environment), whichever copy is installed.
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), before) if p)
    node = {"num_cpus": 2, "object_store_memory": STORE_BYTES}
    try:
        c = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
        c.add_node(**node)
        c.wait_for_nodes()
        import ray

        ray.init(address=c.address)
        try:
            # Loopback only: nothing of the test cluster is reachable from another host.
            assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        finally:
            ray.shutdown()
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
    try:
        yield c
    finally:
        c.shutdown()


@pytest.fixture(scope="module")
def pool(cluster: Any) -> Iterator[RayPool]:
    with RayPool(cluster.address, clock_skew_s=(0.0, SKEW_S)) as workers:
        yield workers


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    proc = start_sim("--time-scale", "0.2")
    try:
        yield proc
    finally:
        proc.stop()


def test_one_actor_per_node_and_the_merged_window_equals_one_process(
    pool: RayPool, sim: SimProcess
) -> None:
    import ray

    rate, warmup, duration, seed = 40.0, 0.3, 2.0, 5
    plan = WindowPlan(
        rate_rps=rate, duration_s=duration, warmup_s=warmup, seed=seed, keep_load=False
    )
    one_drawn, ray_drawn = Recorded(prompts()), Recorded(prompts())
    one = asyncio.run(run_window(config(sim.endpoint), plan, one_drawn))
    two = pool.run_window(config(sim.endpoint), plan, ray_drawn)
    schedule = window_schedule(rate, warmup_s=warmup, duration_s=duration, tail_s=0.0, seed=seed)
    # The same requests at the same scheduled offsets on the driver's clock, although
    # worker 1's clock is 5 s ahead.
    assert len(one.requests) == len(two.requests) == len(schedule) > 60
    np.testing.assert_allclose(offsets(one, warmup), schedule, atol=1e-6)
    np.testing.assert_allclose(offsets(two, warmup), schedule, atol=1e-6)
    assert [s.prompt for s in one_drawn.drawn] == [s.prompt for s in ray_drawn.drawn]
    asked = [(r.prompt_ids_sent, r.max_tokens, r.in_window) for r in two.requests]
    assert asked == [(r.prompt_ids_sent, r.max_tokens, r.in_window) for r in one.requests]
    s1, s2 = one.summary, two.summary
    in_window = int(np.count_nonzero(schedule >= warmup))
    assert s1.requests == s2.requests == in_window
    assert s2.workers == 2 and s2.errors == 0 and s2.completed == in_window and s2.valid
    assert s2.input_tokens == s1.input_tokens and s2.output_tokens == s1.output_tokens
    window_index = [i for i, o in enumerate(schedule) if o >= warmup]
    assert [w.requests for w in s2.worker_lag] == [
        sum(1 for i in window_index if i % 2 == k) for k in (0, 1)
    ]
    _percentiles_are_of_the_union(s2, [r for r in two.requests if r.in_window])
    # One actor on each node of the cluster, named in the record.
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(nodes) == 2
    assert {w.node_id for w in s2.worker_lag} == nodes
    assert all(w.host for w in s2.worker_lag)
    WindowSummary.model_validate_json(s2.model_dump_json())


def test_a_skewed_actor_clock_is_measured_and_sends_on_the_drivers_schedule(
    pool: RayPool, sim: SimProcess
) -> None:
    rate, duration = 40.0, 2.0
    before = time.perf_counter()
    result = pool.run_window(
        config(sim.endpoint),
        WindowPlan(rate_rps=rate, duration_s=duration, warmup_s=0.0, seed=12, keep_load=False),
        prompts(11),
    )
    after = time.perf_counter()
    lag0, lag1 = result.summary.worker_lag
    assert lag0.clock_offset_ms is not None and lag1.clock_offset_ms is not None
    assert lag0.clock_offset_uncertainty_ms is not None
    assert lag1.clock_offset_uncertainty_ms is not None
    # Cristian's bound: the true offsets are 0 and exactly 5 s (both nodes read this
    # machine's CLOCK_MONOTONIC); 1e-3 ms covers the record's rounding to 4 decimals.
    assert abs(lag0.clock_offset_ms) <= lag0.clock_offset_uncertainty_ms + 1e-3
    assert abs(lag1.clock_offset_ms - SKEW_S * 1e3) <= lag1.clock_offset_uncertainty_ms + 1e-3
    assert lag1.clock_offset_uncertainty_ms < 500.0  # a round trip on 127.0.0.1
    # Worker 1 sent on the driver's schedule: its sends, on the driver's clock, fall within
    # the call (not 5 s later), each at most a fraction of a second after its slot.
    mine = [r for i, r in enumerate(result.requests) if i % 2 == 1]
    assert len(mine) > 30
    assert all(before < r.scheduled_s <= r.sent_s < after for r in mine)
    lags = [r.sent_s - r.scheduled_s for r in mine]
    assert max(lags) < 0.5, max(lags)
    assert all(r.finished_s is not None and r.finished_s < after for r in mine)
    assert result.summary.valid and result.summary.errors == 0


def test_an_actor_killed_mid_window_leaves_a_valid_flagged_window(
    pool: RayPool, sim: SimProcess
) -> None:
    import ray

    victim = pool.actors()[1]
    node = pool.links()[1]
    _, again = killed_mid_window(pool, sim.endpoint, lambda: ray.kill(victim))
    assert victim not in pool.actors() and len(pool.actors()) == 2
    assert again.summary.worker_lag[1].node_id == getattr(node, "node_id", None)


def test_collect_with_ray_address_and_workers_spreads_the_actors_and_records_them(
    cluster: Any, pool: RayPool, sim: SimProcess, tmp_path: Path
) -> None:
    """``collect --ray-address --workers 2``: two more actors, SPREAD (one free CPU left on
    each node, so one on each), one fixed window; the record says how it was driven."""
    import ray

    out = tmp_path / "run.json"
    args = [
        "collect", "--endpoint", sim.endpoint, "--model", "tokenwatt-sim", "--rate", "20",
        "--duration", "2", "--warmup", "0.3", "--input-tokens", "16", "--output-tokens", "8",
        "--out", str(out), "--no-progress", "--no-accuracy",
        "--workers", "2", "--ray-address", cluster.address,
    ]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    assert record["spec"]["measurement"]["ray_address"] == cluster.address
    assert record["spec"]["measurement"]["workers"] == 2
    (repeat,) = record["repeats"]
    window = repeat["window"]
    assert window["workers"] == 2 and window["requests"] == 40 and window["errors"] == 0
    lags = window["worker_lag"]
    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert {w["node_id"] for w in lags} == nodes
    for w in lags:
        assert w["host"] and abs(w["clock_offset_ms"]) <= w["clock_offset_uncertainty_ms"] + 1e-3
    # The run's own actors are gone; the module's pool still has its two.
    assert len(pool.actors()) == 2

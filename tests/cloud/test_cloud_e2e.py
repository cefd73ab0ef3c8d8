"""The whole ``tokenwatt cloud session --runner ssh``, as a real subprocess, against the
Lambda API double (its instances come up at 127.0.0.1) and ``ssh_box.py`` (asyncssh's SSH
server, in its own process group, on a high port) standing in for the box, with the
simulated engine as every configuration's engine: the package installed on the "box" from
a wheel, the session run there, the records copied back with their cost, the report
written, the instance terminated; SIGTERM mid-session: the records back carry the cost, the
instance is terminated. And the local process killed with SIGKILL mid-run: the
box's watchdog (here a hook that tells the double the box powered off) ends the instance,
and ``tokenwatt cloud instances`` lists it until then."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cli_helpers import ROOT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collect"))
from engine_launch_helpers import REPO, sim_spec
from lambda_double import SHUTDOWN, LambdaDouble

from tokenwatt.records import RunRecord

asyncssh = pytest.importorskip("asyncssh")

SIM = "tokenwatt sim --port {port} --time-scale 2"
"""The engine, found on the box's PATH: the ``tokenwatt`` installed there."""

LIMIT_S = 240
"""Bound on one ``cloud session`` subprocess (s)."""

WATCHDOG_DELAY_S = 40
"""The test watchdog's deadline (s after it is armed): the box "powers off" then."""


class Box:
    """``ssh_box.py`` with its own HOME (the virtual environment and work folders land
    there), in its own process group so that everything it started can be killed."""

    def __init__(self, folder: Path, home: Path) -> None:
        self.folder, self.home = folder, home
        host = asyncssh.generate_private_key("ssh-ed25519")
        client = asyncssh.generate_private_key("ssh-ed25519")
        (folder / "host_key").write_bytes(host.export_private_key())
        self.key_file = folder / "client_key"
        self.key_file.write_bytes(client.export_private_key())
        self.key_file.chmod(0o600)
        (folder / "client_key.pub").write_bytes(client.export_public_key())
        (folder / "authorized_keys").write_bytes(client.export_public_key())
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        argv = [sys.executable, str(Path(__file__).with_name("ssh_box.py")), str(self.port)]
        argv += [str(folder / "host_key"), str(folder / "authorized_keys")]
        env = {**os.environ, "HOME": str(home)}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env,
                                     start_new_session=True)  # fmt: skip
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def stop_sessions(self) -> None:
        """End every ``tokenwatt session`` still running on the box (and its engines)."""
        for pid_file in self.home.glob("tokenwatt-sessions/*/session.pid"):
            if (pid_file.parent / "session.exit").exists():
                continue
            with contextlib.suppress(OSError, ValueError):
                group = os.getpgid(int(pid_file.read_text()))
                os.killpg(group, signal.SIGTERM)
                for _ in range(100):
                    time.sleep(0.1)
                    os.killpg(group, 0)
                os.killpg(group, signal.SIGKILL)

    def close(self) -> None:
        self.stop_sessions()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def box_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The box's HOME, shared by the module's tests: the first installs the package."""
    return tmp_path_factory.mktemp("box-home")


@pytest.fixture
def box(tmp_path: Path, box_home: Path) -> Iterator[Box]:
    folder = tmp_path / "ssh"
    folder.mkdir()
    b = Box(folder, box_home)
    yield b
    b.close()


@pytest.fixture
def double() -> Iterator[LambdaDouble]:
    with LambdaDouble(boot_polls=1) as d:
        yield d


def _local(tmp_path: Path, double: LambdaDouble, labels: list[str]) -> Path:
    """The operator's folder: a smoke-mode session of sim configurations, its spec, the
    suite an engine argument names, the API key."""
    local = tmp_path / "local"
    local.mkdir()
    sim_spec(local)
    shutil.copy(REPO / "specs" / "sim-suite.jsonl", local / "suite.jsonl")
    configs = [
        {"label": label, "role": "baseline" if n == 0 else "tuned", "engine_cmd": SIM,
         "engine_args": ["--accuracy-suite", "suite.jsonl"], "accuracy": False}
        for n, label in enumerate(labels)
    ]  # fmt: skip
    data = {
        "title": "Cloud e2e",
        "spec": "spec.yaml",
        "mode": "smoke",
        "runs_dir": "runs",
        "report": {"demo": True},
        "configurations": configs,
    }
    (local / "session.yaml").write_text(yaml.safe_dump(data))
    (local / "api.key").write_text(double.api_key + "\n")
    return local


def _start(local: Path, double: LambdaDouble, box: Box, wheel: Path, watchdog: str):
    argv = [
        sys.executable, "-m", "tokenwatt", "cloud", "session",
        "--api-key-file", "api.key", "--api-url", double.url, "--ssh-key", str(box.key_file),
        "--type", "gpu_1x_h100_sxm5", "--session", "session.yaml", "--yes",
        "--ledger", "ledger.jsonl", "--poll-s", "0.2", "--terminate-timeout-s", "10",
        "--api-max-wait-s", "0.01", "--deadline-min", "5",
        "--ssh-port", str(box.port), "--ssh-user", "tester", "--wheel", str(wheel),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENWATT_WATCHDOG_CMD": watchdog}
    return subprocess.Popen(
        argv, cwd=local, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def _kill(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def test_a_cloud_session_over_ssh_brings_back_costed_records_a_report_and_terminates(
    tmp_path: Path, double: LambdaDouble, box: Box, wheel: Path
) -> None:
    local = _local(tmp_path, double, ["a", "b"])
    armed = tmp_path / "armed"
    proc = _start(local, double, box, wheel, f"echo {{minutes}} > {armed}")
    try:
        out, err = proc.communicate(timeout=LIMIT_S)
    finally:
        _kill(proc)
    assert proc.returncode == 0, err[-3000:]
    (inst,) = double.instances.values()
    assert inst.status == "terminated" and double.live() == []
    assert f"{inst.id} terminated (confirmed)" in err
    # the watchdog was armed on the box: (300 s deadline + 900 s margin) / 60
    assert armed.read_text() == "20\n"
    assert "[a] " in out and "[b] " in out  # the remote output, labelled, live
    records = [RunRecord.model_validate_json((local / f"runs/{x}.json").read_text()) for x in "ab"]
    for record in records:
        assert record.complete and record.cost is not None
        assert record.cost.instance_id == inst.id and record.cost.terminate_confirmed
        assert record.cost.instance_type == "gpu_1x_h100_sxm5"
        assert record.cost.price_usd_per_hour == 3.29
        assert (local / "runs" / f"{record.label}.requests.jsonl.gz").is_file()
    costs = [r.cost for r in records if r.cost is not None]
    assert costs[0].session_cost_usd == costs[1].session_cost_usd
    assert costs[0].billed_s == costs[1].billed_s == 60.0 * -(-costs[0].session_s // 60)
    assert sum(c.share for c in costs) == pytest.approx(1.0)
    assert sum(c.cost_usd for c in costs) == pytest.approx(costs[0].session_cost_usd, abs=2e-6)
    report = json.loads((local / "reports/cloud-e2e.json").read_text())
    assert [c["label"] for c in report["configs"]] == ["a", "b"]
    for path in local.rglob("*"):
        if path.is_file() and path.name != "api.key":
            assert double.api_key not in path.read_text(errors="replace"), path
    assert double.api_key not in out + err


def _instances(local: Path, double: LambdaDouble) -> str:
    argv = [sys.executable, "-m", "tokenwatt", "cloud", "instances", "--api-key-file", "api.key"]
    argv += ["--api-url", double.url, "--ledger", "ledger.jsonl", "--api-max-wait-s", "0.01"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=local, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_sigkill_of_the_local_process_mid_run_leaves_the_watchdog_to_end_the_instance(
    tmp_path: Path, double: LambdaDouble, box: Box, wheel: Path
) -> None:
    local = _local(tmp_path, double, ["a"])
    armed = tmp_path / "armed"
    hook = (
        f"import time, urllib.request; time.sleep({WATCHDOG_DELAY_S}); "
        f"urllib.request.urlopen(urllib.request.Request("
        f"'{double.url.removesuffix('/api/v1')}{SHUTDOWN}127.0.0.1', data=b'x', method='POST'))"
    )
    watchdog = f'echo armed > {armed}; nohup {sys.executable} -c "{hook}" >/dev/null 2>&1 &'
    proc = _start(local, double, box, wheel, watchdog)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + LIMIT_S
        for line in proc.stdout:  # until the first line of the configuration's own run
            if line.startswith("[a] ") or time.monotonic() > deadline:
                break
        assert armed.exists(), "the watchdog was not armed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        (inst,) = double.instances.values()
        assert inst.status == "active"  # the local process left it running
        listed = _instances(local, double)
        assert f"{inst.id}  {inst.name}  active  gpu_1x_h100_sxm5" in listed
        deadline = time.monotonic() + WATCHDOG_DELAY_S + 30
        while inst.status != "terminated" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert inst.status == "terminated" and double.live() == []
        listed = _instances(local, double)
        assert f"{inst.id}  {inst.name}  terminated" in listed  # from the ledger, not running
    finally:
        _kill(proc)


def test_sigterm_over_ssh_stops_the_box_session_costs_what_came_back_and_terminates(
    tmp_path: Path, double: LambdaDouble, box: Box, wheel: Path
) -> None:
    local = _local(tmp_path, double, ["a", "b"])
    proc = _start(local, double, box, wheel, f"echo {{minutes}} > {tmp_path / 'armed'}")
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + LIMIT_S
        for line in proc.stdout:  # until a's run is over on the box
            if (line.startswith("[a] a: ") and "goodput" in line) or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        _kill(proc)
    assert proc.returncode == 143, err[-3000:]
    assert "stopped by SIGTERM" in err
    assert "cloud: session took " in out and "runs/a.json: $" in out
    (inst,) = double.instances.values()
    assert inst.status == "terminated" and f"{inst.id} terminated (confirmed)" in err
    back = sorted((local / "runs").glob("*.json"))
    assert local / "runs" / "a.json" in back
    for path in back:
        record = RunRecord.model_validate_json(path.read_text())
        assert record.cost is not None and record.cost.instance_id == inst.id, path
    assert not (local / "reports").exists()
    # the session on the box was stopped (SIGTERM) and said its exit status, not killed
    work = max(box.home.glob("tokenwatt-sessions/*"), key=lambda p: p.stat().st_mtime)
    assert (work / "session.exit").read_text().strip() in ("0", "143"), out[-2000:]

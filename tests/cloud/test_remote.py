"""The remote runner against a real SSH server on 127.0.0.1 (asyncssh's, in its own process:
``ssh_box.py``) standing in for the rented box, with the simulated engine as each
configuration's engine: the package installed from a wheel into a virtual environment on
the "box", the session run there detached, its output streamed with labels, its records
copied back; the server killed mid-run and started again; a refused key; the watchdog."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collect"))
from engine_launch_helpers import REPO, WAIT_S, sim_spec

from tokenwatt.cloud import RemoteError, RemoteTarget, arm_watchdog, run_remote_session
from tokenwatt.files import file_sha256

asyncssh = pytest.importorskip("asyncssh")

SIM = "tokenwatt sim --port {port} --time-scale 2"
"""The engine, found on the box's PATH: the ``tokenwatt`` installed there."""


class SshBox:
    """``ssh_box.py`` on a fixed port, killed and started again at will."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        host = asyncssh.generate_private_key("ssh-ed25519")
        client = asyncssh.generate_private_key("ssh-ed25519")
        (folder / "host_key").write_bytes(host.export_private_key())
        self.key_file = folder / "client_key"
        self.key_file.write_bytes(client.export_private_key())
        self.key_file.chmod(0o600)
        (folder / "authorized_keys").write_bytes(client.export_public_key())
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        argv = [sys.executable, str(Path(__file__).with_name("ssh_box.py")), str(self.port)]
        argv += [str(self.folder / "host_key"), str(self.folder / "authorized_keys")]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def target(self, key_file: Path | None = None) -> RemoteTarget:
        return RemoteTarget(
            host="127.0.0.1", port=self.port, user="tester", key_file=key_file or self.key_file
        )


@pytest.fixture
def box(tmp_path: Path) -> Iterator[SshBox]:
    folder = tmp_path / "ssh"
    folder.mkdir()
    b = SshBox(folder)
    b.start()
    yield b
    if b.proc is not None and b.proc.poll() is None:
        b.kill()


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The box's virtual environment, shared by the module's tests (the first installs)."""
    return tmp_path_factory.mktemp("box-venv") / "venv"


def _session(local: Path, configs: list[dict[str, object]]) -> Path:
    """A smoke-mode session in ``local`` (its spec beside it, a suite file an engine
    argument names relative to the folder it starts in)."""
    local.mkdir()
    sim_spec(local)
    shutil.copy(REPO / "specs" / "sim-suite.jsonl", local / "suite.jsonl")
    data = {
        "title": "Remote test",
        "spec": "spec.yaml",
        "mode": "smoke",
        "runs_dir": "runs-not-used-here",
        "report": {"demo": True},
        "configurations": configs,
    }
    path = local / "session.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _stop_remote(work: Path) -> None:
    """End a remote session a failed test left running."""
    pid = work / "session.pid"
    if pid.is_file() and not (work / "session.exit").exists():
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid.read_text()), signal.SIGTERM)


async def test_a_remote_session_streams_labelled_lines_and_copies_the_records_back(
    tmp_path: Path, box: SshBox, wheel: Path, venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "local"
    session = _session(
        local,
        [
            {
                "label": "a",
                "role": "baseline",
                "engine_cmd": SIM,
                "engine_args": ["--accuracy-suite", "suite.jsonl"],
                "accuracy": False,
            },
            {"label": "b", "role": "tuned", "engine_cmd": "false", "accuracy": False},
        ],
    )
    monkeypatch.chdir(local)
    work = tmp_path / "box" / "work"
    lines: list[tuple[str, str]] = []
    try:
        result = await asyncio.wait_for(
            run_remote_session(
                box.target(),
                session,
                tmp_path / "runs",
                deadline_s=WAIT_S,
                on_line=lambda label, line: lines.append((label, line)),
                package=wheel,
                remote_dir=str(work),
                venv=str(venv),
                poll_s=0.3,
            ),
            WAIT_S * 2,
        )
    finally:
        _stop_remote(work)
    runs = tmp_path / "runs"
    assert result.runs == [runs / "a.json"]
    assert result.failed == ["b"]
    assert result.exit_status == 1
    assert result.incomplete == []
    assert result.host_key_fingerprint.startswith("SHA256:")
    for name in ("a.json", "a.requests.jsonl.gz", "a.engine.log.gz"):
        assert (runs / name).read_bytes() == (work / "runs" / name).read_bytes(), name
    record = json.loads((runs / "a.json").read_text())
    assert record["complete"] is True
    # the files travelled in the mirrored layout, the session's runs folder replaced
    assert (work / "tree" / "suite.jsonl").read_bytes() == (local / "suite.jsonl").read_bytes()
    assert yaml.safe_load((work / "tree" / "session.yaml").read_text())["runs_dir"] == str(
        work / "runs"
    )
    # the installed package ran the session, not this checkout
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(  # noqa: ASYNC221 (the session is over)
        [venv / "bin" / "python", "-c", "import tokenwatt; print(tokenwatt.__file__)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=True,
    ).stdout  # fmt: skip
    assert where.startswith(str(venv / "lib"))
    assert (venv / ".tokenwatt-wheel.sha256").read_text() == file_sha256(wheel)
    remote = (work / "session.log").read_text().splitlines()
    assert result.log.read_text().splitlines() == remote
    streamed = [(label, line) for label, line in lines if line in set(remote)]
    assert [line for _, line in streamed] == remote
    by_label = {line: label for label, line in streamed}
    assert by_label.get("session [1/2] a: smoke run -> " + str(work / "runs" / "a.json")) == "a"
    assert by_label.get("session [2/2] b: smoke run -> " + str(work / "runs" / "b.json")) == "b"
    assert by_label.get("session: done (1 run records, 1 failed)") == "session"
    assert ("session", "failed: b: smoke run failed (collect exited with status 1)") in streamed
    labels_in_order = [label for label, _ in streamed]
    first_b = labels_in_order.index("b")
    assert set(labels_in_order[:first_b]) <= {"a"}  # no unlabelled line before the first run
    assert f"{wheel.name} is already installed" not in "\n".join(line for _, line in lines)


async def test_the_stream_resumes_after_the_ssh_server_is_killed_and_restarted(
    tmp_path: Path, box: SshBox, wheel: Path, venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "local"
    session = _session(
        local, [{"label": "a", "role": "baseline", "engine_cmd": SIM, "accuracy": False}]
    )
    monkeypatch.chdir(local)
    work = tmp_path / "box" / "work"
    lines: list[tuple[str, str]] = []
    first_a = asyncio.Event()

    def on_line(label: str, line: str) -> None:
        lines.append((label, line))
        if label == "a":
            first_a.set()

    async def drop() -> None:
        await asyncio.wait_for(first_a.wait(), WAIT_S)
        box.kill()
        await asyncio.sleep(2.0)  # the runner meets refused connections meanwhile
        assert not (work / "session.exit").exists(), "the session ended before the drop"
        box.start()

    try:
        dropper = asyncio.create_task(drop())
        result = await asyncio.wait_for(
            run_remote_session(
                box.target(),
                session,
                tmp_path / "runs",
                deadline_s=WAIT_S,
                on_line=on_line,
                package=wheel,
                remote_dir=str(work),
                venv=str(venv),
                poll_s=0.3,
                reconnect_s=30.0,
            ),
            WAIT_S * 2,
        )
        await dropper
    finally:
        _stop_remote(work)
    assert result.exit_status == 0 and result.failed == []
    remote = (work / "session.log").read_text().splitlines()
    notices = [line for _, line in lines if line.startswith("SSH connection lost")]
    assert len(notices) == 1, lines
    streamed = [line for _, line in lines if line in set(remote)]
    assert streamed == remote  # none lost, none repeated
    assert result.log.read_text().splitlines() == remote
    assert (tmp_path / "runs" / "a.json").read_bytes() == (work / "runs" / "a.json").read_bytes()


async def test_a_refused_key_is_a_remote_error_without_key_material(
    tmp_path: Path, box: SshBox
) -> None:
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    key_file = tmp_path / "stranger_key"
    key_file.write_bytes(stranger.export_private_key())
    key_file.chmod(0o600)
    with pytest.raises(RemoteError) as caught:
        await arm_watchdog(box.target(key_file), 60.0, command="true")
    message = str(caught.value)
    assert message.startswith(f"SSH to tester@127.0.0.1:{box.port} refused the key in {key_file}")
    for key in (key_file, box.key_file):
        pem = key.read_text().splitlines()[1:-1]
        assert not [part for part in pem if part in message]
    public = stranger.export_public_key().decode().split()[1]
    assert public not in message


async def test_the_watchdog_is_armed_with_the_deadline_plus_the_margin_in_minutes(
    tmp_path: Path, box: SshBox, monkeypatch: pytest.MonkeyPatch
) -> None:
    armed = tmp_path / "armed"
    await arm_watchdog(
        box.target(), 125.0, margin_s=300.0, command=f"echo {{minutes}} {{seconds}} > {armed}"
    )
    assert armed.read_text() == "8 425\n"  # 425 s → 7.08 min, rounded up
    monkeypatch.setenv("TOKENWATT_WATCHDOG_CMD", f"echo shutdown -h +{{minutes}} > {armed}")
    await arm_watchdog(box.target(), 3600.0)  # default margin: 900 s
    assert armed.read_text() == "shutdown -h +75\n"
    with pytest.raises(
        RemoteError, match=r"arming the watchdog on tester@127\.0\.0\.1:\d+ failed \(status 3\)"
    ):
        await arm_watchdog(box.target(), 60.0, command="echo no sudo here >&2; exit 3")

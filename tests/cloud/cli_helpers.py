"""Running ``python -m tokenwatt cloud ...`` as a real subprocess against the API double,
with the runner without SSH (``--runner fake_runner:FakeRunner``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from test_orchestrate import SESSION

ROOT = Path(__file__).resolve().parents[2]
SEED_SPEC = ROOT / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"


def workdir(tmp_path: Path, api_key: str) -> Path:
    """A folder with the session, its spec, an SSH key pair and the API key file."""
    shutil.copy(SEED_SPEC, tmp_path / "seed.spec.yaml")
    (tmp_path / "session.yaml").write_text(SESSION)
    (tmp_path / "id_test").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    (tmp_path / "id_test.pub").write_text("ssh-ed25519 AAAAC3NzaTEST test@box\n")
    (tmp_path / "api.key").write_text(api_key + "\n")
    return tmp_path


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "cloud")])
    e["FAKE_RUNNER_LOG"] = str(tmp_path / "runner.log")
    e.update(extra)
    return e


def argv(url: str, *more: str) -> list[str]:
    """``cloud session`` with the test-only options; ``more`` appended."""
    return [
        sys.executable, "-m", "tokenwatt", "cloud", "session",
        "--api-key-file", "api.key", "--api-url", url, "--ssh-key", "id_test",
        "--type", "gpu_1x_h100_sxm5", "--session", "session.yaml", "--yes",
        "--ledger", "ledger.jsonl", "--runner", "fake_runner:FakeRunner",
        "--poll-s", "0.02", "--terminate-timeout-s", "2", "--api-max-wait-s", "0.01",
        *more,
    ]  # fmt: skip


def start(tmp_path: Path, url: str, *more: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv(url, *more), cwd=tmp_path, env=env(tmp_path, **extra),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

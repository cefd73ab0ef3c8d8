"""``python -m tokenwatt cloud session`` as a real subprocess against the API double, with
the runner without SSH: the whole command, its signals and its exit statuses. In every case
the double's state shows no instance left running unless the output reported it, and the
API key appears in no output or file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import ROOT, start, workdir
from cli_helpers import argv as cli_argv
from lambda_double import LambdaDouble

from tokenwatt.records import RunRecord


@pytest.fixture
def double():
    with LambdaDouble() as d:
        yield d


def no_key_anywhere(key: str, tmp_path: Path, *texts: str) -> None:
    """The key is in no output and in no file but its own."""
    for text in texts:
        assert key not in text
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "api.key":
            assert key not in path.read_text(errors="replace"), path


def test_session_runs_costs_reports_and_terminates(double, tmp_path):
    workdir(tmp_path, double.api_key)
    proc = start(tmp_path, double.url)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "ESTIMATE (not a quote)" in out
    assert double.live() == [] and len(double.instances) == 1
    (inst,) = double.instances.values()
    assert inst.name.startswith("tokenwatt-") and inst.region == "us-west-3"
    base = RunRecord.model_validate_json((tmp_path / "runs/vllm-default.json").read_text())
    tuned = RunRecord.model_validate_json((tmp_path / "runs/vllm-fp8kv.json").read_text())
    assert base.cost is not None and tuned.cost is not None
    # 25 min and 15 min runs share one minute's bill at $3.29/h: 5/8 and 3/8.
    assert base.cost.billed_s == 60.0
    assert base.cost.session_cost_usd == pytest.approx(3.29 / 60, abs=1e-6)
    assert (base.cost.share, tuned.cost.share) == (0.625, 0.375)
    assert base.cost.cost_usd == pytest.approx(3.29 / 60 * 0.625, abs=1e-6)
    assert base.cost.instance_id == inst.id and base.cost.terminate_confirmed
    assert base.cost.session_id == tuned.cost.session_id == inst.name.removeprefix("tokenwatt-")
    report = json.loads((tmp_path / "reports/cloud-test.json").read_text())
    assert [c["label"] for c in report["configs"]] == ["vllm-default", "vllm-fp8kv"]
    assert (tmp_path / "runner.log").read_text().startswith("watchdog 127.0.0.1 ")
    no_key_anywhere(double.api_key, tmp_path, out, err)


def test_above_max_cost_launches_nothing(double, tmp_path):
    workdir(tmp_path, double.api_key)
    proc = start(tmp_path, double.url, "--max-cost-usd", "1")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "is above --max-cost-usd 1; nothing launched" in err
    assert double.instances == {}
    assert not any(r[1].endswith("/launch") for r in double.requests)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_the_run_terminates(double, tmp_path, sig, status):
    workdir(tmp_path, double.api_key)
    ready = tmp_path / "ready"
    proc = start(tmp_path, double.url, FAKE_RUNNER="hang", FAKE_RUNNER_READY=str(ready))
    deadline = time.monotonic() + 60
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), proc.communicate()[1]
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert f"stopped by {sig.name}" in err
    (inst,) = double.instances.values()
    assert inst.status == "terminated"
    assert f"{inst.id} terminated (confirmed)" in err
    no_key_anywhere(double.api_key, tmp_path, out, err)


def test_records_back_before_a_sigterm_still_get_their_cost(double, tmp_path):
    workdir(tmp_path, double.api_key)
    ready = tmp_path / "ready"
    proc = start(tmp_path, double.url, FAKE_RUNNER="partial", FAKE_RUNNER_READY=str(ready))
    deadline = time.monotonic() + 60
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), proc.communicate()[1]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    (inst,) = double.instances.values()
    assert inst.status == "terminated"
    base = RunRecord.model_validate_json((tmp_path / "runs/vllm-default.json").read_text())
    assert not (tmp_path / "runs/vllm-fp8kv.json").exists()
    assert base.cost is not None
    # the only record back carries the whole (one-minute) bill
    assert (base.cost.share, base.cost.billed_s) == (1.0, 60.0)
    assert base.cost.cost_usd == pytest.approx(3.29 / 60, abs=1e-6)
    assert base.cost.instance_id == inst.id and base.cost.terminate_confirmed
    assert "runs/vllm-default.json: $0.05 (100% of the bill)" in out
    assert not (tmp_path / "reports").exists()


def test_a_session_file_that_cannot_travel_launches_nothing(double, tmp_path):
    workdir(tmp_path, double.api_key)
    text = (tmp_path / "session.yaml").read_text()
    spec = tmp_path / "seed.spec.yaml"
    (tmp_path / "session.yaml").write_text(text.replace("spec: seed.spec.yaml", f"spec: {spec}"))
    proc = start(tmp_path, double.url)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert f"{tmp_path / 'session.yaml'}: spec: give the spec relative to the session file" in err
    assert double.instances == {}
    assert [r[1] for r in double.requests if "launch" in r[1] or "ssh-keys" in r[1]] == []
    assert "ESTIMATE" not in out


def test_terminate_never_confirmed_exits_3_naming_the_instance(double, tmp_path):
    double.terminate_never = True
    workdir(tmp_path, double.api_key)
    proc = start(tmp_path, double.url)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3
    (leaked,) = double.live()
    assert f"INSTANCE {leaked.id} (gpu_1x_h100_sxm5) COULD NOT BE CONFIRMED TERMINATED" in err
    assert f"tokenwatt cloud terminate {leaked.id}" in err
    no_key_anywhere(double.api_key, tmp_path, out, err)


def test_bad_key_exits_1_without_the_key(double, tmp_path):
    workdir(tmp_path, "secret_the-wrong-key_0123456789")
    proc = start(tmp_path, double.url)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "global/invalid-api-key" in err
    assert double.instances == {}
    no_key_anywhere("secret_the-wrong-key_0123456789", tmp_path, out, err)


def test_failed_configuration_terminates_and_writes_no_report(double, tmp_path):
    workdir(tmp_path, double.api_key)
    proc = start(tmp_path, double.url, FAKE_RUNNER="fail")
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "(failed: vllm-fp8kv); no report" in err
    assert not (tmp_path / "reports").exists()
    assert double.live() == []
    base = RunRecord.model_validate_json((tmp_path / "runs/vllm-default.json").read_text())
    assert base.cost is not None and base.cost.share == 1.0


def test_without_asyncssh_the_ssh_runner_fails_before_launching_naming_the_extra(double, tmp_path):
    workdir(tmp_path, double.api_key)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "asyncssh.py").write_text("raise ImportError('no asyncssh in this test')\n")
    argv = [a if a != "fake_runner:FakeRunner" else "ssh" for a in cli_argv(double.url)]
    pythonpath = os.pathsep.join([str(shadow), str(ROOT)])
    proc = subprocess.run(
        argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "needs asyncssh: pip install 'tokenwatt-bench[cloud]'" in proc.stderr
    assert double.instances == {}
    assert not any(r[1].endswith("/launch") for r in double.requests)

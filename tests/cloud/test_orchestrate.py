"""Launch, run, terminate in every case: the orchestration against the API double, with a
runner without SSH (tests/cloud/fake_runner.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_runner import FakeRunner
from lambda_double import LambdaDouble, error

from tokenwatt.cloud import (
    CloudError,
    CloudPlan,
    LambdaCloud,
    NoCapacityError,
    QuotaError,
    TerminateUnconfirmedError,
    Timing,
    read_ledger,
    run_cloud_session,
)
from tokenwatt.cloud.orchestrate import candidate_regions

FAST = Timing(poll_s=0.01, active_timeout_s=5, terminate_timeout_s=1)
SESSION = """title: Cloud test
spec: seed.spec.yaml
configurations:
  - {label: vllm-default, role: baseline}
  - {label: vllm-fp8kv, role: tuned, kv_dtype: fp8}
"""


@pytest.fixture
def double():
    with LambdaDouble() as d:
        d.keys.append({"id": "k0", "name": "mine", "public_key": "ssh-ed25519 AAAA"})
        yield d


def setup(double, tmp_path: Path, type_name: str = "gpu_1x_h100_sxm5", region=None):
    client = LambdaCloud(double.api_key, base_url=double.url, timeout_s=5, sleep=lambda _s: None)
    t = {t.name: t for t in client.instance_types()}[type_name]
    session = tmp_path / "session.yaml"
    session.write_text(SESSION)
    plan = CloudPlan(
        type=t, region=region, session_id="20261201-120000-abcd", ssh_key_name="mine",
        key_file=tmp_path / "id", session_file=session, runs_dir=tmp_path / "runs",
        deadline_s=3600,
    )  # fmt: skip
    return client, plan


def run(client, plan, runner, tmp_path, lines=None):
    lines = lines if lines is not None else []
    return run_cloud_session(
        client, plan, runner, ledger=tmp_path / "ledger.jsonl", echo=lines.append,
        on_line=lambda label, line: lines.append(f"[{label}] {line}"), timing=FAST,
        sleep=lambda _s: None,
    )  # fmt: skip


def test_success_runs_then_terminates(double, tmp_path):
    client, plan = setup(double, tmp_path)
    runner = FakeRunner("ok")
    lines: list[str] = []
    outcome = run(client, plan, runner, tmp_path, lines)
    assert outcome.terminate_confirmed
    assert outcome.region == "us-west-3"  # the first region with capacity
    assert [p.name for p in outcome.result.runs] == ["vllm-default.json", "vllm-fp8kv.json"]
    assert runner.hosts[0].ip == "127.0.0.1"
    inst = double.instances[outcome.instance_id]
    assert inst.name == "tokenwatt-20261201-120000-abcd"
    assert double.live() == []
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    assert [(e.id, e.terminated_at is not None) for e in ledger] == [(outcome.instance_id, True)]
    assert "[vllm-fp8kv] run record " + str(tmp_path / "runs" / "vllm-fp8kv.json") in lines


def test_a_bug_in_the_runner_still_terminates(double, tmp_path):
    client, plan = setup(double, tmp_path)
    with pytest.raises(RuntimeError, match="a bug in our own code"):
        run(client, plan, FakeRunner("bug"), tmp_path)
    assert len(double.instances) == 1
    assert double.live() == []


def test_ctrl_c_in_the_runner_still_terminates(double, tmp_path):
    class Interrupted(FakeRunner):
        def run(self, *a, **k):
            raise KeyboardInterrupt

    client, plan = setup(double, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run(client, plan, Interrupted(), tmp_path)
    assert len(double.instances) == 1
    assert double.live() == []


def test_terminate_that_fails_first_then_succeeds(double, tmp_path):
    double.terminate_failures = 1
    client, plan = setup(double, tmp_path)
    outcome = run(client, plan, FakeRunner("ok"), tmp_path)
    assert outcome.terminate_confirmed
    assert double.terminate_calls == 2
    assert double.live() == []


def test_terminate_that_never_succeeds_is_said_loudly(double, tmp_path):
    double.terminate_never = True
    client, plan = setup(double, tmp_path)
    lines: list[str] = []
    with pytest.raises(TerminateUnconfirmedError) as info:
        run(client, plan, FakeRunner("ok"), tmp_path, lines)
    (leaked,) = double.live()
    assert leaked.id in str(info.value)
    assert info.value.exit_code == 3
    loud = [line for line in lines if "COULD NOT BE CONFIRMED TERMINATED" in line]
    assert loud and leaked.id in loud[0] and f"tokenwatt cloud terminate {leaked.id}" in loud[0]
    ledger = read_ledger(tmp_path / "ledger.jsonl")
    assert [(e.id, e.terminated_at) for e in ledger] == [(leaked.id, None)]


def test_no_capacity_anywhere_launches_nothing(double, tmp_path):
    client, plan = setup(double, tmp_path, "gpu_8x_h100_sxm5")
    with pytest.raises(NoCapacityError, match="no region has capacity for gpu_8x_h100_sxm5"):
        run(client, plan, FakeRunner("ok"), tmp_path)
    assert double.instances == {}
    assert not any(r[1].endswith("/launch") for r in double.requests)


def test_capacity_gone_in_the_first_region_tries_the_next(double, tmp_path):
    client, plan = setup(double, tmp_path)
    double.types["gpu_1x_h100_sxm5"]["regions"] = ["us-south-1"]  # after the listing
    lines: list[str] = []
    outcome = run(client, plan, FakeRunner("ok"), tmp_path, lines)
    assert outcome.region == "us-south-1"
    assert any("no capacity for gpu_1x_h100_sxm5 in us-west-3" in line for line in lines)
    assert double.live() == []


def test_quota_refusal(double, tmp_path):
    double.script[("POST", "/launch")] = [
        error(400, "global/quota-exceeded", "Quota exceeded.", "Contact support.")
    ]
    client, plan = setup(double, tmp_path)
    with pytest.raises(QuotaError):
        run(client, plan, FakeRunner("ok"), tmp_path)
    assert double.instances == {}


def test_lost_launch_answer_finds_the_instance_by_name(double, tmp_path):
    double.launch_then_fail = True
    client, plan = setup(double, tmp_path)
    lines: list[str] = []
    with pytest.raises(CloudError, match="HTTP 502"):
        run(client, plan, FakeRunner("ok"), tmp_path, lines)
    (inst,) = double.instances.values()
    assert inst.status == "terminated"
    assert any(f"found {inst.id} named tokenwatt-" in line for line in lines)


def test_not_active_in_time_terminates(double, tmp_path):
    double.boot_polls = 10_000
    client, plan = setup(double, tmp_path)
    with pytest.raises(CloudError, match="not active after"):
        run_cloud_session(
            client, plan, FakeRunner("ok"), ledger=tmp_path / "l", echo=lambda _l: None,
            on_line=lambda *_a: None, timing=Timing(poll_s=0.001, active_timeout_s=0.05,
            terminate_timeout_s=1), sleep=lambda _s: None,
        )  # fmt: skip
    assert double.live() == []


def test_region_asked_for_without_capacity(double, tmp_path):
    _client, plan = setup(double, tmp_path)
    with pytest.raises(NoCapacityError, match=r"no capacity in us-east-1 now \(regions with"):
        candidate_regions(plan.type, "us-east-1")


def test_ledger_holds_nothing_secret(double, tmp_path):
    client, plan = setup(double, tmp_path)
    run(client, plan, FakeRunner("ok"), tmp_path)
    text = (tmp_path / "ledger.jsonl").read_text()
    assert double.api_key not in text
    assert [json.loads(line)["event"] for line in text.splitlines()] == ["launched", "terminated"]


def test_signals_during_termination_do_not_interrupt_it(double, tmp_path):
    import os
    import signal

    class Impatient(LambdaCloud):
        """Ctrl-C and SIGTERM arrive while the instance is being terminated."""

        def terminate(self, instance_id: str) -> None:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)
            super().terminate(instance_id)

    _client, plan = setup(double, tmp_path)
    client = Impatient(double.api_key, base_url=double.url, timeout_s=5, sleep=lambda _s: None)
    lines: list[str] = []
    outcome = run(client, plan, FakeRunner("ok"), tmp_path, lines)
    assert outcome.terminate_confirmed
    assert double.live() == []
    said = [line for line in lines if "waiting for its confirmation" in line]
    assert [line.split(":")[1].strip() for line in said] == ["SIGINT", "SIGTERM"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored

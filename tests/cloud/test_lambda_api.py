"""The Lambda Cloud client against the API double on 127.0.0.1."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from lambda_double import LambdaDouble, error

from tokenwatt.cloud.lambda_api import USER_AGENT, LambdaCloud, read_api_key
from tokenwatt.cloud.provider import (
    AuthError,
    CloudError,
    LaunchRequest,
    NoCapacityError,
    NotFoundError,
    QuotaError,
    RateLimitError,
)
from tokenwatt.errors import InputError


@pytest.fixture
def double():
    with LambdaDouble() as d:
        yield d


def client(double: LambdaDouble, key: str | None = None, waits: list[float] | None = None):
    sleep = waits.append if waits is not None else (lambda _s: None)
    return LambdaCloud(key or double.api_key, base_url=double.url, timeout_s=5, sleep=sleep)


def test_instance_types_prices_and_regions(double):
    types = client(double).instance_types()
    assert [t.name for t in types] == ["gpu_1x_a10", "gpu_1x_h100_sxm5", "gpu_8x_h100_sxm5"]
    h100 = types[1]
    assert h100.price_usd_per_hour == 3.29
    assert h100.gpus == 1
    assert h100.regions == ("us-west-3", "us-south-1")
    assert types[2].regions == ()


def test_every_request_has_basic_auth_and_user_agent(double):
    client(double).instances()
    _method, path, auth, agent = double.requests[-1]
    assert path == "/api/v1/instances"
    assert auth == "Basic " + base64.b64encode(f"{double.api_key}:".encode()).decode()
    assert agent == USER_AGENT
    assert agent.startswith("tokenwatt-bench/")


def test_launch_status_transitions_and_terminate(double):
    c = client(double)
    key = c.add_ssh_key("k", "ssh-ed25519 AAAA test")
    iid = c.launch(LaunchRequest("gpu_1x_h100_sxm5", "us-south-1", key.name, "tokenwatt-s1"))
    seen = [c.instance(iid).status for _ in range(3)]
    assert seen == ["booting", "booting", "active"]
    assert c.instance(iid).ip == "127.0.0.1"
    assert [i.name for i in c.instances()] == ["tokenwatt-s1"]
    c.terminate(iid)
    assert [c.instance(iid).status for _ in range(2)] == ["terminating", "terminated"]
    assert c.instances() == []


def test_no_capacity_is_its_own_error(double):
    c = client(double)
    c.add_ssh_key("k", "ssh-ed25519 AAAA test")
    with pytest.raises(NoCapacityError, match="insufficient-capacity"):
        c.launch(LaunchRequest("gpu_8x_h100_sxm5", "us-west-3", "k", "tokenwatt-x"))


def test_quota_error(double):
    double.script[("POST", "/launch")] = [
        error(400, "global/quota-exceeded", "Quota exceeded.", "Contact support.")
    ]
    with pytest.raises(QuotaError, match=r"global/quota-exceeded: Quota exceeded\. \(Contact"):
        client(double).launch(LaunchRequest("gpu_1x_a10", "us-east-1", "k", "n"))


def test_bad_key_is_auth_error_without_the_key(double):
    wrong = "secret_wrong-key_abcdef0123456789"
    with pytest.raises(AuthError) as info:
        client(double, key=wrong).instance_types()
    assert "global/invalid-api-key" in str(info.value)
    assert wrong not in str(info.value)


def test_unknown_instance_is_not_found(double):
    with pytest.raises(NotFoundError):
        client(double).instance("nope")


def test_429_waits_as_retry_after_says(double):
    double.script[("GET", "/instances")] = [
        (429, {"error": {"code": "global/unknown", "message": "slow down"}}, {"Retry-After": "2"}),
        (429, {}, {"Retry-After": "500"}),
    ]
    waits: list[float] = []
    assert client(double, waits=waits).instances() == []
    assert waits == [2.0, 60.0]  # the second wait cut to max_wait_s


def test_429_gives_up_after_the_retries(double):
    double.script[("GET", "/instances")] = [(429, {}, {})] * 6
    waits: list[float] = []
    with pytest.raises(RateLimitError, match="after 5 retries"):
        client(double, waits=waits).instances()
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0]


def test_launch_not_retried_after_a_server_error(double):
    double.script[("POST", "/launch")] = [error(502, "global/unknown", "bad gateway")]
    with pytest.raises(CloudError, match="HTTP 502"):
        client(double).launch(LaunchRequest("gpu_1x_a10", "us-east-1", "k", "n"))
    assert sum(1 for r in double.requests if r[1].endswith("/launch")) == 1


def test_key_echoed_by_server_is_scrubbed(double):
    double.script[("GET", "/instances")] = [
        error(400, "global/invalid-parameters", f"bad request for key {double.api_key}")
    ]
    with pytest.raises(CloudError) as info:
        client(double).instances()
    assert double.api_key not in str(info.value)
    assert "[redacted]" in str(info.value)


def test_read_api_key(tmp_path: Path):
    f = tmp_path / "key"
    f.write_text("  abc123secret\n")
    assert read_api_key(f) == "abc123secret"
    f.write_text("two words")
    with pytest.raises(InputError, match="more than one word") as info:
        read_api_key(f)
    assert "two words" not in str(info.value)
    with pytest.raises(InputError, match="folder"):
        read_api_key(tmp_path)

"""One network path for the probes, ``/metrics`` and the load: a proxy from the environment.

The rule (``tokenwatt.netpath``) on its own, then real HTTP on 127.0.0.1: a dead proxy in
the environment must not touch a loopback engine; a proxy that does apply carries every
request (the "proxy" is the scripted engine itself, which answers the absolute-form requests
a proxy receives) and the record names it; a dead proxy that applies is named in every
connection error.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from tokenwatt.collect.engine.engine_metrics import MetricsScraper, ScrapeError
from tokenwatt.collect.engine.probes import probe_engine
from tokenwatt.collect.load.http import Sender
from tokenwatt.collect.plan.options import CollectOptions
from tokenwatt.collect.run import measure_configuration
from tokenwatt.errors import EngineError, InputError
from tokenwatt.netpath import is_local_host, network_path
from tokenwatt.records import RequestResult, load_spec
from tokenwatt.records.spec.spec import PowerSpec, Spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripted_engine import MODEL, EngineProcess, start_engine

REPO = Path(__file__).resolve().parents[3]
SIM_SPEC = REPO / "tests" / "fixtures" / "sim.spec.yaml"
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


def dead_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*PROXY_VARS, "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    proc = start_engine("idle")
    try:
        yield proc
    finally:
        proc.stop()


# -- the rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("api.localhost", True),
        ("[::1]", True),
        ("169.254.10.20", True),
        ("[fe80::1%eth0]", True),
        ("10.0.0.5", False),
        ("192.168.1.2", False),
        ("localhost.example.com", False),
        ("engine.internal", False),
        # inet_aton's spellings and the unspecified and IPv4-mapped addresses
        ("127.1", True),
        ("2130706433", True),
        ("0x7f.1", True),
        ("0.0.0.0", True),
        ("[::]", True),
        ("[::ffff:127.0.0.1]", True),
        ("10.1", False),
        ("256.1.1.1", False),
    ],
)
def test_loopback_and_link_local_hosts_are_told_apart(host: str, local: bool) -> None:
    assert is_local_host(host) is local


def test_auto_keeps_loopback_direct_and_sends_other_hosts_through_the_proxy() -> None:
    env = {"HTTP_PROXY": "http://user:pw@proxy.corp:3128", "HTTPS_PROXY": "http://p2:8080"}
    local = network_path("http://127.0.0.1:8000/v1", "auto", env)
    assert local.proxy_url is None and local.error_note == ""
    assert local.why_direct is not None and "loopback" in local.why_direct
    remote = network_path("http://gpu-box:8000/v1", "auto", env)
    assert remote.proxy_url == "http://user:pw@proxy.corp:3128"
    assert remote.described == "http://proxy.corp:3128 (from HTTP_PROXY)"
    assert "pw" not in remote.error_note and "proxy.corp:3128" in remote.error_note
    assert remote.secrets == ["pw"]
    assert "pw" not in repr(remote)
    tls = network_path("https://gpu-box/v1", "auto", env)
    assert tls.described == "http://p2:8080 (from HTTPS_PROXY)"


def test_environment_and_off_and_no_proxy() -> None:
    env = {"http_proxy": "proxy.corp:3128", "HTTP_PROXY": "http://other:1", "no_proxy": ".lab"}
    # lower case wins, a bare host:port is an http proxy
    both = network_path("http://127.0.0.1:8000", "environment", env)
    assert both.described == "http://proxy.corp:3128 (from http_proxy)"
    assert network_path("http://gpu-box:8000", "off", env).proxy_url is None
    exempt = network_path("http://gpu.lab:8000", "environment", env)
    assert exempt.proxy_url is None and "no_proxy" in (exempt.why_direct or "")
    assert network_path("http://gpu-box", "auto", {"ALL_PROXY": "http://a:1"}).source == "ALL_PROXY"
    assert network_path("http://gpu-box", "auto", {}).proxy_url is None


def test_the_spec_takes_the_choice_and_refuses_others() -> None:
    spec = load_spec(SIM_SPEC)
    assert spec.engine.proxy == "auto"
    data = spec.model_dump(mode="json")
    data["engine"]["proxy"] = "sometimes"
    with pytest.raises(ValueError, match="proxy"):
        Spec.model_validate(data)


# -- real HTTP -----------------------------------------------------------------------------


def run_spec(tmp_path: Path, endpoint: str, proxy: str = "auto") -> Path:
    spec = load_spec(SIM_SPEC)
    spec = spec.model_copy(
        update={
            "hardware": spec.hardware.model_copy(update={"adapter": "none"}),
            "engine": spec.engine.model_copy(
                update={"endpoint": endpoint, "model": MODEL, "proxy": proxy}
            ),
            "measurement": spec.measurement.model_copy(
                update={"warmup_s": 0.2, "window_s": 1.0, "search_window_s": 0.5, "workers": 2}
            ),
            "sweep": spec.sweep.model_copy(update={"start_rps": 10.0, "max_rps": 20.0}),
            "power": PowerSpec(source="none"),
        }
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    return path


def collect(spec_path: Path, out: Path) -> object:
    opts = CollectOptions(
        spec_path=spec_path, label="p", role="baseline", out=out, accuracy=False, progress=False
    )
    return measure_configuration(opts)


def test_a_dead_proxy_in_the_environment_leaves_a_loopback_engine_measured(
    engine: EngineProcess, tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    dead = f"http://127.0.0.1:{dead_port()}"
    for name in PROXY_VARS:
        clean_env.setenv(name, dead)
    before = engine.stats()["prompts"]
    rec = collect(run_spec(tmp_path, engine.endpoint), tmp_path / "run.json")
    assert rec.complete is True  # type: ignore[attr-defined]
    assert rec.environment.proxy is None  # type: ignore[attr-defined]
    windows = [*rec.probes, *rec.repeats]  # type: ignore[attr-defined]
    assert windows
    for w in windows:
        assert w.window.errors == 0, w.window.failure_reason
        assert w.metrics is not None and w.metrics.scrapes > 0, w.metrics
    assert engine.stats()["prompts"] > before


def test_a_proxy_that_applies_carries_every_request_and_the_record_names_it(
    engine: EngineProcess, tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    # engine.invalid never resolves (RFC 6761): a request that went direct would fail.
    port = engine.url.rsplit(":", 1)[1]
    clean_env.setenv("HTTP_PROXY", f"http://someone:hunter2@127.0.0.1:{port}")
    before = engine.stats()
    out = tmp_path / "run.json"
    rec = collect(run_spec(tmp_path, f"http://engine.invalid:{port}/v1"), out)
    assert rec.complete is True  # type: ignore[attr-defined]
    assert rec.environment.proxy == f"http://127.0.0.1:{port} (from HTTP_PROXY)"  # type: ignore[attr-defined]
    for w in [*rec.probes, *rec.repeats]:  # type: ignore[attr-defined]
        assert w.window.errors == 0 and w.window.completed > 0
        assert w.metrics is not None and w.metrics.scrapes > 0
    after = engine.stats()
    assert after["prompts"] > before["prompts"]
    assert after["metrics_scrapes"] > before["metrics_scrapes"]
    assert "hunter2" not in out.read_text()


def test_a_dead_proxy_that_applies_is_named_by_every_connection_error(
    engine: EngineProcess, clean_env: pytest.MonkeyPatch
) -> None:
    dead = f"http://127.0.0.1:{dead_port()}"
    clean_env.setenv("HTTP_PROXY", dead)
    with pytest.raises(EngineError) as probe_error:
        probe_engine(engine.endpoint, None, timeout_s=3.0, proxy="environment")
    assert f"through the proxy {dead} (from HTTP_PROXY)" in str(probe_error.value)
    assert 'engine.proxy: "off"' in str(probe_error.value)

    async def scrape_and_send() -> tuple[str, RequestResult]:
        scraper = MetricsScraper(engine.endpoint, timeout_s=3.0, proxy="environment")
        client = scraper.open_client()
        scraper.client = client
        try:
            with pytest.raises(ScrapeError) as scrape_error:
                await scraper.read()
        finally:
            await client.aclose()
        path = network_path(engine.endpoint, "environment")
        async with aiohttp.ClientSession() as session:
            sender = Sender(session, engine.endpoint + "/completions", {}, 3.0, path=path)
            res = RequestResult(scheduled_s=0.0)
            await sender.send(res, b"{}")
            await sender.close()
        return str(scrape_error.value), res

    scrape_message, res = asyncio.run(scrape_and_send())
    assert f"through the proxy {dead}" in scrape_message
    assert res.error == "connect", res
    assert f"through the proxy {dead} (from HTTP_PROXY)" in (res.error_message or "")
    # and without the proxy the same engine answers
    assert probe_engine(engine.endpoint, None, timeout_s=3.0).served_models == [MODEL]


def test_a_socks_proxy_in_the_environment_leaves_loopback_direct_and_is_named_elsewhere(
    engine: EngineProcess, clean_env: pytest.MonkeyPatch
) -> None:
    """httpx would build a SOCKS transport for ALL_PROXY (and fail without its extra)
    before any override applied: the loopback engine is probed directly all the same, and
    a host the proxy would carry is refused in one line naming the variable."""
    clean_env.setenv("ALL_PROXY", "socks5://127.0.0.1:9")
    clean_env.setenv("HTTPS_PROXY", "socks5h://127.0.0.1:9")
    assert probe_engine(engine.endpoint, None, timeout_s=3.0).served_models == [MODEL]
    with pytest.raises(InputError) as info:
        network_path("http://gpu-box:8000/v1")
    (problem,) = info.value.problems
    assert problem.file == "ALL_PROXY" and "is a socks5 proxy" in problem.message
    assert 'engine.proxy: "off"' in problem.message
    assert network_path("http://gpu-box:8000/v1", "off").proxy_url is None


def test_a_bare_yaml_off_is_off() -> None:
    """YAML 1.1 reads `proxy: off` as false; the spec takes it as "off"."""
    data = load_spec(SIM_SPEC).model_dump(mode="json")
    data["engine"]["proxy"] = yaml.safe_load("proxy: off")["proxy"]
    assert data["engine"]["proxy"] is False
    assert Spec.model_validate(data).engine.proxy == "off"


async def test_a_proxy_password_is_a_secret_of_the_run_wherever_text_is_kept(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """A proxy that answers with the credentials it was sent (a 407 page) must not put the
    password into a request's kept error text, the record's sweep, or a scrape's error."""
    from tokenwatt.collect.load.loadconfig import LoadConfig
    from tokenwatt.collect.load.window_state import WindowState
    from tokenwatt.collect.run import run_secrets

    clean_env.setenv("HTTP_PROXY", "http://user:pa%40ss%21word@proxy.corp:3128")
    spec = load_spec(SIM_SPEC)
    spec = spec.model_copy(
        update={"engine": spec.engine.model_copy(update={"endpoint": "http://gpu-box:8000/v1"})}
    )
    assert run_secrets("k3y-value", spec) == ["k3y-value", "pa@ss!word"]
    cfg = LoadConfig.for_spec(spec, api_key="k3y-value")
    async with aiohttp.ClientSession() as session:
        sender = WindowState(cfg, session).sender
    assert "pa@ss!word" in sender.secrets
    res = RequestResult(scheduled_s=0.0)
    from tokenwatt.collect.load.http import fail

    fail(
        res,
        "http_407",
        None,
        message="HTTP 407",
        body=b"denied: user:pa@ss!word",
        secrets=sender.secrets,
    )
    assert "pa@ss!word" not in (res.error_body or "") and "[redacted]" in (res.error_body or "")


@pytest.mark.parametrize(
    "value", ["http://u:s3cr3t@127.0.0.1:abc", "http://p:99999", "http://[::1", "http://:8080"]
)
def test_a_proxy_variable_that_cannot_be_read_is_named_without_its_value(value: str) -> None:
    with pytest.raises(InputError) as info:
        network_path("http://gpu-box/v1", "auto", {"HTTP_PROXY": value})
    (problem,) = info.value.problems
    assert problem.file == "HTTP_PROXY" and "s3cr3t" not in str(info.value)


def test_the_recorded_proxy_has_no_path_and_a_blank_no_proxy_does_not_hide_another() -> None:
    env = {"HTTP_PROXY": "http://p:1/tok3nPath?x=1", "no_proxy": " ", "NO_PROXY": "*"}
    assert network_path("http://gpu-box/v1", "auto", env).proxy_url is None
    del env["NO_PROXY"]
    assert (
        network_path("http://gpu-box/v1", "auto", env).described == "http://p:1 (from HTTP_PROXY)"
    )

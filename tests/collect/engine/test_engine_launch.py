"""`collect --engine-cmd`: collect starts the engine, measures, and stops it however the run
ends. Real processes throughout: the simulated engine behind a bash wrapper that records
its pid (and, where asked, ignores SIGTERM or leaves a child behind), `collect` as a child
process, real signals."""

from __future__ import annotations

import gzip
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenwatt.cli import cli
from tokenwatt.records import RunRecord

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine_launch_helpers import (
    FAKE_SECRET,
    FAKE_TOKEN,
    assert_gone,
    collect_argv,
    env_with_secrets,
    finish,
    sim_cmd,
    sim_spec,
    start,
    wait_for_file,
)


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert FAKE_TOKEN not in text and FAKE_SECRET not in text


def test_collect_starts_measures_and_stops_the_engine_with_a_scrubbed_log(
    tmp_path: Path,
) -> None:
    pid, child = tmp_path / "engine.pid", tmp_path / "child.pid"
    spec = sim_spec(tmp_path)
    out = tmp_path / "runs" / "eng.json"
    cmd = sim_cmd(pid, child_pid=child)
    proc = start(collect_argv(spec, out, "--engine-cmd", cmd))
    stdout, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    assert "RuntimeWarning" not in stderr  # the log process is not started with -m
    assert_gone(pid, child)  # the engine and the child it left in its group
    log = tmp_path / "runs" / "eng.engine.log.gz"
    assert not (tmp_path / "runs" / "eng.engine.log").exists()  # replaced by the capped .gz
    text = gzip.decompress(log.read_bytes()).decode()
    assert "credential [redacted] and [redacted]" in text  # the wrapper's line, scrubbed
    assert "tokenwatt sim: serving bf16-kv on http://127.0.0.1:" in text
    raw = out.read_text()
    _no_secret(text, raw, stdout, stderr)
    record = RunRecord.model_validate_json(raw)
    assert record.complete and len(record.probes) >= 1
    ep = record.engine_process
    assert ep is not None and ep.stop == "sigterm" and ep.exit_code == -signal.SIGTERM
    port = int(record.spec.engine.endpoint.rsplit(":", 1)[1].split("/")[0])
    assert ep.argv == ["bash", "-c", shlex.split(cmd)[2].replace("{port}", str(port))]
    assert ep.health_url == f"http://127.0.0.1:{port}/v1/models"
    assert ep.log == log.as_posix() and ep.ready_after_s is not None
    assert ep.log_bytes == len(text.encode()) and ep.log_left_out_bytes == 0
    assert record.spec.engine.launch is not None and record.spec.engine.launch.cmd == cmd
    assert "--engine-cmd" in record.command
    assert record.environment.engine_name == "tokenwatt-sim"


def test_an_engine_that_exits_at_start_gives_its_log_tail_and_no_record(tmp_path: Path) -> None:
    spec = sim_spec(tmp_path)
    out = tmp_path / "eng.json"
    script = 'echo "loading the model"; echo "CUDA out of memory, key $FAKE_TOKEN_VAR"; exit 3'
    proc = start(collect_argv(spec, out, "--engine-cmd", shlex.join(["bash", "-c", script])))
    stdout, stderr = finish(proc)
    assert proc.returncode == 1, stderr
    assert "the engine exited with status 3 before http://127.0.0.1:" in stderr
    assert "CUDA out of memory, key [redacted]" in stderr
    assert f"the last lines of its log ({tmp_path / 'eng.engine.log.gz'})" in stderr
    _no_secret(stdout, stderr)
    assert not out.exists()
    assert not list(tmp_path.glob(".eng.json*")), "the lock beside --out was left behind"


def test_an_engine_that_never_becomes_healthy_is_stopped_after_the_timeout(
    tmp_path: Path,
) -> None:
    pid = tmp_path / "engine.pid"
    spec = sim_spec(tmp_path, launch={"cmd": "true", "startup_timeout_s": 2, "stop_grace_s": 1})
    out = tmp_path / "eng.json"
    script = f"echo $$ > {shlex.quote(str(pid))}; trap '' TERM; echo warming up; sleep 60"
    started = time.monotonic()
    proc = start(collect_argv(spec, out, "--engine-cmd", shlex.join(["bash", "-c", script])))
    _, stderr = finish(proc)
    took = time.monotonic() - started
    assert proc.returncode == 1, stderr
    assert "did not answer http://127.0.0.1:" in stderr and "within 2 s" in stderr
    assert "warming up" in stderr
    assert took < 30  # 2 s of start-up, 1 s of grace, Python's start: not the sleep's 60 s
    assert_gone(pid)
    assert not out.exists()


@pytest.mark.parametrize(
    ("sig", "status", "interrupted"),
    [(signal.SIGINT, 130, "ctrl-c"), (signal.SIGTERM, 143, "sigterm")],
)
def test_a_signal_to_collect_mid_window_stops_an_engine_that_ignores_sigterm(
    tmp_path: Path, sig: signal.Signals, status: int, interrupted: str
) -> None:
    pid = tmp_path / "engine.pid"
    spec = sim_spec(
        tmp_path, launch={"cmd": "true", "stop_grace_s": 1}, window_s=4.0, search_window_s=4.0
    )
    out = tmp_path / "eng.json"
    proc = start(collect_argv(spec, out, "--engine-cmd", sim_cmd(pid, ignore_term=True)))
    wait_for_file(out, proc)  # the first checkpoint: the first warm-up has begun
    time.sleep(1.5)  # inside the first 4 s window
    proc.send_signal(sig)
    stdout, stderr = finish(proc)
    assert proc.returncode == status, stderr
    assert "Traceback" not in stderr
    assert_gone(pid)
    record = RunRecord.model_validate_json(out.read_text())
    assert record.complete is False and record.interrupted == interrupted
    ep = record.engine_process
    assert ep is not None and ep.stop == "sigkill" and ep.exit_code == -signal.SIGKILL
    _no_secret(stdout, stderr, out.read_text())


def test_sigkill_to_collect_leaves_no_engine_behind(tmp_path: Path) -> None:
    """The log process is the watchdog: its parent gone, it stops the engine's group."""
    pid = tmp_path / "engine.pid"
    spec = sim_spec(tmp_path, launch={"cmd": "true", "stop_grace_s": 1}, window_s=4.0)
    out = tmp_path / "eng.json"
    proc = start(collect_argv(spec, out, "--engine-cmd", sim_cmd(pid)))
    wait_for_file(out, proc)
    proc.kill()
    finish(proc)
    time.sleep(1.5)  # the watchdog looks every 0.5 s
    assert_gone(pid)


def test_a_secret_on_the_engine_command_line_is_refused_without_repeating_it(
    tmp_path: Path,
) -> None:
    spec = sim_spec(tmp_path)
    out = tmp_path / "eng.json"
    result = CliRunner().invoke(
        cli,
        collect_argv(spec, out, "--engine-cmd", f"vllm serve m --api-key {FAKE_SECRET}")[3:],
    )
    assert result.exit_code == 2, result.output
    assert "--engine-cmd: cmd[3]: --api-key passes a secret on the command line" in result.output
    assert FAKE_SECRET not in result.output
    assert not out.exists()


def test_engine_log_beside_a_launched_engine_is_refused(tmp_path: Path) -> None:
    spec = sim_spec(tmp_path)
    log = tmp_path / "x.log"
    log.write_text("")
    argv = collect_argv(spec, tmp_path / "eng.json", "--engine-cmd", "true", "--engine-log")
    result = CliRunner().invoke(cli, [*argv[3:], str(log)])
    assert result.exit_code == 2, result.output
    assert "error: --engine-log: collect starts the engine" in result.output


def test_the_launch_section_is_validated_with_the_field_named(tmp_path: Path) -> None:
    both = sim_spec(tmp_path, launch={"cmd": "x", "argv": ["x"]})
    out = tmp_path / "eng.json"
    result = CliRunner().invoke(cli, collect_argv(both, out)[3:])
    assert result.exit_code == 2
    assert "engine.launch.argv: give exactly one of argv" in result.output
    secret_env = sim_spec(tmp_path, launch={"cmd": "x", "env": {"HF_TOKEN": FAKE_TOKEN}})
    result = CliRunner().invoke(cli, collect_argv(secret_env, out)[3:])
    assert result.exit_code == 2
    assert "engine.launch.env.HF_TOKEN: looks like a secret" in result.output
    assert FAKE_TOKEN not in result.output


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("VLLM_API_KEY", True),
        ("DB_PASSWORD", True),
        ("HUGGINGFACE_HUB_TOKEN", True),
        ("OPENAI_APIKEY", True),
        ("PWD", False),  # the working folder: scrubbing it would blank every path in the log
        ("OLDPWD", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("VLLM_CPU_KVCACHE_SPACE", False),
        ("HF_HUB_OFFLINE", False),
    ],
)
def test_which_variable_names_hold_secrets(name: str, secret: bool) -> None:
    from tokenwatt.records.spec.launch import secret_name

    assert secret_name(name) is secret


def test_the_log_process_imports_nothing_of_the_load_generator() -> None:
    """The log process must be reading before an engine that exits at once has finished:
    importing the collect package (the load generator, aiohttp, numpy, scipy) took 4.5 s on
    this busy 2-core machine, past the 5 s drain deadline with start-up added, and the
    engine's last line was lost from the error message."""
    code = (
        "import sys, tokenwatt.engine_log; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('tokenwatt'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["tokenwatt", "tokenwatt.engine_log", "tokenwatt.redact"]


def test_the_log_tail_of_an_engine_that_exits_at_start_carries_no_escape(
    tmp_path: Path,
) -> None:
    """An engine's colours, screen clears and title changes are shown as text, not sent to
    the user's terminal (tokenwatt.text.terminal_safe)."""
    spec = sim_spec(tmp_path)
    out = tmp_path / "eng.json"
    script = r"printf '\033[2J\033]0;pwned\007\033[31mboom\033[0m\r\n'; exit 3"
    proc = start(collect_argv(spec, out, "--engine-cmd", shlex.join(["bash", "-c", script])))
    _, stderr = finish(proc)
    assert proc.returncode == 1, stderr
    assert "\\x1b[2J\\x1b]0;pwned\\x07\\x1b[31mboom\\x1b[0m\n" in stderr
    assert "\x1b" not in stderr and "\x07" not in stderr and "\r" not in stderr


def test_the_spec_named_key_is_scrubbed_whatever_its_variable_is_called(tmp_path: Path) -> None:
    """``engine.api_key_env: BENCH_BEARER`` is no name the secret-name rule knows: the key
    still reaches neither the engine log nor the terminal (it did reach the log)."""
    import yaml

    key = "q7Wz-plainlooking-bearer-2291"
    spec = sim_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["engine"]["api_key_env"] = "BENCH_BEARER"
    spec.write_text(yaml.safe_dump(data))
    out = tmp_path / "eng.json"
    script = 'echo "serving with $BENCH_BEARER"; exit 3'
    argv = collect_argv(spec, out, "--engine-cmd", shlex.join(["bash", "-c", script]))
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env_with_secrets(), "BENCH_BEARER": key},
    )
    stdout, stderr = finish(proc)
    assert proc.returncode == 1, stderr
    log = gzip.decompress((tmp_path / "eng.engine.log.gz").read_bytes()).decode()
    assert "serving with [redacted]" in log
    assert "serving with [redacted]" in stderr
    assert key not in log + stdout + stderr

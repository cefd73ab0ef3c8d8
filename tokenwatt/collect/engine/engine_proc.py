"""An engine under ``collect``'s control: started, waited on until healthy, stopped.

``--engine-cmd`` (or the spec's ``engine.launch``) makes ``collect`` start the engine
itself:

* the command runs in a session of its own (``setsid``), so that stopping it signals its
  whole process tree (vLLM's API server and engine-core processes, a wrapper script's
  children), and a Ctrl-C at the terminal reaches ``collect`` only, which then stops the
  engine itself;
* its standard output and error go through :mod:`tokenwatt.engine_log` (a process
  of its own: scrubbed of credentials, line by line) into a log file beside the run record;
* ``collect`` polls the health URL (default: the endpoint's ``/v1/models``) until it
  answers HTTP 200, at most ``startup_timeout_s``; an engine that exits first, or never
  answers, stops the run with the tail of its log;
* however the run ends — done, an error, Ctrl-C, SIGTERM or SIGHUP to ``collect`` — the
  engine's process group gets SIGTERM, then SIGKILL after ``stop_grace_s``; a second
  signal while it stops sends SIGKILL at once. If ``collect`` itself is killed, the log
  process notices and stops the engine the same way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from tokenwatt.collect.engine.bounded_get import BodyTooLargeError, get_capped
from tokenwatt.collect.engine.endpoints import server_root_url
from tokenwatt.collect.engine.log_archive import archive_log, open_log_text
from tokenwatt.collect.engine.probes import scan_engine_log
from tokenwatt.engine_log import SECRETS_ENV, group_alive, secret_values, stop_group
from tokenwatt.errors import EngineError, InputError, Problem, TokenwattError
from tokenwatt.netpath import ProxyChoice, network_path
from tokenwatt.records import (
    PORT_PLACEHOLDER,
    EngineLaunch,
    EngineProcess,
    RunRecord,
    Spec,
    validate,
)
from tokenwatt.redact import scrub
from tokenwatt.text import terminal_safe

HEALTH_POLL_S = 0.5
"""Pause between health checks while the engine starts (s)."""
HEALTH_REQUEST_S = 2.0
"""Deadline of one health request (s)."""
LOG_DRAIN_S = 5.0
"""How long the log process may take to write the last lines once the engine is gone (s)."""
TAIL_LINES = 25
TAIL_BYTES = 64 * 1024
"""Most bytes of the log read for its tail: the last lines of a log of gigabytes."""
"""Lines of the engine's log quoted in a start-up error."""


class EngineStartError(EngineError):
    """The launched engine exited, or did not become healthy in time (it was stopped)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_port(url: str, port: int) -> str:
    """``url`` with its port replaced by ``port``."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass
class LaunchPlan:
    """A launch made concrete: the arguments with ``{port}`` filled in, and where to look.

    Attributes:
        argv: the command line.
        env: variables set on top of ``collect``'s environment.
        endpoint: the engine's OpenAI endpoint (its port is the filled-in one, if any).
        health_url: polled until it answers HTTP 200.
        log_path: the engine's log file.
        startup_timeout_s, stop_grace_s: see :class:`~tokenwatt.records.spec.launch.EngineLaunch`.
        proxy: the spec's ``engine.proxy``: the health check takes the path
            :func:`tokenwatt.netpath.network_path` gives, as every other request does.
    """

    argv: list[str]
    env: dict[str, str]
    endpoint: str
    health_url: str
    log_path: Path
    startup_timeout_s: float
    stop_grace_s: float
    proxy: ProxyChoice = "auto"


def plan_launch(
    launch: EngineLaunch, endpoint: str, log_path: Path, proxy: ProxyChoice = "auto"
) -> LaunchPlan:
    """Fill in ``{port}`` (a free port, which the endpoint then uses too) and the health URL.

    Raises:
        InputError: ``{port}`` is used but the endpoint has no host to put it on.
    """
    argv = launch.args()
    if any(PORT_PLACEHOLDER in a for a in argv):
        port = free_port()
        argv = [a.replace(PORT_PLACEHOLDER, str(port)) for a in argv]
        endpoint = with_port(endpoint, port)
    health = launch.health_url or f"{server_root_url(endpoint)}/v1/models"
    if PORT_PLACEHOLDER in health:
        health = health.replace(PORT_PLACEHOLDER, str(urlsplit(endpoint).port))
    if not health.startswith(("http://", "https://")):
        raise InputError([Problem("engine.launch", "health_url", "must be an http(s) URL")])
    return LaunchPlan(
        argv=argv,
        env=dict(launch.env),
        endpoint=endpoint,
        health_url=health,
        log_path=log_path,
        startup_timeout_s=launch.startup_timeout_s,
        stop_grace_s=launch.stop_grace_s,
        proxy=proxy,
    )


_LOGGER_MAIN = "import sys; from tokenwatt.engine_log import main; sys.exit(main(sys.argv[1:]))"


def engine_log_path(out: Path) -> Path:
    """The engine's log beside the run record: ``runs/X.json`` → ``runs/X.engine.log``."""
    return out.with_name(f"{out.stem}.engine.log")


@dataclass
class LaunchedEngine:
    """A started engine (use :func:`start_engine`, then :meth:`wait_healthy` and
    :meth:`stop`, or the instance as a context manager that stops it on exit).

    Attributes:
        plan: what was started.
        record: what the run record keeps (updated by :meth:`wait_healthy` and :meth:`stop`).
    """

    plan: LaunchPlan
    record: EngineProcess
    api_key: str | None = None
    process: subprocess.Popen[bytes] | None = None
    logger: subprocess.Popen[bytes] | None = None
    started: float = field(default_factory=time.monotonic)
    after_stop: Callable[[], None] | None = None
    log_file: Path | None = None
    """The log as it is now: the plain ``plan.log_path`` while the engine runs, its capped
    ``.gz`` once stopped (:func:`~tokenwatt.collect.engine.log_archive.archive_log`)."""

    def __enter__(self) -> LaunchedEngine:
        return self

    @property
    def pgid(self) -> int | None:
        """The engine's process group (it is started as a group leader, so its PID), whose
        processes tell the power meter which GPUs the engine uses; None before it starts."""
        return self.process.pid if self.process is not None else None

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines of the (scrubbed) log, from at most its last
        :data:`TAIL_BYTES`, made safe for a terminal (:func:`tokenwatt.text.terminal_safe`:
        an engine's colours, cursor moves and title changes are shown as ``\\x1b[...``)."""
        path = self.log_file or self.plan.log_path
        try:
            if path.name.endswith(".gz"):  # capped at a few MiB: read whole
                with open_log_text(path) as fh:
                    text = fh.read()[-TAIL_BYTES:]
            else:
                with path.open("rb") as f:
                    f.seek(0, 2)
                    f.seek(max(0, f.tell() - TAIL_BYTES))
                    text = f.read().decode("utf-8", errors="replace")
        except (OSError, EOFError):
            return "(no log)"
        return terminal_safe("\n".join(text.splitlines()[-lines:]))

    def wait_healthy(self) -> None:
        """Poll the health URL until it answers HTTP 200.

        Raises:
            EngineStartError: the engine exited first, or ``startup_timeout_s`` passed (the
                engine is stopped before this is raised); the message ends with its log's tail.
        """
        assert self.process is not None
        plan = self.plan
        deadline = self.started + plan.startup_timeout_s
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        options = network_path(plan.health_url, plan.proxy).httpx_options()
        with httpx.Client(headers=headers, **options) as client:
            while True:
                code = self.process.poll()
                if code is not None:
                    self.stop()
                    raise EngineStartError(
                        f"the engine exited with status {code} before {plan.health_url} "
                        f"answered; {self._tail_text()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    self.stop()
                    raise EngineStartError(
                        f"the engine did not answer {plan.health_url} with HTTP 200 within "
                        f"{plan.startup_timeout_s:g} s (engine.launch.startup_timeout_s); it "
                        f"was stopped; {self._tail_text()}"
                    )
                try:
                    # One deadline for the whole answer: a dripping server passes every
                    # per-read timeout.
                    deadline_s = min(HEALTH_REQUEST_S, left)
                    status, _ = get_capped(client, plan.health_url, 1 << 20, deadline_s=deadline_s)
                    if status == 200:
                        break
                except (httpx.HTTPError, BodyTooLargeError):
                    pass
                time.sleep(min(HEALTH_POLL_S, max(0.0, deadline - time.monotonic())))
        self.record.ready_after_s = round(time.monotonic() - self.started, 3)

    def _tail_text(self) -> str:
        tail = scrub(self.log_tail(), [self.api_key or ""])
        return f"the last lines of its log ({self.log_file or self.plan.log_path}):\n{tail}"

    def stop(self) -> EngineProcess:
        """Stop the engine's process group (SIGTERM, SIGKILL after the grace period) and
        let the log process write the last lines. Safe to call more than once.

        A Ctrl-C, SIGTERM or SIGHUP that arrives meanwhile sends SIGKILL at once; it is not
        raised again (the run is already stopping).
        """
        proc = self.process
        if proc is None:
            return self.record
        try:
            self._stop_group(proc)
        except KeyboardInterrupt:  # Ctrl-C, or collect's StopSignal: no more waiting
            _kill_group(proc.pid)
            proc.wait()
            self.record.stop = "sigkill"
        self.record.exit_code = proc.returncode
        self.process = None
        self._close_logger()
        self._archive_log()
        if self.after_stop is not None:
            # Often on the way out of an error: a failure here must not replace that one.
            with contextlib.suppress(TokenwattError):
                self.after_stop()
        return self.record

    def spec_for(self, spec: Spec) -> Spec:
        """``spec`` pointed at this engine's endpoint (its port filled in)."""
        engine = spec.engine.model_copy(update={"endpoint": self.plan.endpoint})
        return spec.model_copy(update={"engine": engine})

    def _stop_group(self, proc: subprocess.Popen[bytes]) -> None:
        grace = self.plan.stop_grace_s
        if proc.poll() is not None:
            self.record.stop = "exited"
            stop_group(proc.pid, grace)  # whatever it left behind in its group
            return
        self.record.stop = "sigterm"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.record.stop = "sigkill"
            _kill_group(proc.pid)
            proc.wait()
        deadline = time.monotonic() + grace
        while group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        _kill_group(proc.pid)  # children that outlived their parent's grace period

    def _archive_log(self) -> None:
        """The stopped engine's log compressed and capped for the archive; on a failure to
        write it the plain log stays, and the record points at it."""
        plain = self.plan.log_path
        if self.log_file is not None or not plain.is_file():
            return
        try:
            archived = archive_log(plain)
        except OSError:
            return
        self.log_file = archived.path
        self.record.log = archived.path.as_posix()
        self.record.log_bytes = archived.log_bytes
        self.record.log_left_out_bytes = archived.left_out_bytes

    def _close_logger(self) -> None:
        logger = self.logger
        if logger is None:
            return
        try:
            logger.wait(timeout=LOG_DRAIN_S)
        except subprocess.TimeoutExpired:  # a stray process kept the pipe open
            logger.kill()
            logger.wait()
        except KeyboardInterrupt:
            logger.kill()
            logger.wait()
        self.logger = None


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def apply_engine_cmd(spec: Spec, engine_cmd: str | None) -> Spec:
    """``spec`` with ``--engine-cmd`` as ``engine.launch.cmd`` (the launch section's other
    settings kept).

    Raises:
        InputError: the command cannot be split or passes a secret (named ``--engine-cmd``).
    """
    if engine_cmd is None:
        return spec
    base = spec.engine.launch
    data = base.model_dump(mode="json", exclude={"argv", "cmd"}) if base is not None else {}
    launch = validate(EngineLaunch, {**data, "cmd": engine_cmd}, "--engine-cmd", InputError)
    return spec.model_copy(update={"engine": spec.engine.model_copy(update={"launch": launch})})


def check_launch_options(spec: Spec, engine_log: Path | None) -> None:
    """Refuse ``--engine-log`` beside a launched engine, which writes its own log, and a
    ``{port}`` in ``engine.endpoint`` that no launch command fills in (only a launched
    engine's arguments choose the port; without them the URL has no port to send to).

    Raises:
        InputError: named ``--engine-log`` or ``engine.endpoint``.
    """
    launch = spec.engine.launch
    if launch is not None and engine_log is not None:
        message = (
            "collect starts the engine (engine.launch or --engine-cmd) and scans the log it "
            "writes beside the run record; leave --engine-log out"
        )
        raise InputError([Problem("--engine-log", "", message)])
    fills_port = launch is not None and any(PORT_PLACEHOLDER in a for a in launch.args())
    if PORT_PLACEHOLDER in spec.engine.endpoint and not fills_port:
        message = (
            f"has {PORT_PLACEHOLDER}, which only an engine collect starts fills in: give "
            f"--engine-cmd (or engine.launch) with {PORT_PLACEHOLDER} in its arguments, or "
            "the server's real port"
        )
        raise InputError([Problem("engine.endpoint", "", message)])


def track_engine(
    engine: LaunchedEngine,
    rec: RunRecord,
    write: Callable[[], None],
    served_warnings: list[str],
) -> None:
    """Keep the engine's process in ``rec``; once the engine has stopped, scan its whole log
    for known warnings and ``write`` the record again — only if the run wrote one (its
    ``finished`` time is set), so a run that failed before its first window writes none."""
    rec.engine_process = engine.record

    def after_stop() -> None:
        if rec.finished is None:
            return
        rec.engine_process = engine.record
        secrets = [engine.api_key] if engine.api_key else []
        log = engine.log_file or engine.plan.log_path
        rec.engine_warnings = scan_engine_log(log, secrets) + served_warnings
        write()

    engine.after_stop = after_stop


@contextlib.contextmanager
def launched_engine(spec: Spec, out: Path, api_key: str | None) -> Iterator[LaunchedEngine | None]:
    """The spec's ``engine.launch`` started and healthy for the ``with`` block, stopped
    however the block ends; None (and nothing started) when the spec has no launch.

    Raises:
        EngineStartError: see :func:`start_engine` and :meth:`LaunchedEngine.wait_healthy`.
    """
    launch = spec.engine.launch
    if launch is None:
        yield None
        return
    plan = plan_launch(launch, spec.engine.endpoint, engine_log_path(out), spec.engine.proxy)
    engine = start_engine(plan, api_key)
    try:
        engine.wait_healthy()
        yield engine
    finally:
        engine.stop()


def start_engine(plan: LaunchPlan, api_key: str | None = None) -> LaunchedEngine:
    """Start the engine in its own session, its output through the log process.

    Raises:
        EngineStartError: the command cannot be started (not found, not executable).
    """
    plan.log_path.parent.mkdir(parents=True, exist_ok=True)
    plan.log_path.write_bytes(b"")  # a fresh log for this run
    secrets = [*secret_values({**os.environ, **plan.env}), *([api_key] if api_key else [])]
    record = EngineProcess(
        argv=[scrub(a, secrets) for a in plan.argv],
        env_names=sorted(plan.env),
        health_url=scrub(plan.health_url, secrets),
        log=plan.log_path.as_posix(),
    )
    engine = LaunchedEngine(plan=plan, record=record, api_key=api_key)
    read_end, write_end = os.pipe()
    try:
        try:
            engine.process = subprocess.Popen(
                plan.argv,
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=subprocess.STDOUT,
                env={**os.environ, **plan.env},
                start_new_session=True,
            )
        except OSError as exc:
            name = scrub(plan.argv[0], secrets)
            raise EngineStartError(
                f"cannot start the engine ({name}): {exc.strerror or exc}"
            ) from None
        engine.started = time.monotonic()
        # A module outside the collect package, which imports the whole load generator
        # (seconds on a busy machine): an engine that exits at once must find the log
        # process already reading, or its last words are lost to the drain deadline.
        logger_argv = [sys.executable, "-c", _LOGGER_MAIN]
        engine.logger = subprocess.Popen(
            [
                *logger_argv,
                str(plan.log_path),
                str(engine.process.pid),
                str(plan.stop_grace_s),
                str(os.getpid()),
            ],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            # The spec's key whatever its variable's name: by environment, never argv.
            env={**os.environ, SECRETS_ENV: "\n".join(secrets)},
            start_new_session=True,
        )
    except BaseException:
        engine.stop()
        raise
    finally:
        os.close(read_end)
        os.close(write_end)
    return engine


__all__ = [
    "EngineStartError",
    "LaunchPlan",
    "LaunchedEngine",
    "apply_engine_cmd",
    "check_launch_options",
    "engine_log_path",
    "free_port",
    "launched_engine",
    "plan_launch",
    "start_engine",
    "track_engine",
    "with_port",
]

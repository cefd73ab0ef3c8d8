"""``tokenwatt session FILE.yaml``: several configurations measured one after another.

Each configuration is one ``tokenwatt collect`` child process (the same command a user would
type, so each run record's ``command`` reproduces it), usually with the engine it starts
itself (``--engine-cmd``): one engine at a time, each stopped before the next starts. With
``smoke_first`` every configuration first gets a smoke run (records in ``RUNS_DIR/smoke/``),
and one whose smoke run fails is not measured. A configuration that fails leaves the others
running; the session ends with the list of those that failed.

Signals: each ``collect`` runs in a process group of its own, so Ctrl-C at the terminal
reaches only the session, which passes it on exactly once (the same path as a lone
``kill -INT`` of the session); SIGTERM and SIGHUP sent to the session are passed on the same
way. ``collect`` keeps its partial record; the session stops after that configuration, runs
no other, and exits with the shell's status for the signal.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from tokenwatt.collect.engine.engine_proc import engine_log_path
from tokenwatt.collect.engine.log_archive import archived_path
from tokenwatt.collect.measure.request_log import log_path
from tokenwatt.collect.plan.runfile import check_run_options
from tokenwatt.errors import InputError, Problem
from tokenwatt.records import Session, SessionConfig, check_paths, load_spec, spec_path

_SIGNAL_STATUS = {130: "SIGINT", 143: "SIGTERM", 129: "SIGHUP"}


@dataclass(frozen=True)
class Step:
    """One ``collect`` the session runs: a configuration, in smoke mode or the session's."""

    config: SessionConfig
    mode: str
    out: Path
    smoke: bool


@dataclass
class SessionResult:
    """What a session did.

    Attributes:
        done: run records written by configurations whose ``collect`` exited 0 (the
            session's mode, not the smoke runs), in the order of the file.
        failed: ``(label, why)`` for each configuration that failed.
        stopped_by: the signal that stopped the session (``SIGINT``, ``SIGTERM``,
            ``SIGHUP``), or None.
    """

    done: list[Path] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    stopped_by: str | None = None


def plan_steps(session: Session) -> list[Step]:
    """The ``collect`` runs in order: every smoke run first (when asked), then the runs."""
    runs = Path(session.runs_dir)
    steps = []
    if session.smoke_first and session.mode != "smoke":
        for c in session.configurations:
            steps.append(Step(c, "smoke", runs / "smoke" / f"{c.label}.json", smoke=True))
    for c in session.configurations:
        steps.append(Step(c, session.mode, runs / f"{c.label}.json", smoke=False))
    return steps


def collect_argv(step: Step, spec: Path, *, progress: bool) -> list[str]:
    """The ``tokenwatt collect`` command line of one step (this interpreter's ``-m``)."""
    c = step.config
    argv = [
        sys.executable, "-m", "tokenwatt", "collect", "--spec", str(spec),
        "--label", c.label, "--role", c.role, "--out", str(step.out), "--mode", step.mode,
    ]  # fmt: skip
    command = c.command()
    if command is not None:
        argv += ["--engine-cmd", command]
    if c.kv_dtype is not None:
        argv += ["--kv-dtype", c.kv_dtype]
    if c.endpoint is not None:
        argv += ["--endpoint", c.endpoint]
    if c.workers is not None:
        argv += ["--workers", str(c.workers)]
    if c.fast_search:
        argv.append("--fast-search")
    if not c.accuracy:
        argv.append("--no-accuracy")
    if not progress:
        argv.append("--no-progress")
    return argv


def check_session(session: Session, session_path: Path, *, force: bool = False) -> None:
    """Everything that can refuse the session does so before the first run: the spec
    (validated), every run record's file (``collect``'s own checks) and, unless ``force``,
    files of earlier measurements it would replace: a run record ``RUNS_DIR/LABEL.json``,
    its engine log or its per-request file that exists already (smoke runs, never
    reported, are replaced without asking). Like ``init`` and ``report``, the session
    replaces measurements only when told (``--force``; the report by ``report.replace``).

    Raises:
        InputError: naming the session file and field, or the spec file and its field; an
            existing run file by its path.
    """
    check_paths(session, session_path)
    spec = spec_path(session, session_path)
    load_spec(spec)
    problems: list[Problem] = []
    for i, step in enumerate(plan_steps(session)):
        try:
            check_run_options(
                label=step.config.label,
                role=step.config.role,
                mode=step.mode,
                out=step.out,
                spec_path=spec,
            )
        except InputError as exc:
            where = f"configurations[{i % len(session.configurations)}]"
            problems += [Problem(str(session_path), where, str(p)) for p in exc.problems]
    if not force:
        problems += _existing_run_files(session, session_path)
    if problems:
        raise InputError(problems)


def _existing_run_files(session: Session, session_path: Path) -> list[Problem]:
    """The measured runs' files that exist already, each named (``check_session``)."""
    problems = []
    for i, step in enumerate(plan_steps(session)):
        if step.smoke:
            continue
        where = f"configurations[{i % len(session.configurations)}]"
        engine_log = engine_log_path(step.out)
        for path in (step.out, engine_log, archived_path(engine_log), log_path(step.out)):
            if path.exists():
                message = f"{path} exists (an earlier run); pass --force to replace it"
                problems.append(Problem(str(session_path), where, message))
    return problems


@contextlib.contextmanager
def _forwarding(current: Callable[[], subprocess.Popen[bytes] | None]) -> Iterator[list[str]]:
    """SIGINT, SIGTERM and SIGHUP passed on to the running ``collect``; the list holds their
    names."""
    received: list[str] = []

    def handle(signum: int, _frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        proc = current()
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)

    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, handle) for sig in signals}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_session(
    session: Session,
    session_path: Path,
    *,
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> SessionResult:
    """Run every step of the session in order (see the module docstring).

    Args:
        session: the validated session file.
        session_path: its path (the spec is relative to its folder).
        progress: show ``collect``'s live display.
        echo: where the session's own lines go (one per step and outcome).
    """
    spec = spec_path(session, session_path)
    steps = plan_steps(session)
    result = SessionResult()
    broken: set[str] = set()
    running: list[subprocess.Popen[bytes]] = []
    with _forwarding(lambda: running[-1] if running else None) as received:
        for n, step in enumerate(steps, start=1):
            label = step.config.label
            if received:  # a signal between two configurations
                result.stopped_by = received[0]
                return result
            if label in broken:
                echo(f"session [{n}/{len(steps)}] {label}: skipped (its smoke run failed)")
                continue
            kind = "smoke run" if step.smoke else f"{step.mode} run"
            echo(f"session [{n}/{len(steps)}] {label}: {kind} -> {step.out}")
            status = _run_one(collect_argv(step, spec, progress=progress), running)
            if status in _SIGNAL_STATUS or received:
                result.stopped_by = received[0] if received else _SIGNAL_STATUS[status]
                result.failed.append((label, f"stopped by {result.stopped_by}"))
                return result
            if status != 0:
                why = f"{kind} failed (collect exited with status {status})"
                echo(f"session: {label}: {why}")
                result.failed.append((label, why))
                broken.add(label)
            elif not step.smoke:
                result.done.append(step.out)
    # The end of the last configuration's output, for a reader of the log that labels each
    # line with its configuration (tokenwatt.cloud's remote runner).
    echo(f"session: done ({len(result.done)} run records, {len(result.failed)} failed)")
    return result


def _run_one(argv: list[str], running: list[subprocess.Popen[bytes]]) -> int:
    """One ``collect``, in a process group of its own: a terminal's Ctrl-C reaches it only
    through the session's forwarding, so it gets one SIGINT, not two (a second would cut
    its record short). Waits for it to keep its partial record."""
    proc = subprocess.Popen(argv, process_group=0)
    running.append(proc)
    try:
        return proc.wait()
    finally:
        running.remove(proc)


__all__ = ["SessionResult", "Step", "check_session", "collect_argv", "plan_steps", "run_session"]

"""``tokenwatt session FILE.yaml``: the command (the work is in
:mod:`tokenwatt.collect.session`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tokenwatt.cli.exits import exit_on_errors
from tokenwatt.errors import InputError, Problem

_EXIT_BY_SIGNAL = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}


@click.command("session")
@click.argument("session_file", metavar="FILE.yaml", type=click.Path(path_type=Path))
@click.option("--no-progress", is_flag=True, help="No live display on stderr.")
@click.option(
    "--force",
    is_flag=True,
    help="Replace run records (and their engine logs and per-request files) of an earlier "
    "session; without it the session refuses, naming them, before anything runs.",
)
def session_command(session_file: Path, no_progress: bool, force: bool) -> None:
    """Measure several configurations one after another (each with the engine collect
    starts for it), then write their report.

    FILE.yaml names the spec, the configurations (label, role, engine command, KV-cache
    dtype, extra engine arguments, ...) and the report's title; it is checked whole before
    anything runs. Each configuration's run record is RUNS_DIR/LABEL.json, its engine's log
    RUNS_DIR/LABEL.engine.log. Existing run files are replaced only with --force (exit 2
    naming them otherwise). A failing configuration does not stop the others; the session
    then exits 1 naming it, and writes no report.
    """
    with exit_on_errors():
        _session(session_file, progress=not no_progress, force=force)


def _session(session_file: Path, *, progress: bool, force: bool) -> None:
    import shlex
    import subprocess

    from tokenwatt.analysis import slug
    from tokenwatt.collect import check_session, run_session
    from tokenwatt.records import load_session

    session = load_session(session_file)
    check_session(session, session_file, force=force)
    rep = session.report
    target = Path("reports") / f"{rep.id or slug(session.title)}.json"
    if target.exists() and not rep.replace:
        message = f"{target} exists; set report.replace: true to replace it, or report.id"
        raise InputError([Problem(str(session_file), "report", message)])

    def echo(line: str) -> None:
        click.echo(line, err=True)

    result = run_session(session, session_file, progress=progress, echo=echo)
    if result.stopped_by is not None:
        echo(f"session stopped by {result.stopped_by}; no further configuration was run")
        sys.exit(_EXIT_BY_SIGNAL[result.stopped_by])
    argv = [sys.executable, "-m", "tokenwatt", "report", *map(str, result.done)]
    argv += ["--title", session.title, "--cards", str(rep.cards), "--out", str(target)]
    argv += ["--id", rep.id] if rep.id else []
    argv += ["--demo"] if rep.demo else []
    argv += ["--force"] if rep.replace else []
    if result.failed:
        for label, why in result.failed:
            echo(f"failed: {label}: {why}")
        shown = shlex.join(["tokenwatt", *argv[3:]])
        echo(f"no report written; once every configuration has a run record: {shown}")
        sys.exit(1)
    status = subprocess.run(argv, check=False).returncode
    if status != 0:
        echo(f"session: tokenwatt report exited with status {status}")
        sys.exit(status)


__all__ = ["session_command"]

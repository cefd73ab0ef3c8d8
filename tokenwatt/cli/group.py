"""The command line's group, with ``collect`` (and its alias ``run``) on it: parses
arguments, calls one typed function per command, prints.

The other commands live in the modules beside this one (``build``, ``show`` and ``report``
in :mod:`tokenwatt.cli.report`; ``sim``, ``suites``, ``schema`` and ``model-info`` in
:mod:`tokenwatt.cli.tools`; ``init``, ``session``, ``cloud``) and are registered on the
group at the bottom. Each command imports its stage lazily so that ``tokenwatt --help``
stays instant. Library errors become exit codes in one place, :mod:`tokenwatt.cli.exits`:
:class:`~tokenwatt.errors.InputError` exits 2, any other TokenwattError exits 1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from tokenwatt import __version__
from tokenwatt.cli.collect import point_inputs, point_options
from tokenwatt.cli.exits import errors_to_exit

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tokenwatt")
def cli() -> None:
    """TokenWatt Bench: SLO goodput, tokens per joule, MBU and an accuracy gate."""


def _collect_options(func: F) -> F:
    """The options shared by ``collect`` and its alias ``run``."""
    options = [
        click.option(
            "--spec",
            "spec_path",
            type=click.Path(path_type=Path),
            default=None,
            help="Benchmark spec (specs/*.spec.yaml); without it, one is built from "
            "--endpoint, --model and the load flags.",
        ),
        click.option(
            "--label", default=None, help="Configuration name, e.g. vllm-fp8kv (default: --model)."
        ),
        click.option(
            "--role",
            type=click.Choice(["baseline", "tuned"]),
            default=None,
            help="Its role (default without --spec: baseline).",
        ),
        click.option(
            "--out",
            type=click.Path(path_type=Path, dir_okay=False),
            required=True,
            help=(
                "Run record to write (runs/X.json), atomically. Checked before measuring: "
                "never the spec, suite or engine log; an existing file is replaced only "
                "when it is a run record."
            ),
        ),
        click.option(
            "--mode",
            type=click.Choice(["smoke", "quick", "full"]),
            default="quick",
            show_default=True,
            help="Preset of windows, repeats and accuracy sample (smoke: never reported).",
        ),
        click.option(
            "--engine-log",
            type=click.Path(path_type=Path),
            default=None,
            help="Engine log to scan for known warnings (e.g. uncalibrated KV scales).",
        ),
        click.option("--endpoint", default=None, help="Overrides the spec's engine.endpoint."),
        click.option(
            "--engine-cmd",
            default=None,
            metavar="'CMD ARGS'",
            help="Start the engine with this command (no shell; {port}: a free port the "
            "endpoint then uses), wait until it answers, measure, stop it. Its log goes "
            "beside --out (X.engine.log). Overrides engine.launch.cmd.",
        ),
        click.option(
            "--kv-dtype",
            type=click.Choice(["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"]),
            default=None,
            help="Overrides the spec's model.kv_dtype for this configuration "
            "(per configuration, outside the fingerprint).",
        ),
        click.option("--no-accuracy", is_flag=True, help="Skip the accuracy suite."),
        click.option("--no-progress", is_flag=True, help="No live display on stderr."),
        click.option(
            "--wide",
            is_flag=True,
            help="Every column of the window table (ITL, E2E, p90s, cancelled apart); "
            "the default fits 120 columns.",
        ),
        click.option(
            "--fast-search",
            is_flag=True,
            help="Cheaper SLO search (short warm-ups after a pass, scout windows, bisect to 5%).",
        ),
        click.option(
            "--workers",
            default=None,
            metavar="N|auto",
            help="Load-generator processes sharing each window's one Poisson schedule "
            "(overrides measurement.workers; default 1: one process). 'auto': from the CPU "
            "cores and the expected chunk rate, never more than the cores less one.",
        ),
        click.option(
            "--ray-address",
            default=None,
            metavar="ADDR",
            help="Run the load-generator workers as Ray actors on this existing Ray cluster "
            "(HOST:6379, ray://HOST:10001 or auto; needs the [ray] extra): one per node, or "
            "--workers N spread over the nodes; each actor's clock offset is measured and "
            "corrected before every window. Overrides measurement.ray_address.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return point_options(func)


def _collect(
    spec_path: Path | None,
    label: str | None,
    role: str | None,
    out: Path,
    mode: str,
    engine_log: Path | None,
    endpoint: str | None,
    kv_dtype: str | None,
    no_accuracy: bool,
    no_progress: bool,
    fast_search: bool,
    workers: str | None,
    ray_address: str | None = None,
    engine_cmd: str | None = None,
    wide: bool = False,
    **point: Any,
) -> None:
    import shlex

    from tokenwatt.cli.collect_report import measured_or_exit, print_collect_end
    from tokenwatt.cli.progress import TerminalReporter
    from tokenwatt.collect import CollectOptions
    from tokenwatt.redact import scrub

    spec_path, label, role, flags = point_inputs(spec_path, label, role, point)
    opts = CollectOptions(
        point=flags,
        spec_path=spec_path,
        label=label,
        role=role,  # type: ignore[arg-type]
        out=out,
        mode=mode,  # type: ignore[arg-type]
        engine_log=engine_log,
        endpoint=endpoint,
        kv_dtype=kv_dtype,
        accuracy=not no_accuracy,
        command=scrub(shlex.join(["tokenwatt", *sys.argv[1:]])),
        progress=not no_progress,
        fast_search=fast_search,
        workers=workers,
        ray_address=ray_address,
        engine_cmd=engine_cmd,
    )
    reporter = TerminalReporter(live=opts.progress)
    record = measured_or_exit(opts, reporter, "no record written")
    status = print_collect_end(record, out, reporter, wide=wide)
    if status:
        sys.exit(status)


@cli.command()
@_collect_options
@errors_to_exit
def collect(**kwargs: Any) -> None:
    """Measure a configuration (SLO search, repeats, power, MBU, accuracy) into a run record."""
    _collect(**kwargs)


@cli.command("run")
@_collect_options
@errors_to_exit
def run_command(**kwargs: Any) -> None:
    """Same as ``collect``."""
    _collect(**kwargs)


from tokenwatt.cli.report import build, erratum, report, show  # noqa: E402 (registered)

for _command in (build, show, report, erratum):
    cli.add_command(_command)

from tokenwatt.cli.tools import model_info_cmd, schema, sim, suites  # noqa: E402 (registered on the group)

for _command in (sim, suites, schema, model_info_cmd):
    cli.add_command(_command)

from tokenwatt.cli.init import init_command  # noqa: E402 (registered after cli exists)

cli.add_command(init_command)

from tokenwatt.cli.export import export  # noqa: E402 (registered on the group)
from tokenwatt.cli.replicate import replicate  # noqa: E402 (registered on the group)
from tokenwatt.cli.session import session_command  # noqa: E402 (registered on the group)

cli.add_command(replicate)
cli.add_command(export)

cli.add_command(session_command)

from tokenwatt.cli.cloud import cloud_group  # noqa: E402 (registered on the group)

cli.add_command(cloud_group)


INTERRUPTED_STATUS = 130
"""Exit status of a Ctrl-C (128 + SIGINT), as a shell gives a process the signal stopped."""


def main() -> None:
    """Entry point of the ``tokenwatt`` console script.

    Click would turn a Ctrl-C that no command handles — one that arrives while Python loads
    what ``collect`` needs (seconds), or while the options are parsed — into "Aborted!" and
    status 1; here it ends with one line and status 130, as the Ctrl-C a command handles
    does. Everything else is click's standalone behaviour: a usage error is shown with its
    status (2), ``--help`` and ``--version`` exit 0, a command's ``sys.exit`` passes through.
    """
    try:
        status = cli.main(prog_name="tokenwatt", standalone_mode=False)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):
            _interrupted()
        click.echo("Aborted!", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:  # between click's own handling and ours
        _interrupted()
    except Exception as exc:
        if caused_by_interrupt(exc):
            _interrupted()
        raise
    sys.exit(status if isinstance(status, int) else 0)


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C is behind ``exc``: a ``KeyboardInterrupt`` anywhere in its chain of
    causes and contexts. Python wraps one that arrives while a class is being made (an
    import cut short, inside ``__set_name__``) in a ``RuntimeError``, seen in CI."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return True
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return False


def _interrupted() -> NoReturn:
    """One line and status 130 for a Ctrl-C no command handled: nothing was written, so
    there is nothing to finish. The process ends here (``os._exit``), not through the
    interpreter's shutdown: after an import cut short by the interrupt, that shutdown was
    seen to end the process by SIGINT itself (status −2, about 1 run in 12)."""
    click.echo("interrupted (Ctrl-C); nothing more was done", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED_STATUS)

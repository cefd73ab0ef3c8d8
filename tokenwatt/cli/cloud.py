"""``tokenwatt cloud``: a benchmark session on a rented GPU instance, and looking around
(``types``, ``instances``) and cleaning up (``terminate``). The work is in
:mod:`tokenwatt.cloud`; this module parses options, prints and maps errors to exit
statuses: InputError (and a cost above ``--max-cost-usd``) 2, other errors 1, a signal 128 +
its number, an instance that could not be confirmed terminated 3.

The API key is read from ``--api-key-file`` and never printed. ``--api-url``, ``--runner``,
``--ssh-port``, ``--ssh-user``, ``--wheel`` and the timing options are hidden: they exist
for the tests (an API double on 127.0.0.1, an SSH server on a high port, a runner without
SSH), not for operators.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tokenwatt.cli.exits import exit_on_errors
from tokenwatt.errors import InputError, Problem, TokenwattError

if TYPE_CHECKING:
    from tokenwatt.cloud import LambdaCloud

F = TypeVar("F", bound=Callable[..., Any])

LEDGER_HELP = "Local ledger of launched instances (default ~/.tokenwatt/cloud-instances.jsonl)."


def _api_options(func: F) -> F:
    options = [
        click.option(
            "--provider",
            type=click.Choice(["lambda"]),
            default="lambda",
            show_default=True,
            help="The cloud provider.",
        ),
        click.option(
            "--api-key-file",
            type=click.Path(path_type=Path),
            required=True,
            help="File holding the provider's API key (never printed).",
        ),
        click.option("--api-url", default=None, hidden=True, help="API base URL (tests only)."),
        click.option("--api-max-wait-s", type=float, default=60.0, hidden=True),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@contextmanager
def _exits() -> Iterator[None]:
    """Library errors and signals to exit statuses (see the module docstring)."""
    from tokenwatt.cloud import SessionStopped

    try:
        with exit_on_errors():
            yield
    except SessionStopped as exc:
        click.echo(f"cloud: session {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("cloud: session stopped by SIGINT", err=True)
        sys.exit(130)


def _provider(api_key_file: Path, api_url: str | None, max_wait_s: float) -> LambdaCloud:
    from tokenwatt.cloud import LAMBDA_API_URL, LambdaCloud, read_api_key

    key = read_api_key(api_key_file)
    return LambdaCloud(key, base_url=api_url or LAMBDA_API_URL, max_wait_s=max_wait_s)


@click.group("cloud")
def cloud_group() -> None:
    """Run a session on a rented GPU instance (launch, run, always terminate)."""


@cloud_group.command("types")
@_api_options
def types_command(
    provider: str, api_key_file: Path, api_url: str | None, api_max_wait_s: float
) -> None:
    """The instance types on offer: GPUs, price per hour, regions with capacity now."""
    from rich.table import Table

    from tokenwatt.cli.terminal import console, plain

    with _exits():
        client = _provider(api_key_file, api_url, api_max_wait_s)
        try:
            types = client.instance_types()
        finally:
            client.close()
    table = Table(title=f"{provider} instance types")
    for column in ("type", "GPUs", "GPU", "$/h", "regions with capacity"):
        table.add_column(column, overflow="fold")
    for t in types:
        regions = ", ".join(t.regions) or "none"
        cells = (t.name, t.gpus, t.gpu_description, f"{t.price_usd_per_hour:.2f}", regions)
        table.add_row(*map(plain, cells))  # the provider's text is data, never markup
    console().print(table)


@cloud_group.command("instances")
@_api_options
@click.option("--ledger", type=click.Path(path_type=Path), default=None, help=LEDGER_HELP)
def instances_command(
    provider: str,
    api_key_file: Path,
    api_url: str | None,
    api_max_wait_s: float,
    ledger: Path | None,
) -> None:
    """Every instance tokenwatt launched: those the provider lists with a tokenwatt- name,
    and those in the local ledger not confirmed terminated."""
    from tokenwatt.cloud import DEFAULT_LEDGER, NAME_PREFIX, NotFoundError, read_ledger

    with _exits():
        client = _provider(api_key_file, api_url, api_max_wait_s)
        try:
            listed = {i.id: i for i in client.instances() if (i.name or "").startswith(NAME_PREFIX)}
            rows: list[tuple[str, ...]] = [
                (i.id, i.name or "", i.status, i.type_name or "", i.region or "", "provider")
                for i in listed.values()
            ]
            for e in read_ledger((ledger or DEFAULT_LEDGER).expanduser()):
                if e.id in listed or e.terminated_at is not None:
                    continue
                status: str
                try:
                    status = client.instance(e.id).status
                except NotFoundError:
                    status = "gone"
                rows.append((e.id, e.name, status, e.type_name, e.region, "ledger"))
        finally:
            client.close()
    if not rows:
        click.echo("no instance launched by tokenwatt is running")
        return
    for row in rows:
        click.echo("  ".join(row))


@cloud_group.command("terminate")
@click.argument("instance_id")
@_api_options
@click.option("--ledger", type=click.Path(path_type=Path), default=None, help=LEDGER_HELP)
@click.option("--poll-s", type=float, default=10.0, hidden=True)
@click.option("--timeout-s", type=float, default=600.0, hidden=True)
def terminate_command(
    instance_id: str,
    provider: str,
    api_key_file: Path,
    api_url: str | None,
    api_max_wait_s: float,
    ledger: Path | None,
    poll_s: float,
    timeout_s: float,
) -> None:
    """Terminate INSTANCE_ID and wait until the provider confirms it (exit 3 if it does not)."""
    from tokenwatt.cloud import (
        DEFAULT_LEDGER,
        TerminateUnconfirmedError,
        Timing,
        record_terminated,
        terminate_and_confirm,
    )

    def echo(line: str) -> None:
        click.echo(line, err=True)

    with _exits():
        client = _provider(api_key_file, api_url, api_max_wait_s)
        try:
            timing = Timing(poll_s=poll_s, terminate_timeout_s=timeout_s)
            ok = terminate_and_confirm(client, instance_id, timing=timing, echo=echo)
        finally:
            client.close()
        if not ok:
            raise TerminateUnconfirmedError(
                f"instance {instance_id} could not be confirmed terminated: it may still be "
                "running and billed; check the provider's console"
            )
        record_terminated((ledger or DEFAULT_LEDGER).expanduser(), instance_id)
        click.echo(f"{instance_id} terminated (confirmed)")


def _echo(line: str) -> None:
    click.echo(line, err=True)


def _on_line(label: str, line: str) -> None:
    click.echo(f"[{label}] {line}")


@cloud_group.command("session")
@_api_options
@click.option(
    "--ssh-key",
    "key_file",
    type=click.Path(path_type=Path),
    required=True,
    help="SSH private key for the instance (KEY.pub beside it is registered).",
)
@click.option("--type", "type_name", required=True, help="Instance type, e.g. gpu_1x_h100_sxm5.")
@click.option("--region", default=None, help="Region (default: the first with capacity).")
@click.option(
    "--session",
    "session_file",
    type=click.Path(path_type=Path),
    required=True,
    help="The session file (tokenwatt session FILE.yaml).",
)
@click.option(
    "--max-cost-usd",
    type=float,
    default=None,
    help="Refuse (exit 2) when the estimate is above this.",
)
@click.option(
    "--deadline-min",
    type=float,
    default=None,
    help="Watchdog: the box powers off after this (default 1.5 × estimate + 30).",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--ledger", type=click.Path(path_type=Path), default=None, help=LEDGER_HELP)
@click.option("--runner", "runner_name", default="ssh", hidden=True, help="MODULE:ATTR (tests).")
@click.option("--poll-s", type=float, default=10.0, hidden=True)
@click.option("--active-timeout-s", type=float, default=1200.0, hidden=True)
@click.option("--terminate-timeout-s", type=float, default=600.0, hidden=True)
@click.option("--ssh-port", type=int, default=22, hidden=True, help="SSH port (tests).")
@click.option("--ssh-user", default="ubuntu", hidden=True, help="SSH login (tests).")
@click.option(
    "--wheel",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    hidden=True,
    help="Wheel of this package to install on the box (default: built from the checkout).",
)
def session_command(**opts: Any) -> None:
    """Launch an instance, run a session file on it, always terminate it.

    Shows the plan and the ESTIMATED cost, asks for confirmation unless --yes, and refuses
    (exit 2) above --max-cost-usd before launching. The instance is terminated whatever
    happens (success, error, Ctrl-C, SIGTERM) and the termination is confirmed; when it
    cannot be, the instance id is printed and the exit status is 3. The run records come
    back into the session's runs_dir with the session's cost, and the report is written.
    """
    with _exits():
        _cloud_session(**opts)


def _effective_plans(session: Any, session_file: Path) -> list[Any]:
    from tokenwatt import collect
    from tokenwatt.cloud import RunPlan
    from tokenwatt.records import load_spec, spec_path

    collect.check_session(session, session_file)
    spec = load_spec(spec_path(session, session_file))
    return [
        RunPlan(s.config.label, collect.apply_mode(spec, s.mode), s.smoke, s.config.accuracy)  # type: ignore[arg-type]
        for s in collect.plan_steps(session)
    ]


def _cloud_session(**o: Any) -> None:
    from tokenwatt import cloud
    from tokenwatt.records import load_session

    session = load_session(o["session_file"])
    plans = _effective_plans(session, o["session_file"])
    cloud.plan_upload(o["session_file"])  # every file the box needs, before renting it
    public = cloud.public_key(o["key_file"])
    runner = cloud.load_runner(o["runner_name"], package=o["wheel"])
    if isinstance(runner, cloud.SshRunner):
        runner.check()
    client = _provider(o["api_key_file"], o["api_url"], o["api_max_wait_s"])
    try:
        types = {t.name: t for t in client.instance_types()}
        t = types.get(o["type_name"])
        if t is None:
            known = ", ".join(sorted(types))
            raise InputError(
                [Problem("--type", "", f"unknown type {o['type_name']!r}; known: {known}")]
            )
        estimate = cloud.estimate(plans, t.price_usd_per_hour)
        deadline_s = (
            o["deadline_min"] * 60 if o["deadline_min"] else cloud.default_deadline_s(estimate)
        )
        session_id = cloud.new_session_id(cloud.now_utc())
        for line in cloud.plan_lines(t, o["region"], session_id, estimate, deadline_s):
            click.echo(line)
        limit = o["max_cost_usd"]
        if limit is not None and estimate.cost_usd > limit:
            why = (
                f"the estimate ${estimate.cost_usd:.2f} is above --max-cost-usd {limit:g}; "
                "nothing launched"
            )
            raise InputError([Problem("--max-cost-usd", "", why)])
        if not o["yes"]:
            click.confirm("Launch?", abort=True)
        plan = cloud.CloudPlan(
            type=t,
            region=o["region"],
            session_id=session_id,
            ssh_key_name=cloud.ensure_ssh_key(client, public),
            key_file=o["key_file"],
            session_file=o["session_file"],
            runs_dir=Path(session.runs_dir),
            deadline_s=deadline_s,
            ssh_port=o["ssh_port"],
            ssh_user=o["ssh_user"],
        )
        timing = cloud.Timing(o["poll_s"], o["active_timeout_s"], o["terminate_timeout_s"])
        ledger = (o["ledger"] or cloud.DEFAULT_LEDGER).expanduser()
        outcome = cloud.CloudOutcome()
        before = cloud.record_stamps(plan.runs_dir)
        try:
            cloud.run_cloud_session(
                client, plan, runner, ledger=ledger, echo=_echo, on_line=_on_line,
                timing=timing, outcome=outcome,
            )  # fmt: skip
        except BaseException:
            _cost_what_came_back(plan, outcome, cloud.records_since(plan.runs_dir, before))
            raise
    finally:
        client.close()
    _after(session, o["session_file"], plan, outcome)


def _write_costs(plan: Any, outcome: Any, paths: list[Path]) -> None:
    """The session's cost into the records ``paths``, and a summary on the terminal."""
    from tokenwatt import cloud

    costs = (
        cloud.apply_costs(
            paths,
            provider="lambda",
            instance_type=plan.type.name,
            region=outcome.region,
            instance_id=outcome.instance_id,
            session_id=plan.session_id,
            price_usd_per_hour=plan.type.price_usd_per_hour,
            session_s=outcome.session_s,
            terminate_confirmed=outcome.terminate_confirmed,
        )
        if paths
        else []
    )
    total = cloud.cost_usd(plan.type.price_usd_per_hour, outcome.session_s)
    click.echo(f"cloud: session took {outcome.session_s / 60:.1f} min, cost ${total:.2f}")
    for path, cost in zip(paths, costs, strict=True):
        click.echo(f"  {path}: ${cost.cost_usd:.2f} ({cost.share:.0%} of the bill)")


def _cost_what_came_back(plan: Any, outcome: Any, paths: list[Path]) -> None:
    """After a signal or an error: the records copied back before it still get the
    session's cost. A record that cannot take it (a partial one that does not validate)
    is said and left as it is, so that the original error is the one reported."""
    if outcome.instance_id is None:
        return
    try:
        _write_costs(plan, outcome, paths)
    except TokenwattError as exc:
        _echo(f"cloud: could not write the cost into the records brought back: {exc}")


def _after(session: Any, session_file: Path, plan: Any, outcome: Any) -> None:
    """Costs into the run records, then the report (as ``tokenwatt session`` makes it)."""
    import subprocess

    from tokenwatt import analysis

    result = outcome.result
    _write_costs(plan, outcome, [*result.runs, *result.incomplete])
    if result.failed or result.exit_status != 0 or result.incomplete:
        failed = ", ".join(result.failed) or "none"
        _echo(
            f"cloud: the session on the box exited {result.exit_status} "
            f"(failed: {failed}); no report"
        )
        sys.exit(1)
    rep = session.report
    target = Path("reports") / f"{rep.id or analysis.slug(session.title)}.json"
    argv = [sys.executable, "-m", "tokenwatt", "report", *map(str, result.runs)]
    argv += ["--title", session.title, "--cards", str(rep.cards), "--out", str(target)]
    argv += ["--id", rep.id] if rep.id else []
    argv += ["--demo"] if rep.demo else []
    argv += ["--force"] if rep.replace else []
    status = subprocess.run(argv, check=False).returncode
    if status != 0:
        _echo(f"cloud: tokenwatt report exited with status {status}")
        sys.exit(status)


__all__ = ["cloud_group"]

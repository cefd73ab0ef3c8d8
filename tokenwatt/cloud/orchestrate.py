"""``tokenwatt cloud session``: launch, run, and terminate in every case.

The instance is terminated whatever happens between launch and the end: success, a
failing configuration, an error of the provider or of the runner, Ctrl-C, SIGTERM or
SIGHUP (turned into :class:`SessionStopped` while the session runs), or a bug in this code
(the ``finally`` runs for any exception). Termination is then confirmed by polling the
provider until the instance reads ``terminated`` (or is unknown to it); while it is being
confirmed, further signals are noted and do not interrupt it. A termination that cannot be
confirmed raises :class:`TerminateUnconfirmedError`, which names the instance id and exits 3,
whatever else happened.

A launch whose answer was lost (transport error, server error, a signal during the call)
may still have started an instance: the session then looks for its name
(``tokenwatt-<session id>``) among the account's instances and terminates what it finds.
Every launched id is written to the local ledger before anything else is done with it,
and the box arms its own watchdog (:meth:`~tokenwatt.cloud.runner.Runner.arm_watchdog`)
before the session starts, so that even a SIGKILL of this process leaks nothing for
longer than the deadline.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from tokenwatt.cloud.ledger import record_launch, record_terminated
from tokenwatt.cloud.provider import (
    AuthError,
    CloudError,
    InstanceType,
    LaunchRequest,
    NoCapacityError,
    NotFoundError,
    Provider,
    QuotaError,
    RateLimitError,
)
from tokenwatt.cloud.runner import Host, Runner, RunnerResult

_REFUSALS = (AuthError, NoCapacityError, QuotaError, RateLimitError)
"""Launch errors after which no instance exists (the API refused before acting)."""

TERMINATE_UNCONFIRMED_EXIT = 3


class SessionStopped(BaseException):
    """SIGTERM or SIGHUP arrived during the session (a BaseException, like Ctrl-C's
    KeyboardInterrupt, so that no ``except Exception`` swallows it)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.exit_code = 128 + int(signal.Signals[name])
        super().__init__(f"stopped by {name}")


class TerminateUnconfirmedError(CloudError):
    """The instance could not be confirmed terminated: it may still be running (billed)."""

    exit_code = TERMINATE_UNCONFIRMED_EXIT


@dataclass(frozen=True)
class Timing:
    """The session's waits (s): between polls, for ``active``, for ``terminated``."""

    poll_s: float = 10.0
    active_timeout_s: float = 1200.0
    terminate_timeout_s: float = 600.0


@dataclass(frozen=True)
class CloudPlan:
    """What the session will do.

    Attributes:
        type: the instance type (with price and the regions with capacity).
        region: the region asked for (None: the first with capacity).
        session_id: names the instance ``tokenwatt-<session_id>``.
        ssh_key_name: the registered SSH key the instance is launched with.
        key_file: the private key SSH uses (never read here).
        session_file: the local session YAML.
        runs_dir: where the run records are copied back to.
        deadline_s: the watchdog's deadline (s after the session starts on the box).
        ssh_port: the instance's SSH port.
        ssh_user: the login name on the instance (Lambda's images: ``ubuntu``).
    """

    type: InstanceType
    region: str | None
    session_id: str
    ssh_key_name: str
    key_file: Path
    session_file: Path
    runs_dir: Path
    deadline_s: float
    ssh_port: int = 22
    ssh_user: str = "ubuntu"

    @property
    def instance_name(self) -> str:
        """``tokenwatt-<session id>``."""
        return f"tokenwatt-{self.session_id}"


@dataclass
class CloudOutcome:
    """What happened: the instance, its region, the session's length, the runner's result."""

    instance_id: str | None = None
    region: str | None = None
    session_s: float = 0.0
    terminate_confirmed: bool = False
    result: RunnerResult | None = None
    notes: list[str] = field(default_factory=list)


def candidate_regions(t: InstanceType, wanted: str | None) -> list[str]:
    """The regions to try, in order: ``wanted`` alone, or every region with capacity.

    Raises:
        NoCapacityError: no region (or not ``wanted``) has capacity for ``t`` now.
    """
    if wanted is not None:
        if wanted not in t.regions:
            have = ", ".join(t.regions) or "none"
            raise NoCapacityError(
                f"{t.name} has no capacity in {wanted} now (regions with capacity: {have})"
            )
        return [wanted]
    if not t.regions:
        raise NoCapacityError(f"no region has capacity for {t.name} now; try later or another type")
    return list(t.regions)


class SignalGuard:
    """One handler for SIGINT, SIGTERM and SIGHUP over the whole session, so that no
    signal ever meets the default handler (which would kill the process without
    terminating the instance). While running: SIGINT raises KeyboardInterrupt, SIGTERM and
    SIGHUP raise :class:`SessionStopped`. While shielded (terminating): each is noted and
    said, and the termination goes on."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.echo = echo
        self.shielding: str | None = None
        self.received: list[str] = []
        self._previous: dict[signal.Signals, object] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        if self.shielding is not None:
            self.echo(f"cloud: {name}: terminating {self.shielding}; waiting for its confirmation")
            return
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SessionStopped(name)

    def __enter__(self) -> SignalGuard:
        self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self._previous.items():
            signal.signal(s, h)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def shield(self, instance_id: str) -> Iterator[None]:
        """Signals only noted inside the block."""
        self.shielding = instance_id
        try:
            yield
        finally:
            self.shielding = None


def terminate_and_confirm(
    provider: Provider,
    instance_id: str,
    *,
    timing: Timing,
    echo: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Ask for termination (again after a failure) and poll until the instance reads
    ``terminated`` or is unknown to the provider; False after ``terminate_timeout_s``."""
    deadline = clock() + timing.terminate_timeout_s
    asked = False
    while True:
        try:
            if not asked:
                provider.terminate(instance_id)
                asked = True
                echo(f"cloud: terminate {instance_id} requested")
            status = provider.instance(instance_id).status
            if status == "terminated":
                return True
        except NotFoundError:
            return True
        except CloudError as exc:
            echo(f"cloud: terminate {instance_id}: {exc}; trying again")
        if clock() >= deadline:
            return False
        sleep(timing.poll_s)


def _launch(
    provider: Provider, plan: CloudPlan, outcome: CloudOutcome, echo: Callable[[str], None]
) -> None:
    regions = candidate_regions(plan.type, plan.region)
    for n, region in enumerate(regions):
        request = LaunchRequest(plan.type.name, region, plan.ssh_key_name, plan.instance_name)
        try:
            outcome.instance_id = provider.launch(request)
        except NoCapacityError:
            if n + 1 == len(regions):
                raise NoCapacityError(
                    f"no capacity for {plan.type.name} in {', '.join(regions)} at launch"
                ) from None
            echo(f"cloud: no capacity for {plan.type.name} in {region} after all; trying the next")
            continue
        outcome.region = region
        return


def _wait_active(
    provider: Provider,
    instance_id: str,
    timing: Timing,
    echo: Callable[[str], None],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> str:
    """The instance's IP once it is active."""
    deadline = clock() + timing.active_timeout_s
    last = ""
    while True:
        inst = provider.instance(instance_id)
        if inst.status != last:
            echo(f"cloud: {instance_id} is {inst.status}")
            last = inst.status
        if inst.status == "active" and inst.ip:
            return inst.ip
        if inst.status in ("unhealthy", "terminating", "terminated"):
            raise CloudError(f"instance {instance_id} became {inst.status} while starting")
        if clock() >= deadline:
            raise CloudError(
                f"instance {instance_id} not active after {timing.active_timeout_s:g} s"
            )
        sleep(timing.poll_s)


def _find_by_name(provider: Provider, name: str, echo: Callable[[str], None]) -> list[str]:
    """Ids of instances named ``name`` (after a launch whose answer was lost)."""
    try:
        return [i.id for i in provider.instances() if i.name == name]
    except CloudError as exc:
        echo(f"cloud: could not list instances to look for {name}: {exc}")
        return []


def run_cloud_session(
    provider: Provider,
    plan: CloudPlan,
    runner: Runner,
    *,
    ledger: Path,
    echo: Callable[[str], None],
    on_line: Callable[[str, str], None],
    timing: Timing = Timing(),
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    outcome: CloudOutcome | None = None,
) -> CloudOutcome:
    """Launch, wait for ``active``, arm the watchdog, run the session, terminate and
    confirm (see the module docstring).

    ``outcome``, when given, is filled in as the session goes, so that a caller still
    knows the instance, its region and the session's length when this raises.

    Raises:
        SessionStopped, KeyboardInterrupt: a signal stopped the session (after the
            termination was confirmed).
        CloudError: the provider refused or failed (after the termination).
        TerminateUnconfirmedError: the instance may still be running; raised instead of any of
            the above.
    """
    outcome = outcome if outcome is not None else CloudOutcome()
    started = clock()
    launch_started = False
    with SignalGuard(echo) as guard:
        try:
            launch_started = True
            _run(provider, plan, runner, outcome, ledger, echo, on_line, timing, sleep, clock)
        except _REFUSALS:
            launch_started = outcome.instance_id is not None
            raise
        finally:
            _finish(provider, plan, outcome, launch_started, ledger, guard, timing, sleep, clock)
            outcome.session_s = clock() - started
    return outcome


def _run(
    provider: Provider,
    plan: CloudPlan,
    runner: Runner,
    outcome: CloudOutcome,
    ledger: Path,
    echo: Callable[[str], None],
    on_line: Callable[[str, str], None],
    timing: Timing,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    """Launch, ledger, wait for active, watchdog, run (the ``try``)."""
    _launch(provider, plan, outcome, echo)
    assert outcome.instance_id is not None and outcome.region is not None
    record_launch(
        ledger,
        instance_id=outcome.instance_id,
        provider=provider.name,
        type_name=plan.type.name,
        region=outcome.region,
        name=plan.instance_name,
    )
    echo(f"cloud: launched {outcome.instance_id} ({plan.type.name}, {outcome.region})")
    ip = _wait_active(provider, outcome.instance_id, timing, echo, sleep, clock)
    host = Host(ip=ip, key_file=plan.key_file, user=plan.ssh_user, port=plan.ssh_port)
    runner.arm_watchdog(host, plan.deadline_s)
    outcome.result = runner.run(
        host, plan.session_file, plan.runs_dir, deadline_s=plan.deadline_s, on_line=on_line
    )


def _finish(
    provider: Provider,
    plan: CloudPlan,
    outcome: CloudOutcome,
    launch_started: bool,
    ledger: Path,
    guard: SignalGuard,
    timing: Timing,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    """Terminate whatever this session launched and confirm it (the ``finally``)."""
    echo = guard.echo
    if not launch_started:
        return
    ids = [outcome.instance_id] if outcome.instance_id else []
    if not ids:
        ids = _find_by_name(provider, plan.instance_name, echo)
        for i in ids:
            echo(f"cloud: found {i} named {plan.instance_name} although the launch failed")
            with contextlib.suppress(OSError):
                record_launch(
                    ledger,
                    instance_id=i,
                    provider=provider.name,
                    type_name=plan.type.name,
                    region="?",
                    name=plan.instance_name,
                )
    unconfirmed = []
    for instance_id in ids:
        with guard.shield(instance_id):
            ok = terminate_and_confirm(
                provider, instance_id, timing=timing, echo=echo, sleep=sleep, clock=clock
            )
        if ok:
            outcome.terminate_confirmed = (
                instance_id == outcome.instance_id or not outcome.instance_id
            )
            echo(f"cloud: {instance_id} terminated (confirmed)")
            with contextlib.suppress(OSError):
                record_terminated(ledger, instance_id)
        else:
            unconfirmed.append(instance_id)
    outcome.terminate_confirmed = not unconfirmed
    if unconfirmed:
        for instance_id in unconfirmed:
            echo(
                f"CLOUD: INSTANCE {instance_id} ({plan.type.name}) COULD NOT BE CONFIRMED "
                f"TERMINATED: it may still be running and billed. Terminate it now: "
                f"tokenwatt cloud terminate {instance_id} (or in the provider's console)"
            )
        raise TerminateUnconfirmedError(
            f"instance {', '.join(unconfirmed)} could not be confirmed terminated"
        )


def now_utc() -> dt.datetime:
    """The current time in UTC (the session id's clock)."""
    return dt.datetime.now(dt.UTC)

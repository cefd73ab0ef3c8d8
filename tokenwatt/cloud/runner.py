"""What runs the session on the instance once it is active: the :class:`Runner` seam.

The orchestration (:mod:`tokenwatt.cloud.orchestrate`) calls a runner's
:meth:`~Runner.arm_watchdog` and then :meth:`~Runner.run`; it never talks SSH itself. The
real runner, :class:`SshRunner`, hands both calls to :mod:`tokenwatt.cloud.remote`
(``arm_watchdog`` and ``run_remote_session`` over asyncssh, which that module imports only
when it connects: without the ``[cloud]`` extra the commands that need no SSH still work,
and a session fails with a message naming the extra); tests inject a runner without SSH
that writes run records, so the launch-run-terminate logic is tested against the API
double alone.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from tokenwatt.cloud import remote
from tokenwatt.cloud.provider import CloudError
from tokenwatt.cloud.remote_box import asyncssh_module

T = TypeVar("T")

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_cancellable(make: Callable[[], Awaitable[T]]) -> T:
    """Run ``make()`` on a new event loop; SIGINT, SIGTERM or SIGHUP cancel it (so the
    remote side stops cleanly and copies back what it kept: ``run_remote_session``'s
    cancellation), then the signal is raised again for the handlers installed before
    (the orchestration's, which terminate the instance). A signal's Python handler would
    otherwise raise inside whatever task was running, which asyncio does not treat as a
    cancellation.

    Raises:
        whatever the caller's handler raises for the signal, or what ``make()`` raised.
    """
    got: list[signal.Signals] = []
    previous = {s: signal.getsignal(s) for s in _SIGNALS}

    async def main() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        assert task is not None

        def cancel(s: signal.Signals) -> None:
            got.append(s)
            task.cancel()

        for s in _SIGNALS:
            loop.add_signal_handler(s, cancel, s)
        return await make()

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if not got:
            raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    signal.raise_signal(got[0])
    raise CloudError(f"stopped by {got[0].name}")


@dataclass(frozen=True)
class Host:
    """The instance as SSH sees it: address, user and the private key file (never read
    here, never copied)."""

    ip: str
    key_file: Path
    user: str = "ubuntu"
    port: int = 22


@dataclass
class RunnerResult:
    """What the session on the box produced (the remote module's ``RemoteResult``).

    Attributes:
        runs: run records copied back into the local runs folder.
        failed: labels of the configurations that failed on the box.
        incomplete: partial run records copied back (marked incomplete).
        exit_status: the remote ``tokenwatt session``'s exit status.
        log: the whole remote output, kept locally (None: not kept).
    """

    runs: list[Path] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    incomplete: list[Path] = field(default_factory=list)
    exit_status: int = 0
    log: Path | None = None


class Runner(Protocol):
    """Runs a session file on a host."""

    def arm_watchdog(self, host: Host, deadline_s: float) -> None:
        """Make the box shut itself down after ``deadline_s`` (+ a margin), so that a crash
        of this process cannot leak it."""
        ...

    def run(
        self,
        host: Host,
        session_file: Path,
        runs_dir: Path,
        *,
        deadline_s: float,
        on_line: Callable[[str, str], None],
    ) -> RunnerResult:
        """Run ``tokenwatt session`` there; copy records back into ``runs_dir``."""
        ...


class SshRunner:
    """The real runner: :mod:`tokenwatt.cloud.remote` over SSH (asyncssh).

    Args:
        package: a wheel of this package to install on the box (None: one is built from
            the local checkout).
    """

    def __init__(self, package: Path | None = None) -> None:
        self.package = package

    def check(self) -> None:
        """Fail now, before anything is rented, when SSH cannot work here.

        Raises:
            RemoteError: asyncssh is not installed (the message names the ``[cloud]`` extra).
        """
        asyncssh_module()

    @staticmethod
    def _target(host: Host) -> remote.RemoteTarget:
        return remote.RemoteTarget(
            host=host.ip, port=host.port, user=host.user, key_file=host.key_file
        )

    def arm_watchdog(self, host: Host, deadline_s: float) -> None:
        """See :class:`Runner`.

        Raises:
            RemoteError: SSH failed (asyncssh missing included) or the command failed.
        """
        run_cancellable(lambda: remote.arm_watchdog(self._target(host), deadline_s))

    def run(
        self,
        host: Host,
        session_file: Path,
        runs_dir: Path,
        *,
        deadline_s: float,
        on_line: Callable[[str, str], None],
    ) -> RunnerResult:
        """See :class:`Runner`.

        Raises:
            RemoteError: see :func:`tokenwatt.cloud.remote.run_remote_session`.
        """
        result = run_cancellable(
            lambda: remote.run_remote_session(
                self._target(host),
                session_file,
                runs_dir,
                deadline_s=deadline_s,
                on_line=on_line,
                package=self.package,
            )
        )
        return RunnerResult(
            runs=list(result.runs),
            failed=list(result.failed),
            incomplete=list(result.incomplete),
            exit_status=result.exit_status,
            log=result.log,
        )


def load_runner(spec: str, *, package: Path | None = None) -> Runner:
    """The runner named ``MODULE:ATTRIBUTE`` (``ssh``: :class:`SshRunner` installing
    ``package``). For tests only: ``tokenwatt cloud session --runner`` is a hidden option.

    Raises:
        CloudError: the module or attribute cannot be found.
    """
    if spec == "ssh":
        return SshRunner(package)
    module, _, attr = spec.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise CloudError(f"--runner {spec}: {exc}") from None
    return found() if isinstance(found, type) else found  # type: ignore[no-any-return]

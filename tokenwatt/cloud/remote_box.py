"""One SSH connection to the box (asyncssh), kept up across drops.

Connecting: the private key file only (no agent, no password), a connect timeout and
keepalives, so a dead peer is noticed within ``keepalive_s × 3``. The host key is checked
against ``known_hosts`` when one is given; without one the first key seen is accepted and
its SHA-256 fingerprint recorded (trust on first use), and every later connection to that
host and port in this process must present the same key.

A connection that drops is made again with exponential back-off until ``reconnect_s`` has
passed since the drop; then :class:`~tokenwatt.cloud.remote_files.RemoteError` says so. An
authentication or host-key failure is never retried.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, TypeVar

from tokenwatt.cloud.remote_files import RemoteError

T = TypeVar("T")

_PINNED: dict[tuple[str, int], Any] = {}
"""Host keys accepted on first use in this process, by (host, port)."""


def asyncssh_module() -> ModuleType:
    """The asyncssh module, imported on first use.

    Raises:
        RemoteError: asyncssh is not installed (it comes with ``tokenwatt-bench[cloud]``).
    """
    try:
        import asyncssh
    except ImportError:
        raise RemoteError(
            "the remote runner needs asyncssh: pip install 'tokenwatt-bench[cloud]'"
        ) from None
    return asyncssh


@dataclass(frozen=True, kw_only=True)
class RemoteTarget:
    """The box to run on, as SSH reaches it.

    Attributes:
        host: IP address or name.
        port: SSH port.
        user: login name (Lambda's images: ``ubuntu``).
        key_file: the private key for SSH; read by asyncssh only, never copied or printed.
        known_hosts: an OpenSSH known_hosts file to check the host key against; None:
            accept the key on first use and record its fingerprint.
    """

    host: str
    port: int = 22
    user: str = "ubuntu"
    key_file: Path
    known_hosts: Path | None = None

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


def lost_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean the connection is gone (and worth making again)."""
    ssh = asyncssh_module()
    return (
        OSError,
        TimeoutError,
        ssh.DisconnectError,
        ssh.ChannelOpenError,
        ssh.SFTPConnectionLost,
    )


class Box:
    """An SSH connection and its SFTP session, made again after a drop.

    Args:
        target: the box.
        connect_timeout_s: limit on one connection attempt (TCP, key exchange, login).
        keepalive_s: seconds between keepalives; three unanswered ones end the connection.
        reconnect_s: how long to keep trying after a drop before giving up.
        notice: told (one line) each time the connection was made again after a drop.
    """

    def __init__(
        self,
        target: RemoteTarget,
        *,
        connect_timeout_s: float = 30.0,
        keepalive_s: float = 15.0,
        reconnect_s: float = 120.0,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.target = target
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.reconnect_s = reconnect_s
        self.fingerprint = ""
        self.first_use = False
        self.reconnects = 0
        self.notice = notice
        self._conn: Any = None
        self._sftp: Any = None

    async def __aenter__(self) -> Box:
        await self._connect(self.connect_timeout_s)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (no wait; safe to call twice)."""
        if self._sftp is not None:
            self._sftp.exit()
        if self._conn is not None:
            self._conn.close()
        self._conn = self._sftp = None

    async def _connect(self, timeout_s: float) -> None:
        ssh = asyncssh_module()
        t = self.target
        pinned = _PINNED.get((t.host, t.port))
        known: Any = str(t.known_hosts) if t.known_hosts else None
        if t.known_hosts is None and pinned is not None:
            known = ([pinned], [], [])
        try:
            conn = await ssh.connect(
                t.host,
                port=t.port,
                username=t.user,
                client_keys=[str(t.key_file)],
                known_hosts=known,
                agent_path=None,
                password=None,
                kbdint_auth=False,
                config=[],
                connect_timeout=timeout_s,
                keepalive_interval=self.keepalive_s,
                keepalive_count_max=3,
            )
        except ssh.PermissionDenied:
            raise RemoteError(
                f"SSH to {t} refused the key in {t.key_file} (permission denied); check the "
                "key file and that its public key is installed on the box for that user"
            ) from None
        except ssh.HostKeyNotVerifiable:
            raise RemoteError(
                f"the host key of {t} does not match "
                + (f"{t.known_hosts}" if t.known_hosts else "the key it showed before")
                + "; refusing to connect"
            ) from None
        except (ssh.KeyImportError, ssh.KeyEncryptionError) as exc:
            raise RemoteError(f"cannot use the key file {t.key_file}: {exc.reason}") from None
        key = conn.get_server_host_key()
        self.fingerprint = key.get_fingerprint("sha256") if key is not None else ""
        if t.known_hosts is None and pinned is None and key is not None:
            _PINNED[(t.host, t.port)] = key
            self.first_use = True
        self._conn = conn
        self._sftp = await conn.start_sftp_client()

    async def reconnect(self, why: BaseException) -> None:
        """Make the connection again, with back-off (0.5 s doubling to 8 s) until
        ``reconnect_s`` has passed.

        Raises:
            RemoteError: not reachable in time (naming the host and the first cause), or a
                refused key or changed host key (at once).
        """
        self.close()
        started = time.monotonic()
        deadline = started + self.reconnect_s
        delay = 0.5
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RemoteError(
                    f"lost the SSH connection to {self.target} ({type(why).__name__}: {why}) "
                    f"and could not connect again within {self.reconnect_s:g} s"
                )
            try:
                await self._connect(max(1.0, min(self.connect_timeout_s, left)))
            except RemoteError:
                raise
            except lost_errors():
                await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 8.0)
                continue
            self.reconnects += 1
            if self.notice is not None:
                gap = time.monotonic() - started
                self.notice(
                    f"SSH connection lost ({type(why).__name__}); connected again after {gap:.1f} s"
                )
            return

    async def call(self, fn: Callable[[Any, Any], Awaitable[T]]) -> T:
        """``fn(connection, sftp)``, again on a new connection after a drop.

        Raises:
            RemoteError: the box could not be reached again within ``reconnect_s``.
        """
        while True:
            if self._conn is None:
                await self.reconnect(ConnectionError("not connected"))
            try:
                return await fn(self._conn, self._sftp)
            except lost_errors() as exc:
                await self.reconnect(exc)

    async def run(self, command: str, *, what: str, timeout_s: float = 600.0) -> str:
        """Run a shell command on the box; its standard output.

        Raises:
            RemoteError: it exited non-zero or ran past ``timeout_s`` (``what`` names it,
                with the last lines of its output), or the box stayed unreachable.
        """

        ssh = asyncssh_module()

        async def go(conn: Any, _sftp: Any) -> Any:
            try:
                return await conn.run(command, check=False, timeout=timeout_s)
            except ssh.TimeoutError:  # a TimeoutError too: not a drop, so not run again
                message = f"{what} on {self.target}: no end after {timeout_s:g} s"
                raise RemoteError(message) from None

        done = await self.call(go)
        if done.exit_status != 0:
            out = f"{done.stdout or ''}{done.stderr or ''}".strip().splitlines()[-15:]
            status = done.exit_status if done.exit_status is not None else done.exit_signal
            raise RemoteError(
                f"{what} on {self.target} failed (status {status}):\n" + "\n".join(out)
            )
        return str(done.stdout or "")


__all__ = ["Box", "RemoteTarget", "asyncssh_module", "lost_errors"]

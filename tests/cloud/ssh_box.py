"""A stand-in for a rented box: asyncssh's SSH server on 127.0.0.1, run as its own process
(``python ssh_box.py PORT HOST_KEY AUTHORIZED_KEYS``) so a test can kill it with SIGKILL
and start it again on the same port.

Exec requests run as local shell commands (``/bin/sh -c``) with the server's environment
minus ``PYTHONPATH`` (so ``tokenwatt`` on the "box" is the one installed there), and SFTP
reaches the local file system. It prints ``ready`` once it listens.
"""

from __future__ import annotations

import asyncio
import os
import sys

import asyncssh

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


async def handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
    proc = await asyncio.create_subprocess_shell(
        process.command or "true",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=ENV,
    )
    out, err = await proc.communicate()
    process.stdout.write(out)
    process.stderr.write(err)
    process.exit(proc.returncode or 0)


async def main(port: int, host_key: str, authorized: str) -> None:
    await asyncssh.create_server(
        asyncssh.SSHServer,
        "127.0.0.1",
        port,
        server_host_keys=[host_key],
        authorized_client_keys=authorized,
        process_factory=handle,
        sftp_factory=True,
        encoding=None,
        allow_scp=False,
    )
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))

"""``tokenwatt sim``: run the simulated engine until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

from tokenwatt.errors import InputError, Problem
from tokenwatt.sim.engine import PROFILES
from tokenwatt.sim.server import SimServer, start_server
from tokenwatt.sim.suite import SuiteAnswers, load_suite


def make_server(
    profile: str,
    *,
    seed: int = 0,
    model: str = "tokenwatt-sim",
    accuracy_suite: Path | None = None,
    accuracy_p: float = 0.96,
    time_scale: float = 1.0,
) -> SimServer:
    """Build a :class:`SimServer` from command-line values.

    ``time_scale`` multiplies the profile's step times (see :meth:`Profile.slowed`).

    Raises:
        InputError: unknown profile, unreadable or malformed suite, p outside [0, 1],
            a time scale that is not a finite number > 0.
    """
    if profile not in PROFILES:
        known = ", ".join(sorted(PROFILES))
        raise InputError([Problem("--profile", "", f"unknown profile {profile!r}; known: {known}")])
    answers = None
    if accuracy_suite is not None:
        answers = SuiteAnswers(load_suite(accuracy_suite), accuracy_p, seed)
    try:
        chosen = PROFILES[profile] if time_scale == 1.0 else PROFILES[profile].slowed(time_scale)
    except ValueError as exc:
        raise InputError([Problem("--time-scale", "", str(exc))]) from exc
    return SimServer(chosen, seed=seed, model=model, answers=answers)


def serve(sim: SimServer, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``sim`` on ``host:port`` until Ctrl-C; prints the URL (with the bound port).

    The line ``tokenwatt sim: serving <profile> on http://HOST:PORT`` goes to stdout first
    thing, so a parent process can read the port when it passed 0.

    Raises:
        InputError: the address cannot be listened on (in use, unknown host, bad port).
    """

    async def main() -> None:
        try:
            runner, bound = await start_server(sim, host, port)
        except (OSError, OverflowError) as exc:  # in use, no such address, port > 65535
            why = getattr(exc, "strerror", None) or str(exc)
            raise InputError(
                [Problem(f"{host}:{port}", "--host/--port", f"cannot listen there: {why}")]
            ) from exc
        url_host = f"[{host}]" if ":" in host else host
        print(f"tokenwatt sim: serving {sim.profile.name} on http://{url_host}:{bound}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    sys.stdout.flush()

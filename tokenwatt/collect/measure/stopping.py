"""SIGTERM and SIGHUP end ``tokenwatt collect`` as Ctrl-C does, but keep the window in flight.

A service manager stops a process with SIGTERM (systemd, Docker, Kubernetes, ``kill``) and a
closed terminal sends SIGHUP; by default either kills Python on the spot and the run record
would stay "in progress". Here:

- Ctrl-C (SIGINT, Python's KeyboardInterrupt) stops at once: the window in flight is
  dropped, the windows before it kept;
- outside a measurement window (idle check, accuracy suite, between windows) the signal
  stops the run at once, like Ctrl-C: the record is written ``complete: false``;
- inside a window it asks the load generator to stop at its next check (every 0.5 s), so
  the window in flight is summarised and kept in the record, marked partial, before the
  run stops (a window still in its warm-up has nothing to keep: the run stops without
  it); a second signal stops at once.

The exit status is the shell's for death by that signal: 128 + its number (143 for
SIGTERM, 129 for SIGHUP).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterable, Iterator
from types import FrameType, TracebackType
from typing import Any

from tokenwatt.redact import scrub

GRACEFUL_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""The signals that end a run like Ctrl-C (SIGINT stays Python's KeyboardInterrupt)."""


FAILURE_TEXT_CHARS = 300
"""How much of an unexpected error's text :func:`failure_reason` keeps."""


def failure_reason(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """A run record's ``incomplete_reason`` for a run ended by an unexpected error: its type
    and its text, credentials scrubbed (:func:`tokenwatt.redact.scrub`, with ``secrets``
    such as the run's API key) and clipped to :data:`FAILURE_TEXT_CHARS` characters."""
    text = scrub(" ".join(str(exc).split()), secrets)
    if len(text) > FAILURE_TEXT_CHARS:
        text = text[: FAILURE_TEXT_CHARS - 1] + "…"
    detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return f"stopped by an unexpected error ({detail}); everything measured so far is kept"


class StopSignal(KeyboardInterrupt):
    """The run was asked to stop by a signal; ``name`` is ``SIGTERM`` or ``SIGHUP``."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class GracefulStop:
    """The run's SIGTERM/SIGHUP handler (see the module docstring). A context manager that
    installs the handlers in the main thread (elsewhere it does nothing) and restores the
    previous ones on exit."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self._in_window = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in GRACEFUL_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        first = self.requested is None
        self.requested = self.requested or name
        if not self._in_window or not first:
            raise StopSignal(self.requested)

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        """Mark a window in flight: a signal now stops the window instead of the process."""
        self._in_window = True
        try:
            yield
        finally:
            self._in_window = False

    def interrupted(self) -> bool:
        """True once a signal asked the run to stop (the load generator's ``interrupt``)."""
        return self.requested is not None

    def settle(self) -> None:
        """The run is stopping: from now on Ctrl-C, SIGTERM and SIGHUP are ignored, so that
        a second press cannot cut the last record write or the exit status short."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, *GRACEFUL_SIGNALS):
                signal.signal(sig, signal.SIG_IGN)
        self._previous.clear()  # leaving the context must not re-arm them

    def raise_if_requested(self) -> None:
        """After a window: stop the run when a signal came in during it.

        Raises:
            StopSignal: a signal was received.
        """
        if self.requested is not None:
            raise StopSignal(self.requested)


def exit_status(name: str) -> int:
    """The shell's exit status for death by the named signal: 128 + its number."""
    return 128 + int(signal.Signals[name])


__all__ = ["GRACEFUL_SIGNALS", "GracefulStop", "StopSignal", "exit_status"]

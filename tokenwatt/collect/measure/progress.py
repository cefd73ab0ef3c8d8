"""What a collect run reports while it runs: the :class:`Reporter` protocol and a reporter
that shows nothing (:class:`NullReporter`).

``collect`` never prints: every line the user sees while a run is prepared and measured
(the effective spec, the mode's lines, the engine as it reports itself, a warning before
the first window, each finished window, the live display's state) goes through one
:class:`Reporter` that the caller hands in. The command line hands in its rich terminal
reporter (:mod:`tokenwatt.cli.progress`); a library caller or a test that wants silence
takes :class:`NullReporter`. ``tests/collect/test_no_printing.py`` checks that no collect
module prints or touches ``sys.stdout``/``sys.stderr``.
"""

from __future__ import annotations

from typing import Any, Protocol


class WindowSnapshot(Protocol):
    """What the load generator reports while a window runs (``loadgen.WindowProgress``)."""

    @property
    def phase(self) -> str:
        """Where the window is: ``warmup``, ``window`` or ``drain``."""
        ...

    @property
    def rate_rps(self) -> float:
        """Offered request rate (req/s)."""
        ...

    @property
    def elapsed_s(self) -> float:
        """Time since the warm-up started (s)."""
        ...

    @property
    def total_s(self) -> float:
        """Warm-up plus window, planned (s)."""
        ...

    @property
    def sent(self) -> int:
        """Requests sent so far in the window (count)."""
        ...

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet finished (count)."""
        ...

    @property
    def errors(self) -> int:
        """Requests that failed so far (count)."""
        ...

    @property
    def ttft_p99_ms(self) -> float | None:
        """p99 TTFT of the in-window requests finished so far (ms; inf when failures reach
        p99), or None before any."""
        ...

    @property
    def tpot_p99_ms(self) -> float | None:
        """p99 TPOT of the in-window requests finished so far (ms; inf when failures reach
        p99), or None before any."""
        ...


class Reporter(Protocol):
    """Where a collect run says what it is doing.

    Two kinds of lines: :meth:`line` and :meth:`warning` are always shown (they say what
    the run measures and what it lacks, even without the live display); :meth:`note` and
    the live display (:meth:`begin`, :meth:`update`, entered as a context around the
    windows) belong to the progress view, which the user may switch off (``--no-progress``).
    Text handed in may quote a server or a record: the reporter makes it safe for its
    terminal (:func:`tokenwatt.text.terminal_safe`).
    """

    def line(self, text: str) -> None:
        """Show one line that is always shown (``effective spec: …``, the mode's lines)."""
        ...

    def warning(self, text: str) -> None:
        """Show a warning (without its ``warning:`` prefix, which the reporter adds)."""
        ...

    def note(self, message: str) -> None:
        """Show a line of the progress view that stays (a finished window, its warnings)."""
        ...

    def begin(self, step: str) -> None:
        """Start showing a new step (``grow probe 3``, ``repeat 1/2``, ``idle power``)."""
        ...

    def update(self, snap: WindowSnapshot) -> None:
        """Show a load-generator snapshot; passed to the load generator as its ``progress``
        callback, about once a second."""
        ...

    def __enter__(self) -> Reporter:
        """Start the live display (the windows are measured inside)."""
        ...

    def __exit__(self, *exc: Any) -> None:
        """Stop the live display."""
        ...


Progress = Reporter
"""The name the window runner and the searches know the reporter by (``progress=``)."""


class NullReporter:
    """A :class:`Reporter` that shows nothing (a library caller, a test)."""

    def line(self, text: str) -> None:
        """Shows nothing."""

    def warning(self, text: str) -> None:
        """Shows nothing."""

    def note(self, message: str) -> None:
        """Shows nothing."""

    def begin(self, step: str) -> None:
        """Shows nothing."""

    def update(self, snap: WindowSnapshot) -> None:
        """Shows nothing."""

    def __enter__(self) -> NullReporter:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


__all__ = ["NullReporter", "Progress", "Reporter", "WindowSnapshot"]

"""The live progress display of ``tokenwatt collect`` on stderr (rich).

One line per state: the step (probe phase or repeat), the rate, the window countdown, the
running p99 TTFT and TPOT, and errors. It is a view only: nothing it shows is stored.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from rich.console import Console
from rich.live import Live
from rich.text import Text

from tokenwatt.text import terminal_safe


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


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    if math.isinf(value):
        return "inf"
    return f"{value:,.0f} ms"


class Progress:
    """A one-line live display; ``enabled=False`` makes every method a no-op."""

    def __init__(self, *, enabled: bool = True, console: Console | None = None) -> None:
        self.enabled = enabled
        self.console = console or Console(stderr=True)
        self.step = ""
        self._live: Live | None = None

    def __enter__(self) -> Progress:
        if self.enabled:
            self._live = Live(
                Text("starting…"), console=self.console, refresh_per_second=4, transient=True
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def note(self, message: str) -> None:
        """Print a line that stays (a finished probe, a warning)."""
        if self.enabled:
            # Warnings quote servers (error bodies, messages): no escape reaches the terminal.
            self.console.print(
                terminal_safe(message), markup=False, highlight=False, soft_wrap=True
            )

    def begin(self, step: str) -> None:
        """Start showing a new step (e.g. ``grow probe 3``, ``repeat 1/2``)."""
        self.step = step
        if self._live is not None:
            self._live.update(Text(f"{step}: warming up"))

    def update(self, snap: WindowSnapshot) -> None:
        """Show a load-generator snapshot; passed to ``run_window(progress=...)``."""
        if self._live is None:
            return
        left = max(0.0, snap.total_s - snap.elapsed_s)
        countdown = f"{left:4.1f} s left" if snap.phase != "drain" else "draining"
        line = (
            f"{self.step} · {snap.rate_rps:.3g} req/s · {snap.phase} {countdown} · "
            f"p99 TTFT {_ms(snap.ttft_p99_ms)} · p99 TPOT {_ms(snap.tpot_p99_ms)} · "
            f"sent {snap.sent} · in flight {snap.in_flight} · errors {snap.errors}"
        )
        self._live.update(Text(line))

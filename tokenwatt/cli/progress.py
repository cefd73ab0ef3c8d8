"""``tokenwatt collect`` on the terminal while it runs: the rich
:class:`~tokenwatt.collect.measure.progress.Reporter` the command hands to ``collect``.

Every line goes to stderr (stdout keeps the table and the result). The live display is one
line per state: the step (probe phase or repeat), the rate, the window countdown, the
running p99 TTFT and TPOT, and errors. It is a view only: nothing it shows is stored.

The reporter remembers every line it showed, so that the end of the run
(:mod:`tokenwatt.cli.collect_report`) does not say a warning a second time
(:meth:`TerminalReporter.shown`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from tokenwatt.text import terminal_safe

if TYPE_CHECKING:
    from tokenwatt.collect import WindowSnapshot


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    if math.isinf(value):
        return "inf"
    return f"{value:,.0f} ms"


class TerminalReporter:
    """Lines and the live display on stderr; ``live=False`` (``--no-progress``) shows only
    :meth:`line` and :meth:`warning`, not the progress view."""

    def __init__(self, *, live: bool = True, console: Console | None = None) -> None:
        self.enabled = live
        self.console = console or Console(stderr=True)
        self.step = ""
        self._live: Live | None = None
        self._shown: set[str] = set()

    def _print(self, text: str) -> None:
        # Lines quote servers and records (error bodies, names): no escape reaches the
        # terminal, no markup or emoji code is read, and a long line is not cut.
        safe = terminal_safe(text)
        self._shown.add(safe.strip())
        self.console.print(safe, markup=False, highlight=False, emoji=False, soft_wrap=True)

    def shown(self, text: str) -> bool:
        """Whether this line (compared without surrounding spaces, as it was made terminal
        safe) was already shown in this run."""
        return terminal_safe(text).strip() in self._shown

    def line(self, text: str) -> None:
        """Show a line that is always shown."""
        self._print(text)

    def warning(self, text: str) -> None:
        """Show ``warning: text``, once: the same warning a second time is not shown."""
        if not self.shown(f"warning: {text}"):
            self._print(f"warning: {text}")

    def note(self, message: str) -> None:
        """Show a line of the progress view that stays (a finished window, a warning)."""
        if self.enabled:
            self._print(message)

    def __enter__(self) -> TerminalReporter:
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

    def begin(self, step: str) -> None:
        """Start showing a new step (e.g. ``grow probe 3``, ``repeat 1/2``)."""
        self.step = step
        if self._live is not None:
            self._live.update(Text(f"{step}: warming up"))

    def update(self, snap: WindowSnapshot) -> None:
        """Show a load-generator snapshot."""
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


__all__ = ["TerminalReporter"]

"""How long a search probe warms up and measures (``--fast-search``'s cheaper probes), pure.

Split from :mod:`tokenwatt.collect.measure.search`, whose probe callbacks (the collector's,
the benchmark's model) ask :class:`ProbePolicy` before each probe.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenwatt.collect.measure.search import SearchPhase


@dataclass(frozen=True)
class ProbePolicy:
    """How long a probe warms up and measures (s), from its phase and the verdicts so far.

    The defaults reproduce methods/goodput.md: every probe warms up for ``warmup_s`` and measures
    ``window_s``. The options cut GPU time where a verdict is rarely in doubt; a probe
    callback (the collector's, or the benchmark's model) asks :meth:`plan` before each
    probe.

    Attributes:
        warmup_s: warm-up before a probe (s).
        window_s: the search window (s).
        warmup_after_pass_s: warm-up (s) when the previous probe passed: the engine is
            already loaded near the new rate and has no backlog to drain. None: always
            ``warmup_s``.
        scout_window_s: a shorter window (s) for probes whose verdict is not close: grow
            probes, and bisection probes while the bracket (first miss / last pass − 1)
            is wider than ``scout_until_rel``. None: always ``window_s``.
        scout_until_rel: see ``scout_window_s`` (a fraction, e.g. 0.25).
    """

    warmup_s: float
    window_s: float
    warmup_after_pass_s: float | None = None
    scout_window_s: float | None = None
    scout_until_rel: float = 0.25

    def plan(self, phase: SearchPhase, history: list[tuple[float, bool]]) -> tuple[float, float]:
        """(warm-up s, window s) for the next probe, given (rate, passed) of earlier ones."""
        warmup = self.warmup_s
        if history and history[-1][1] and self.warmup_after_pass_s is not None:
            warmup = min(warmup, self.warmup_after_pass_s)
        window = self.window_s
        if self.scout_window_s is not None:
            passes = [r for r, ok in history if ok]
            misses = [r for r, ok in history if not ok]
            wide = True
            if phase == "bisect" and passes and misses:
                wide = min(misses) / max(passes) - 1 > self.scout_until_rel
            if wide:
                window = min(window, self.scout_window_s)
        return warmup, window


__all__ = ["ProbePolicy"]

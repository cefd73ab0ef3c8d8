"""One name per window of a run, the same wherever a window is named (pure).

The end-of-run table, ``tokenwatt show`` (and its ``--json`` and ``--requests``), the
report page's search table, its error samples and warnings, and the sentences that explain
the result all name a window by :func:`window_labels`. Every window gets its place in the
run (``#1``, ``#2``, … in the order measured, probes then repeats) and words that say what
it was:

- a search probe: ``#4 probe 4 at 16 req/s (grow)``; ``(grow, scout)`` for a short scout
  window of ``--fast-search``; ``at 8 clients`` for a closed loop;
- a repeat at the found load: ``#7 repeat 2 of 3 at 38.25 req/s (back-off 1)``, counted
  afresh at each load the search backed off to (``of 3``: the repeats the spec planned;
  left out when unknown);
- a fixed-load window (``sweep.fixed``): ``#3 load 3 of 5: 40 req/s`` or ``#2 load 2 of 3:
  8 clients``;
- a window the client's own lag made the collector measure again keeps the count of the
  window that replaced it and says so: ``#5 repeat 1 of 3 at 9 req/s (client lagged;
  measured again as #6)``, then ``#6 repeat 1 of 3 at 9 req/s (retry of #5)``.

The windows come as the report keeps them
(:class:`~tokenwatt.records.report.report_v3.SearchWindowV3`,
from a run record through :func:`~tokenwatt.analysis.window.search_windows.search_windows` or from
a report's ``configs[].search``), so a run and the report made from it label alike. The
per-request file names its windows by kind and place in the record's lists; those map to
the same labels (:func:`request_label`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tokenwatt.analysis.window.search_windows import search_windows
from tokenwatt.records import (
    NOT_IDLE_PREFIX,
    WORKER_DIED_PREFIX,
    ConfigV3,
    ReportV3,
    RunRecord,
    SearchWindowV3,
    Spec,
)

LabelKind = Literal["probe", "repeat", "load"]


@dataclass(frozen=True)
class LabelPlan:
    """What a label says beyond the windows themselves.

    Attributes:
        fixed: a fixed-load run (``sweep.fixed``): every window is one listed load.
        repeats_planned: repeats per load the spec asked for (``measurement.repeats``,
            after the mode preset); None when unknown.
        loads_planned: loads a fixed-load run lists; None when unknown.
    """

    fixed: bool = False
    repeats_planned: int | None = None
    loads_planned: int | None = None


@dataclass(frozen=True)
class WindowLabel:
    """One window's name.

    Attributes:
        number: the window's place in the run, from 1, in the order measured.
        kind: ``probe``, ``repeat`` or ``load`` (a fixed-load window).
        text: the words after the number (``repeat 2 of 3 at 38.25 req/s (back-off 1)``).
        retry_of: the number of the window this one measured again (the client lagged
            there); None when it is no retry.
        retried_as: the number of the window that measured this one again; None when its
            verdict was used (or the run stopped before the retry).
    """

    number: int
    kind: LabelKind
    text: str
    retry_of: int | None = None
    retried_as: int | None = None

    @property
    def ref(self) -> str:
        """The window's number as the labels and sentences cite it: ``#7``."""
        return f"#{self.number}"

    @property
    def label(self) -> str:
        """The whole name: ``#7 repeat 2 of 3 at 38.25 req/s (back-off 1)``."""
        return f"{self.ref} {self.text}"


def rate_words(rate_rps: float) -> str:
    """A rate as labels and sentences write it: ``45``, ``38.25``, ``1,200`` (≤ 2 decimals)."""
    return f"{rate_rps:,.2f}".rstrip("0").rstrip(".")


def load_at(w: SearchWindowV3) -> str:
    """A window's load for its label: ``16 req/s``, or ``8 clients`` for a closed loop."""
    if w.concurrency is not None:
        return f"{w.concurrency} client" + ("" if w.concurrency == 1 else "s")
    return f"{rate_words(w.rate_rps)} req/s"


def _same_load(a: SearchWindowV3, b: SearchWindowV3) -> bool:
    """Two repeats at one load: the same back-off count, or (unknown) the same load."""
    if a.backoff is not None and b.backoff is not None:
        return a.backoff == b.backoff
    return (a.concurrency, a.rate_rps) == (b.concurrency, b.rate_rps)


def _counts(windows: Sequence[SearchWindowV3], fixed: bool) -> list[int]:
    """Each window's count within its kind (probes; repeats at one load; fixed loads).

    A window measured again shares the count of the window that replaced it.
    """
    counts: list[int] = []
    used = 0
    previous: SearchWindowV3 | None = None
    for w in windows:
        restart = (
            not fixed
            and w.step == "repeat"
            and (previous is None or previous.step != "repeat" or not _same_load(previous, w))
        )
        if restart:
            used = 0
        counts.append(used + 1)
        used += 0 if w.remeasured else 1
        previous = w
    return counts


def _words(w: SearchWindowV3, count: int, plan: LabelPlan) -> tuple[LabelKind, str, list[str]]:
    """The kind, the words before any note in brackets, and the notes."""
    if plan.fixed:
        of = f" of {plan.loads_planned}" if plan.loads_planned else ""
        return "load", f"load {count}{of}: {load_at(w)}", []
    if w.step == "probe":
        phase: list[str] = [w.phase] if w.phase else []
        notes = [", ".join([*phase, "scout"])] if w.scout else phase
        return "probe", f"probe {count} at {load_at(w)}", notes
    of = f" of {plan.repeats_planned}" if plan.repeats_planned else ""
    notes = [f"back-off {w.backoff}"] if w.backoff else []
    return "repeat", f"repeat {count}{of} at {load_at(w)}", notes


def window_labels(windows: Sequence[SearchWindowV3], plan: LabelPlan) -> list[WindowLabel]:
    """The label of every window, in the order given (the order measured).

    Args:
        windows: every window of one run (or one configuration of a report), in order.
        plan: the planned repeats and loads (:func:`run_plan`, :func:`config_plan`).

    Returns:
        One :class:`WindowLabel` per window, numbered from 1 (module docstring).
    """
    out: list[WindowLabel] = []
    counts = _counts(windows, plan.fixed)
    for i, (w, count) in enumerate(zip(windows, counts, strict=True)):
        number = i + 1
        kind, head, notes = _words(w, count, plan)
        before = windows[i - 1] if i else None
        retry_of = number - 1 if before is not None and before.remeasured else None
        retried_as = number + 1 if w.remeasured and i + 1 < len(windows) else None
        if retry_of is not None:
            notes.append(f"retry of #{retry_of}")
        if w.remeasured:
            again = f"measured again as #{retried_as}" if retried_as else "verdict not used"
            why = (
                "worker died"
                if (w.failure_reason or "").startswith(WORKER_DIED_PREFIX)
                else "not proven idle"
                if (w.failure_reason or "").startswith(NOT_IDLE_PREFIX)
                else "client lagged"
            )
            notes.append(f"{why}; {again}")
        text = head + (f" ({'; '.join(notes)})" if notes else "")
        out.append(WindowLabel(number, kind, text, retry_of=retry_of, retried_as=retried_as))
    return out


def spec_plan(spec: Spec | None, repeats_planned: int | None) -> LabelPlan:
    """The :class:`LabelPlan` of a run of ``spec`` (None: a report made without one)."""
    if spec is None:
        return LabelPlan(repeats_planned=repeats_planned)
    closed = spec.measurement.profile == "concurrency"
    listed = spec.sweep.concurrencies if closed else spec.sweep.rates
    return LabelPlan(
        fixed=spec.sweep.fixed,
        repeats_planned=repeats_planned,
        loads_planned=len(listed) if listed else None,
    )


def run_labels(run: RunRecord) -> list[WindowLabel]:
    """The labels of a run record's windows: its probes, then its repeats."""
    return window_labels(search_windows(run), spec_plan(run.spec, run.spec.measurement.repeats))


def config_labels(config: ConfigV3, report: ReportV3) -> list[WindowLabel]:
    """The labels of one report configuration's search windows (``configs[].search``)."""
    return window_labels(config.search, spec_plan(report.spec, config.repeats_planned))


def request_label(labels: Sequence[WindowLabel], probes: int, kind: str, index: int) -> str:
    """The label of the window a per-request file's line belongs to.

    The file names a window by ``kind`` (``probe`` or ``repeat``) and ``index``, its place
    (from 0) in the run record's ``probes`` or ``repeats``; ``probes`` is how many probes
    the record has. A window the record does not hold is named by the file's own words:
    ``repeat index 4 (not in the run record)``.
    """
    place = index if kind == "probe" else probes + index
    inside = index < probes if kind == "probe" else place < len(labels)
    if index < 0 or not inside:
        return f"{kind} index {index} (not in the run record)"
    return labels[place].label

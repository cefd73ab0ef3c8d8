"""One sentence that says why a configuration's result rate is where it is.

Pure: the search's windows in (:class:`~tokenwatt.records.report.report_v3.SearchWindowV3`, from a
run record through :func:`~tokenwatt.analysis.window.search_windows.search_windows` or from a
report's ``configs[].search``), one sentence out. The cases, in the words they produce:

- the search found a rate and every repeat there met the SLO: "The search found 45 req/s,
  below a probe at 48 req/s (#5) that missed p99 TTFT (812 ms > 500 ms), and both repeats
  there met the SLO." ("…, the highest rate it probed (no probe missed, …), …" when nothing
  above it missed);
- a repeat missed and the rate backed off: "The search found 45 req/s, but the second
  repeat there (#8) missed p99 TTFT (530 ms > 500 ms); backed off to 38.25 req/s, which met the
  SLO in 2 of 2 repeats." (one "backed off to …, where the first repeat …" per back-off);
- the back-offs ran out: "…; no rate met the SLO in every repeat, so the result is
  inconclusive: the boundary did not repeat.";
- no probe met the SLO: "No rate met the SLO: the lowest probe, at 1 req/s (#1), missed
  p99 TPOT (62.4 ms > 50 ms)." ("No rate met the SLO, and not for the load: …; so the
  result is inconclusive." when the misses were refusals or no request completed);
- the run stopped early: before any window, during the search ("The run stopped during the
  SLO search (interrupted (Ctrl-C)); the highest probe that met the SLO was at 4 req/s
  (#3), and no repeat was measured."), during the repeats ("…, where the run stopped after 1 of 2
  repeats (…), so there is no result."), before a back-off, or after the result (each says
  so, with the run's reason up to its first ";");
- a record migrated from report schema 2, which kept only the final repeats, says what it
  cannot know.

A window's miss is told from its failure reason (which limits it names) and its numbers:
"missed p99 TTFT (812 ms > 500 ms)", "(failed requests reached the 99th percentile)" for an
infinite p99, "had errors in 3 of 200 requests (connect 2, timeout 1)", "was invalid (…)".
A window measured again because the client lagged is left out: its verdict was replaced.
A window the sentence names is cited by its number in the run, ``(#N)``, the number its
label gives it everywhere else (:mod:`tokenwatt.analysis.window.window_labels`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tokenwatt.analysis.stats.number_text import comparison
from tokenwatt.records import (
    ConfigV3,
    LatencyMsV3,
    ReportV3,
    RunRecord,
    SearchWindowV3,
)

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


@dataclass(frozen=True)
class SearchStory:
    """What the sentence needs besides the windows.

    Attributes:
        ttft_limit_ms: the SLO's p99 TTFT limit (ms).
        tpot_limit_ms: the SLO's p99 TPOT limit (ms).
        repeats_planned: repeats per rate the spec asked for; None when unknown.
        complete: false when the run stopped early.
        incomplete_reason: why it stopped (the run's own words).
        whole: the windows are every window the run measured (false for a record migrated
            from report schema 2, which kept only the probes and the final repeats).
        inconclusive: the result is inconclusive (``result.status``): a search whose every
            probe missed says the misses were not the load's.
        numbers: each window's number in the run (``#N`` of its label,
            :mod:`tokenwatt.analysis.window.window_labels`), keyed by the window object's ``id``;
            filled by :func:`explain_result` and :func:`explain_fixed` from the windows
            they are given.
    """

    ttft_limit_ms: float
    tpot_limit_ms: float
    repeats_planned: int | None = None
    complete: bool = True
    incomplete_reason: str | None = None
    whole: bool = True
    inconclusive: bool = False
    numbers: dict[int, int] = field(default_factory=dict, compare=False, hash=False)

    def ref(self, w: SearchWindowV3) -> str:
        """`` (#N)``: the window's number as its label gives it, to cite after it."""
        number = self.numbers.get(id(w))
        return f" (#{number})" if number is not None else ""

    def cited(self, w: SearchWindowV3) -> str:
        """The window's load with its number: ``48 req/s (#4)``, ``16 clients (4.4 req/s,
        #2)`` (:func:`load_text`)."""
        number = self.numbers.get(id(w))
        text = load_text(w)
        if number is None:
            return text
        if text.endswith(")"):
            return f"{text[:-1]}, #{number})"
        return f"{text} (#{number})"


def _numbered(windows: Sequence[SearchWindowV3], story: SearchStory) -> SearchStory:
    """``story`` with every window's number in the run (its place in ``windows``, from 1)."""
    return replace(story, numbers={id(w): i for i, w in enumerate(windows, start=1)})


def explain_run(run: RunRecord) -> str:
    """The sentence for a run record (the terminal at the end of ``collect``, ``report``)."""
    from tokenwatt.analysis.window.search_windows import search_windows

    story = SearchStory(
        ttft_limit_ms=run.spec.slo.ttft_p99_ms,
        tpot_limit_ms=run.spec.slo.tpot_p99_ms,
        repeats_planned=run.spec.measurement.repeats,
        complete=run.complete,
        incomplete_reason=run.incomplete_reason,
        inconclusive=run.result is not None and run.result.outcome()[0] == "inconclusive",
    )
    windows = search_windows(run)
    if run.spec.sweep.fixed:
        return explain_fixed(windows, story)
    return explain_result(windows, story)


def load_text(w: SearchWindowV3) -> str:
    """A window's load in words: ``12 req/s``, or ``8 clients (3.9 req/s)`` for a closed loop."""
    if w.concurrency is not None:
        return f"{w.concurrency} clients ({rate_text(w.rate_rps)} req/s)"
    return f"{rate_text(w.rate_rps)} req/s"


def _load(w: SearchWindowV3) -> float:
    """What the search varied: clients for a closed loop, else the rate (req/s)."""
    return float(w.concurrency) if w.concurrency is not None else w.rate_rps


def _noun(w: SearchWindowV3) -> str:
    return "load" if w.concurrency is not None else "rate"


def explain_fixed(windows: Sequence[SearchWindowV3], story: SearchStory) -> str:
    """The sentence for a fixed-load run (``sweep.fixed``): no search, one window a load;
    the load with the highest goodput among those that met the SLO (the result), and how
    the lowest load that missed it missed."""
    story = _numbered(windows, story)
    used = [w for w in windows if not w.remeasured]
    if not used:
        return "Fixed loads, no SLO search: no window was measured."
    met = [w for w in used if w.slo_pass]
    missed = [w for w in used if not w.slo_pass]
    head = f"Fixed loads, no SLO search: {len(met)} of {len(used)} windows met the SLO"
    if met:
        best = max(met, key=lambda w: w.goodput_tok_s or 0.0)
        head += f", the highest goodput at {load_text(best)}"
    if missed:
        first = missed[0]
        head += f"; at {load_text(first)} the window{story.ref(first)} {miss_text(first, story)}"
    return head + "."


def explain_config(config: ConfigV3, report: ReportV3) -> str:
    """The sentence for one configuration of a report record (the page)."""
    story = SearchStory(
        ttft_limit_ms=report.slo.ttft_p99_ms,
        tpot_limit_ms=report.slo.tpot_p99_ms,
        repeats_planned=config.repeats_planned,
        complete=config.complete,
        incomplete_reason=config.incomplete_reason,
        whole=config.whole_search,
        inconclusive=config.result_status == "inconclusive",
    )
    if report.spec is not None and report.spec.sweep.fixed:
        return explain_fixed(config.search, story)
    return explain_result(config.search, story)


def explain_result(windows: Sequence[SearchWindowV3], story: SearchStory) -> str:
    """One sentence (capitalised, ending in a full stop) on why the result rate is where
    it is; see the module docstring for every case. A window it names is cited by its
    number in the run, as its label gives it ("the first repeat there (#6) missed")."""
    story = _numbered(windows, story)
    probes = [w for w in windows if w.step == "probe" and not w.remeasured]
    repeats = [w for w in windows if w.step == "repeat" and not w.remeasured]
    if not repeats:
        text = _without_repeats(probes, story)
    elif not story.whole and not probes:
        text = f"this record keeps no probe of the SLO search; {_groups_text(repeats)}"
    else:
        text = _with_repeats(probes, repeats, story)
    return text[0].upper() + text[1:] + "."


# -- numbers and words ---------------------------------------------------------------------


def rate_text(rate_rps: float) -> str:
    """A rate as the sentence shows it: ``45``, ``38.25``, ``32.51`` (req/s, ≤ 2 decimals)."""
    return f"{rate_rps:,.2f}".rstrip("0").rstrip(".")


def _ordinal(n: int) -> str:
    return _ORDINALS[n - 1] if n <= len(_ORDINALS) else f"{n}th"


def _stop_reason(story: SearchStory) -> str:
    """The run's reason, up to its first ';' (the rest is advice such as "everything
    measured so far is kept")."""
    reason = (story.incomplete_reason or "").split(";")[0].strip()
    return reason or "no reason recorded"


def _words(reason: str | None) -> set[str]:
    return set(re.findall(r"[a-z]+", (reason or "").lower()))


def _limit_text(name: str, value: LatencyMsV3, limit: float, stopped_early: bool) -> str:
    if isinstance(value, int | float) and value > limit:
        # Decimals enough that a miss never reads as level with the limit (number_text).
        decimals = 0 if value >= 100 else 1
        return f"{name} ({comparison(value, limit, decimals=decimals, unit=' ms', strip=True)})"
    if stopped_early:
        return f"{name} (stopped early)"
    if value == "inf":
        return f"{name} (failed requests reached the 99th percentile)"
    return name


def _above(value: LatencyMsV3, limit: float) -> bool:
    return value == "inf" or (isinstance(value, int | float) and value > limit)


def miss_text(w: SearchWindowV3, story: SearchStory) -> str:
    """How a window missed, as a verb phrase: "missed p99 TTFT (812 ms > 500 ms)", "had
    errors in 3 of 200 requests (connect 2, timeout 1)", "was invalid (…)", joined with
    "and"; "missed the SLO (reason)" when neither the reason nor the numbers say more."""
    words = _words(w.failure_reason)
    named = words & {"ttft", "tpot", "errors"}
    if named:
        ttft, tpot, errors = "ttft" in named, "tpot" in named, "errors" in named
    else:
        ttft = _above(w.ttft_p99_ms, story.ttft_limit_ms)
        tpot = _above(w.tpot_p99_ms, story.tpot_limit_ms)
        errors = (
            w.errors is not None
            and w.requests is not None
            and (w.errors > max(w.requests - 1, 0) // 100)
        )
    limits = []
    if ttft:
        limits.append(_limit_text("p99 TTFT", w.ttft_p99_ms, story.ttft_limit_ms, w.stopped_early))
    if tpot:
        limits.append(_limit_text("p99 TPOT", w.tpot_p99_ms, story.tpot_limit_ms, w.stopped_early))
    parts = ["missed " + " and ".join(limits)] if limits else []
    if errors:
        parts.append(_errors_text(w))
    if not w.valid:
        parts.append(f"was invalid ({w.invalid_reason or 'no reason recorded'})")
    if not parts:
        return f"missed the SLO ({w.failure_reason})" if w.failure_reason else "missed the SLO"
    return _join(parts)


def _errors_text(w: SearchWindowV3) -> str:
    kinds = sorted(w.error_kinds.items(), key=lambda kv: (-kv[1], kv[0]))
    detail = f" ({', '.join(f'{k} {v:,}' for k, v in kinds)})" if kinds else ""
    if w.errors is not None and w.requests is not None:
        return f"had errors in {w.errors:,} of {w.requests:,} requests{detail}"
    return f"had errors{detail}"


def _join(parts: list[str]) -> str:
    if len(parts) <= 2:
        return " and ".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


# -- the cases -----------------------------------------------------------------------------


def _found_probe(probes: Sequence[SearchWindowV3]) -> SearchWindowV3 | None:
    """The highest passing probe below the lowest miss (the search's found rate)."""
    first_miss = min((_load(p) for p in probes if not p.slo_pass), default=None)
    below = [p for p in probes if p.slo_pass and (first_miss is None or _load(p) < first_miss)]
    return max(below, key=_load, default=None)


def _without_repeats(probes: Sequence[SearchWindowV3], story: SearchStory) -> str:
    if not probes:
        if not story.whole:
            return "this record keeps no window of the SLO search"
        if story.complete:
            return "no window of the SLO search was measured"
        return f"the run stopped before any window was measured ({_stop_reason(story)})"
    found = _found_probe(probes)
    if found is None:
        if not story.complete:
            return (
                f"the run stopped during the SLO search ({_stop_reason(story)}) before any "
                "probe met the SLO"
            )
        lowest = min(probes, key=_load)
        if story.inconclusive:
            return (
                f"no {_noun(lowest)} met the SLO, and not for the load: the lowest probe, at "
                f"{story.cited(lowest)}, {miss_text(lowest, story)}; so the result is "
                "inconclusive"
            )
        return (
            f"no {_noun(lowest)} met the SLO: the lowest probe, at {story.cited(lowest)}, "
            f"{miss_text(lowest, story)}"
        )
    if story.whole and not story.complete:
        return (
            f"the run stopped during the SLO search ({_stop_reason(story)}); the highest probe "
            f"that met the SLO was at {story.cited(found)}, and no repeat was "
            "measured"
        )
    opening = f"the search found {load_text(found)}{_bracket(found, probes, story)}"
    if not story.whole:
        return f"{opening}; this record keeps no repeat window"
    return f"{opening}, but no repeat was measured there"


def _bracket(found: SearchWindowV3, probes: Sequence[SearchWindowV3], story: SearchStory) -> str:
    """Why the search stopped at ``found``: the probe above it that missed, or nothing
    above it probed."""
    above = [p for p in probes if not p.slo_pass and _load(p) > _load(found)]
    if above:
        miss = min(above, key=_load)
        return f", below a probe at {story.cited(miss)} that {miss_text(miss, story)}"
    if _load(found) >= max(_load(p) for p in probes):
        return (
            f", the highest {_noun(found)} it probed (no probe missed, so the SLO boundary lies "
            "higher "
            "and this goodput is a lower bound)"
        )
    return ""


def _groups(repeats: Sequence[SearchWindowV3]) -> list[list[SearchWindowV3]]:
    """Repeats split by rate: by back-off count, or (unknown back-offs) by a change of rate."""
    groups: list[list[SearchWindowV3]] = []
    for w in repeats:
        last = groups[-1][-1] if groups else None
        same = last is not None and (
            last.backoff == w.backoff if w.backoff is not None else _load(last) == _load(w)
        )
        if same:
            groups[-1].append(w)
        else:
            groups.append([w])
    return groups


def _all_met(group: Sequence[SearchWindowV3]) -> str:
    n = len(group)
    if n == 1:
        return "the one repeat there met the SLO"
    if n == 2:
        return "both repeats there met the SLO"
    return f"all {n} repeats there met the SLO"


def _with_repeats(
    probes: Sequence[SearchWindowV3], repeats: Sequence[SearchWindowV3], story: SearchStory
) -> str:
    groups = _groups(repeats)
    first = groups[0][0]
    first_rate = _load(first)
    found = _found_probe(probes)
    opening = f"the search found {load_text(first)}"
    if not story.whole and found is not None and _load(found) > first_rate:
        return (
            f"the search found {load_text(found)}; this record keeps only the "
            f"repeats at {load_text(first)} (report schema 2 kept no repeat before "
            f"the last back-off), {_final_text(groups[-1])}"
        )
    head = groups[0]
    if len(groups) == 1 and all(w.slo_pass for w in head) and _full(head, story):
        bracket = _bracket(found, probes, story) if found and _load(found) == first_rate else ""
        text = f"{opening}{bracket}, and {_all_met(head)}"
        return text + _stopped_after(story)
    clauses = [opening + _group_clause(head, story, first=True, last=len(groups) == 1)]
    for i, group in enumerate(groups[1:], start=1):
        clause = _group_clause(group, story, first=False, last=i == len(groups) - 1)
        clauses.append(f"backed off to {load_text(group[0])}{clause}")
    return "; ".join(clauses) + _tail(groups[-1], story)


def _full(group: Sequence[SearchWindowV3], story: SearchStory) -> bool:
    """Every planned repeat at this rate was measured (assumed when the plan is unknown)."""
    return story.repeats_planned is None or len(group) >= story.repeats_planned


def _group_clause(
    group: Sequence[SearchWindowV3], story: SearchStory, *, first: bool, last: bool
) -> str:
    """What happened at one rate: the repeat that missed, or (the last rate) the result."""
    missed = next((i for i, w in enumerate(group) if not w.slo_pass), None)
    if missed is not None:
        joiner = ", but the {} repeat there" if first else ", where the {} repeat"
        w = group[missed]
        return f"{joiner.format(_ordinal(missed + 1))}{story.ref(w)} {miss_text(w, story)}"
    if last and not _full(group, story) and not story.complete:
        done, planned = len(group), story.repeats_planned
        return (
            f", where the run stopped after {done} of {planned} repeats "
            f"({_stop_reason(story)}), so there is no result"
        )
    n = len(group)
    return f", which met the SLO in {n} of {n} repeats"


def _final_text(group: Sequence[SearchWindowV3]) -> str:
    passed = sum(1 for w in group if w.slo_pass)
    return f"which met the SLO in {passed} of {len(group)} repeats"


def _tail(last: Sequence[SearchWindowV3], story: SearchStory) -> str:
    """After the last rate: goodput 0 when it missed, or the run's stop after the result."""
    if any(not w.slo_pass for w in last):
        if not story.complete:
            return f"; the run stopped before backing off ({_stop_reason(story)}), so goodput is 0"
        return (
            f"; no {_noun(last[0])} met the SLO in every repeat, so the result is "
            "inconclusive: the boundary did not repeat"
        )
    if _full(last, story):
        return _stopped_after(story)
    return ""


def _stopped_after(story: SearchStory) -> str:
    if story.complete:
        return ""
    return f"; the run stopped after that ({_stop_reason(story)})"


def _groups_text(repeats: Sequence[SearchWindowV3]) -> str:
    """Repeats of a record without probes: the rate(s) and how many met the SLO."""
    groups = _groups(repeats)
    last = groups[-1]
    passed = sum(1 for w in last if w.slo_pass)
    return f"its repeats at {load_text(last[0])} met the SLO in {passed} of {len(last)}"


def gpu_minutes(seconds: float) -> str:
    """GPU-seconds as minutes for a sentence, never a false zero: ``"0"`` for none,
    ``"<0.1"`` below 0.05 min, else one decimal (``"2.4"``)."""
    minutes = seconds / 60.0
    if minutes <= 0:
        return "0"
    if minutes < 0.05:
        return "<0.1"
    return f"{minutes:,.1f}"

"""Why a run record cannot go into a report (pure): :func:`run_problems`, each problem naming
the file and the field, for ``tokenwatt report`` to refuse with exit status 2."""

from __future__ import annotations

import math

from tokenwatt.analysis.report.report_setup import final_repeats, no_result_reason
from tokenwatt.analysis.stats.repeat_stats import goodput_disagreement
from tokenwatt.errors import Problem
from tokenwatt.records import RunInput, RunRecord, energy_mismatch


def _worst_finite(values: list[object]) -> float | None:
    finite = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
    return max(finite) if finite else None


def run_problems(item: RunInput, *, demo: bool) -> list[Problem]:
    """Why a run record cannot go into a report, each naming the file and field; empty
    when it can: a smoke-mode or simulated run (unless ``demo``), no result, a measured
    result without repeats at its load or without a finite p99, a goodput its repeats do
    not give, or a valid power window whose energy is not its mean power × its length
    (:func:`tokenwatt.records.energy_mismatch`)."""
    run, name = item.run, item.name
    problems: list[Problem] = []
    if run.mode == "smoke" and not demo:
        problems.append(
            Problem(
                name,
                "mode",
                "a smoke-mode run checks the pipeline only; its numbers are never reported as "
                "measurements. Rerun in quick or full mode, or pass --demo",
            )
        )
    if run.simulated and not demo:
        problems.append(
            Problem(
                name,
                "simulated",
                "a simulated engine's run is not a measurement; pass --demo to make a demo "
                "report from it",
            )
        )
    if run.result is None:
        problems.append(Problem(name, "result", no_result_reason(run)))
    elif run.result.outcome()[0] != "measured":
        return problems  # reported as inconclusive or none met: no repeats to check
    repeats = final_repeats(run)
    # A fixed-load run without a result stopped early: the result problem says so.
    if not repeats and not (run.spec.sweep.fixed and run.result is None):
        problems.append(
            Problem(
                name,
                "repeats",
                "no listed load met the SLO in this fixed-load run, so there is no operating "
                "point to report"
                if run.spec.sweep.fixed
                else "the run has no measurement repeats at the found rate",
            )
        )
    elif _worst_finite([r.window.ttft_ms.p99 for r in repeats]) is None:
        problems.append(
            Problem(
                name,
                "repeats[*].window.ttft_ms.p99",
                "no repeat has a finite p99 TTFT (every window failed); nothing to report",
            )
        )
    elif run.result is not None and (
        why := goodput_disagreement(run.result.goodput_tok_s, repeats)
    ):
        problems.append(Problem(name, "result.goodput_tok_s", why))
    return problems + _energy_problems(run, name)


def _energy_problems(run: RunRecord, name: str) -> list[Problem]:
    """A valid repeat's energy that its own mean power and length do not give: the record
    was edited or damaged, and tokens per joule would divide by a number nothing measured."""
    problems = []
    for i, repeat in enumerate(run.repeats):
        p, where = repeat.power, f"repeats[{i}]"
        if p is None or not p.valid or p.energy_j is None or p.mean_power_w is None:
            continue
        why = energy_mismatch(p.energy_j, p.mean_power_w, p.duration_s)
        if why is not None:
            problems.append(Problem(name, f"{where}.power.energy_j", why))
    return problems


__all__ = ["run_problems"]

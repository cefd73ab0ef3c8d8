"""Per-window figures of a report page: how a window ended, and the measurement repeats.

The whole-search table (:mod:`tokenwatt.site.pages.search`) says how each window ended (met the
SLO, or which failure mode missed it, stopped early, measured again); the repeats table
gives each window's mean board power (W, summed over the GPUs), energy (J), tokens per
joule (:func:`tokenwatt.analysis.repeat_tokens_per_joule`, the same function as the headline's,
methods/energy.md), throttle-reason sample counts and mean clocks (MHz). Every
figure comes from the record's ``configs[].search`` and ``configs[].repeats_detail``;
tokens per joule is recomputed here, never read from a record. Text from records (failure
reasons, throttle-reason names) is data and is escaped by the template environment.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from tokenwatt.analysis import repeat_tokens_per_joule
from tokenwatt.records import LatencyMsV3, RepeatV2, ReportV3, SearchWindowV3
from tokenwatt.site.format.escape import md_text, trusted
from tokenwatt.site.format.fmt import DASH, num, pct


def finite_ms(value: LatencyMsV3) -> float | None:
    """A p99 (ms) when it is a finite number; None for ``"inf"`` or no sample."""
    return float(value) if isinstance(value, int | float) else None


def probe_outcome(p: SearchWindowV3) -> str:
    """How a window ended: "meets the SLO", or its failure mode and reason (record text)."""
    if p.slo_pass:
        return "meets the SLO"
    reason = p.failure_reason or "missed the SLO"
    if p.stopped_early and "stopped" not in reason:
        reason = f"{reason} (stopped early)"
    return reason


def window_goodput(goodput_tok_s: float | None, slo_pass: bool) -> Markup:
    """A window's goodput (tok/s) for a table: the number when the window met the SLO, a
    dash when it missed (its tokens were not delivered within the SLO, so they are no
    goodput; a window stopped early also ran short of its length)."""
    return num(goodput_tok_s, 1) if slo_pass else DASH


def _throttle(r: RepeatV2) -> str:
    if not r.throttle_counts:
        return "none" if r.power_samples else "—"
    of = f" of {r.power_samples:,}" if r.power_samples else ""
    return ", ".join(f"{k} {v:,}{of}" for k, v in sorted(r.throttle_counts.items()))


def _refused(r: RepeatV2) -> str | None:
    """The power cell of a window whose power was refused: "refused: " and the reasons
    (text from the record, escaped as data); None when it was not refused."""
    if not r.power_refused:
        return None
    return trusted("refused: ") + trusted("; ").join(md_text(x) for x in r.power_refused)


def repeat_rows(report: ReportV3, names: list[str]) -> list[dict[str, Any]]:
    """One row per measurement repeat at the found rate, with its power figures."""
    rows = []
    for name, cfg in zip(names, report.configs, strict=True):
        for r in cfg.repeats_detail:
            clocks = (
                DASH
                if r.sm_clock_mhz is None and r.mem_clock_mhz is None
                else f"{num(r.sm_clock_mhz, 0)} / {num(r.mem_clock_mhz, 0)}"
            )
            rows.append(
                {
                    "name": name,
                    "rate": num(r.rate_rps, 2),
                    "goodput": window_goodput(r.goodput_tok_s, r.slo_pass),
                    "ttft": num(r.ttft_p99_ms, 1),
                    "tpot": num(r.tpot_p99_ms, 1),
                    "slo": "✓" if r.slo_pass else "✗",
                    "attainment": pct(r.slo_attainment_pct),
                    "power": _refused(r) or num(r.mean_power_w, 0),
                    "energy": DASH if r.power_refused else num(r.energy_j, 0),
                    "tpj": num(repeat_tokens_per_joule(r), 2) if r.slo_pass else DASH,
                    "throttle": _throttle(r),
                    "clocks": clocks,
                }
            )
    return rows

"""Chart specs of a report page: goodput, tokens per joule, accuracy, SLO search, power, MBU.

Every figure comes from the record's raw numbers or from
:func:`~tokenwatt.analysis.analyse_report`; the specs are written into the page as JSON
(:func:`~tokenwatt.site.escape.json_for_script`) and drawn by vega-embed in the browser.
"""

from __future__ import annotations

from typing import Any

from tokenwatt.analysis import ConfigAnalysis, ReportAnalysis
from tokenwatt.records import ReportV3
from tokenwatt.site import charts
from tokenwatt.site.escape import json_for_script
from tokenwatt.site.latency_charts import latency_charts
from tokenwatt.site.windows import finite_ms, probe_outcome


def chart_specs(
    report: ReportV3, analysis: ReportAnalysis, names: list[str]
) -> list[dict[str, Any]]:
    """The page's charts (id, title, Vega-Lite spec and its JSON), in page order; a chart
    whose data the record lacks is left out. ``names`` are the configurations' names."""
    pairs = list(zip(names, analysis.configs, strict=True))
    out: list[dict[str, Any]] = [
        {
            "id": "goodput",
            "title": "SLO goodput per configuration",
            "spec": charts.goodput_chart(
                [
                    {
                        "name": n,
                        "role": c.config.effective_role,
                        "goodput_tok_s": c.config.goodput_tok_s,
                    }
                    for n, c in pairs
                ]
            ),
        }
    ]
    tpj_rows = [
        {"name": n, "role": c.config.effective_role, "tokens_per_j": round(c.tokens_per_joule, 4)}
        for n, c in pairs
        if c.tokens_per_joule is not None
    ]
    if tpj_rows:
        out.append(
            {
                "id": "tokens-per-joule",
                "title": "Tokens per joule per configuration",
                "spec": charts.tokens_per_joule_chart(tpj_rows),
            }
        )
    acc_rows = []
    for n, c in pairs:
        if c.config.accuracy is None:
            continue
        # The same words as the page's table (``pages._gate_text``).
        if c.is_baseline:
            verdict = "baseline"
        else:
            verdict = "no gate" if c.gate is None else ("pass" if c.gate.passed else "fail")
        acc_rows.append({"name": n, "score": c.config.accuracy.score, "verdict": verdict})
    base_acc = analysis.baseline.config.accuracy
    if acc_rows:
        gate_line = None if base_acc is None else base_acc.score - report.accuracy.threshold_pts
        out.append(
            {
                "id": "accuracy",
                "title": "Accuracy against the gate line",
                "spec": charts.accuracy_chart(acc_rows, gate_line),
            }
        )
    sweep_rows = _sweep_rows(report, pairs)
    if sweep_rows:
        out.append(
            {
                "id": "sweep",
                "title": "SLO search: probes against the SLO limit",
                "spec": charts.sweep_chart(sweep_rows),
            }
        )
    out += latency_charts(report, names)
    power_rows = []
    for n, c in pairs:
        timeline = c.config.power_timeline
        for i, s in enumerate(timeline):
            end = timeline[i + 1].t_s if i + 1 < len(timeline) else s.t_s + _step(timeline)
            power_rows.append(
                {
                    "name": n,
                    "t_s": s.t_s,
                    "t_end_s": end,
                    "power_w": s.power_w,
                    "throttle": ", ".join(sorted(s.throttle)),
                }
            )
    if power_rows:
        out.append(
            {
                "id": "power",
                "title": "Board power over the window, throttle reasons shaded",
                "spec": charts.power_chart(power_rows),
            }
        )
    mbu_rows = []
    for n, c in pairs:
        b = c.config.mbu_breakdown
        if b is not None:
            mbu_rows.append({"name": n, "part": "weights", "gbs": b.weights_gbs, "order": 0})
            mbu_rows.append({"name": n, "part": "KV cache", "gbs": b.kv_gbs, "order": 1})
    if mbu_rows:
        hw = report.hardware
        rated = (
            None if hw.rated_bw_tbs_per_gpu is None else hw.rated_bw_tbs_per_gpu * 1000 * hw.count
        )
        out.append(
            {
                "id": "mbu",
                "title": "MBU breakdown: derived memory traffic",
                "spec": charts.mbu_chart(mbu_rows, rated),
            }
        )
    for item in out:
        item["json"] = json_for_script(item["spec"])
    return out


def _slo_load(ttft: float | None, tpot: float | None, report: ReportV3) -> float | None:
    """The worse of p99 TTFT / limit and p99 TPOT / limit (≤ 1 meets the SLO); None when
    neither p99 is finite."""
    ratios = []
    if ttft is not None:
        ratios.append(ttft / report.slo.ttft_p99_ms)
    if tpot is not None:
        ratios.append(tpot / report.slo.tpot_p99_ms)
    return round(max(max(ratios), 1e-3), 6) if ratios else None


def _sweep_rows(report: ReportV3, pairs: list[tuple[str, ConfigAnalysis]]) -> list[dict[str, Any]]:
    """One point per SLO-search probe (``configs[].search``), misses with their failure mode.

    A probe that missed with an infinite p99 (failed requests reached the 99th percentile,
    or it was stopped early) has no finite ratio for the limit it missed; it is drawn above
    every finite point (at 1.5 × the largest ratio, at least 2) and marked ``off_scale``,
    never left out or drawn below the SLO line.
    """
    rows: list[dict[str, Any]] = []
    for n, c in pairs:
        for p in (w for w in c.config.search if w.step == "probe"):
            ttft, tpot = finite_ms(p.ttft_p99_ms), finite_ms(p.tpot_p99_ms)
            load = _slo_load(ttft, tpot, report)
            off_scale = not p.slo_pass and (load is None or load <= 1.0)
            rows.append(
                {
                    "name": n,
                    "rate_rps": p.rate_rps,
                    "slo_load": None if off_scale else load,
                    "off_scale": off_scale,
                    "ttft_p99_ms": ttft,
                    "tpot_p99_ms": tpot,
                    "verdict": "meets SLO" if p.slo_pass else "misses SLO",
                    "outcome": probe_outcome(p),
                }
            )
    finite = [r["slo_load"] for r in rows if r["slo_load"] is not None]
    top = round(max(2.0, 1.5 * max(finite, default=1.0)), 6)
    for r in rows:
        if r["off_scale"]:
            r["slo_load"] = top
    return [r for r in rows if r["slo_load"] is not None]


def _step(timeline: list[Any]) -> float:
    if len(timeline) >= 2:
        return float(timeline[-1].t_s - timeline[-2].t_s)
    return 1.0

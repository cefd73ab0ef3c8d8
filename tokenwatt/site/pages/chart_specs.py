"""Chart specs of a report page: goodput, tokens per joule, accuracy, SLO search, power, MBU.

Every figure comes from the record's raw numbers or from
:func:`~tokenwatt.analysis.analyse_report`; the specs are written into the page as JSON
(:func:`~tokenwatt.site.format.escape.json_for_script`) and drawn by vega-embed in the browser.
"""

from __future__ import annotations

from typing import Any

from tokenwatt.analysis import ReportAnalysis
from tokenwatt.records import ReportV3
from tokenwatt.site.charts import charts
from tokenwatt.site.charts.latency_charts import latency_charts
from tokenwatt.site.charts.probe_chart import sweep_item
from tokenwatt.site.format.escape import json_for_script


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
                        "goodput_tok_s": c.config.goodput_tok_s
                        if c.config.result_status != "inconclusive"
                        else None,
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
    sweep = sweep_item(report, names)
    if sweep is not None:
        out.append(sweep)
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


def _step(timeline: list[Any]) -> float:
    if len(timeline) >= 2:
        return float(timeline[-1].t_s - timeline[-2].t_s)
    return 1.0

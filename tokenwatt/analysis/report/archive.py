"""The archive across notes: one row of headline figures per configuration, and the
Pareto frontier of goodput per card against per-user interactivity.

Pure: report records in, rows out. The rows feed the site's frontier page and
``tokenwatt export`` (CSV and Parquet), so the two can never disagree.

Definitions (methods/frontier.md):

- **goodput per card**: the configuration's SLO goodput (tok/s) ÷ the note's accelerator
  count (``hardware.count``), with the same division applied to its t-interval.
- **interactivity** (tokens/s per user): 1000 ÷ p99 TPOT (ms) at the operating point, the
  decode speed that 99% of requests at least got. SemiAnalysis InferenceX plots the same
  axis from a median; we take the p99 the SLO is judged on, so a point's interactivity
  is one the SLO vouches for. Its interval is 1000 ÷ the ends of the p99's
  order-statistic interval (an unbounded upper end gives a lower end of 0).
- **frontier**: among the points of one model on one hardware that are measured and do
  not fail the accuracy gate, those no other point beats on both axes (at least as good
  on each, better on one). Gate failures, "none met" and inconclusive results are rows
  but never frontier points.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from tokenwatt.analysis.report.report import ConfigAnalysis, ReportAnalysis, analyse_report
from tokenwatt.analysis.stats.intervals import t_interval
from tokenwatt.analysis.stats.repeat_stats import repeat_tpjs
from tokenwatt.records import ReportV3, fingerprint

Gate = Literal["pass", "fail", "no gate", "baseline"]
View = Literal["goodput", "tokens_per_joule", "cost"]


@dataclass(frozen=True)
class ArchiveRow:
    """One configuration of one note, with its headline figures and their intervals.

    Units: tok/s (goodput), tok/s per card, ms (latencies and the SLO's limits), req/s
    (the operating point's rate), tok/s per user (interactivity), tok/J, US$ per million
    output tokens, % (MBU, accuracy), accuracy points (the delta). ``updated``: the note
    carries update notices that correct some figures (the row keeps them as first
    published). Latency intervals are the p99's order-statistic ends; an end beyond the
    sample is empty. ``None``
    where the record does not give the figure (no power, no cost, no interval). The
    ``frontier_*`` fields say whether the row is on the frontier of that view within
    its model and hardware (:func:`mark_frontiers`).
    """

    note: str
    title: str
    published: str
    status: str
    demo: bool
    simulated: bool
    updated: bool
    fingerprint: str | None
    model: str
    hardware: str
    cards: int
    engine: str
    engine_version: str | None
    config: str
    role: str
    precision: str
    mode: str | None
    result_status: str
    gate: Gate
    slo_ttft_p99_ms: float
    slo_tpot_p99_ms: float
    rate_rps: float | None
    repeats: int
    slo_pass_count: int
    goodput_tok_s: float | None
    goodput_low: float | None
    goodput_high: float | None
    goodput_per_card: float | None
    goodput_per_card_low: float | None
    goodput_per_card_high: float | None
    ttft_p99_ms: float | None
    ttft_p99_low: float | None
    ttft_p99_high: float | None
    tpot_p99_ms: float | None
    tpot_p99_low: float | None
    tpot_p99_high: float | None
    interactivity_tok_s_user: float | None
    interactivity_low: float | None
    interactivity_high: float | None
    tokens_per_joule: float | None
    tokens_per_joule_low: float | None
    tokens_per_joule_high: float | None
    usd_per_million_tokens: float | None
    mbu_pct: float | None
    accuracy_score: float | None
    accuracy_delta_pts: float | None
    frontier_goodput: bool = False
    frontier_tokens_per_joule: bool = False
    frontier_cost: bool = False

    @property
    def eligible(self) -> bool:
        """Measured, not failing the gate, in a note not retracted: the only rows a
        frontier may hold."""
        return (
            self.result_status == "measured" and self.gate != "fail" and self.status != "retracted"
        )

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict (export columns, chart data)."""
        return asdict(self)


def _kind(annotation: str) -> str:
    for kind in ("bool", "int", "float"):
        if annotation.split(" | ")[0] == kind:
            return kind
    return "str"


COLUMNS: dict[str, str] = {
    name: _kind(str(f.type)) for name, f in ArchiveRow.__dataclass_fields__.items()
}
"""The export's columns in order, each with its kind: ``str``, ``bool``, ``int`` or
``float`` (every column may be empty where the record does not give the figure)."""


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _bound(value: float | str | None) -> float | None:
    """An interval end in ms; None when unbounded or a failed request ("inf")."""
    return _finite(value) if isinstance(value, float | int) else None


def _interactivity(c: ConfigAnalysis) -> tuple[float | None, float | None, float | None]:
    """Interactivity (tok/s per user) = 1000 / p99 TPOT (ms), with its interval."""
    tpot = _finite(c.config.tpot_p99_ms)
    if tpot is None or tpot <= 0:
        return None, None, None
    ci = c.config.tpot_p99_ci_ms
    low = high = None
    if ci is not None:
        ci_high = _bound(ci.high_ms)
        ci_low = _bound(ci.low_ms)
        low = 1000.0 / ci_high if ci_high else 0.0
        high = 1000.0 / ci_low if ci_low else None
    return 1000.0 / tpot, low, high


def _precision(report: ReportV3, c: ConfigAnalysis) -> str:
    spec = report.spec
    weights = spec.model.weight_dtype if spec is not None else None
    # The report's spec is the baseline's: another configuration's KV dtype is only known
    # from its own settings (records before v3 keep none).
    kv = c.config.settings.get("kv_dtype")
    if kv is None and c.is_baseline and spec is not None:
        kv = spec.model.kv_dtype
    return f"weights {weights or 'not stated'} · KV {kv or 'not stated'}"


def _gate(c: ConfigAnalysis) -> Gate:
    if c.is_baseline:
        return "baseline"
    if c.gate is None:
        return "no gate"
    return "pass" if c.gate.passed else "fail"


def _row(report: ReportV3, c: ConfigAnalysis) -> ArchiveRow:
    cfg = c.config
    cards = report.hardware.count
    measured = cfg.result_status == "measured"
    ci = c.goodput_ci if measured else None
    tpj = repeat_tpjs(cfg.repeats_detail) if measured else None
    tpj_ci = t_interval(tpj) if tpj else None
    inter, inter_low, inter_high = _interactivity(c) if measured else (None, None, None)

    def kept(value: float | None) -> float | None:
        return _finite(value) if measured else None

    return ArchiveRow(
        note=report.id,
        title=report.title,
        published=report.published.isoformat(),
        status=report.status,
        demo=report.demo,
        simulated=report.simulated or cfg.simulated,
        updated=bool(report.updates),
        fingerprint=fingerprint(report.spec) if report.spec is not None else None,
        model=report.model.name,
        hardware=f"{cards}× {report.hardware.accelerator}",
        cards=cards,
        engine=report.software.engine,
        engine_version=report.software.engine_version,
        config=cfg.label,
        role=cfg.effective_role,
        precision=_precision(report, c),
        mode=cfg.mode,
        result_status=cfg.result_status,
        gate=_gate(c),
        slo_ttft_p99_ms=report.slo.ttft_p99_ms,
        slo_tpot_p99_ms=report.slo.tpot_p99_ms,
        rate_rps=cfg.repeats_detail[0].rate_rps if measured and cfg.repeats_detail else None,
        repeats=cfg.repeats,
        slo_pass_count=cfg.slo_pass_count,
        goodput_tok_s=kept(cfg.goodput_tok_s),
        goodput_low=ci.low if ci is not None else None,
        goodput_high=ci.high if ci is not None else None,
        goodput_per_card=kept(cfg.goodput_tok_s / cards),
        goodput_per_card_low=ci.low / cards if ci is not None else None,
        goodput_per_card_high=ci.high / cards if ci is not None else None,
        ttft_p99_ms=kept(cfg.ttft_p99_ms),
        ttft_p99_low=kept(_bound(cfg.ttft_p99_ci_ms.low_ms)) if cfg.ttft_p99_ci_ms else None,
        ttft_p99_high=kept(_bound(cfg.ttft_p99_ci_ms.high_ms)) if cfg.ttft_p99_ci_ms else None,
        tpot_p99_ms=kept(cfg.tpot_p99_ms),
        tpot_p99_low=kept(_bound(cfg.tpot_p99_ci_ms.low_ms)) if cfg.tpot_p99_ci_ms else None,
        tpot_p99_high=kept(_bound(cfg.tpot_p99_ci_ms.high_ms)) if cfg.tpot_p99_ci_ms else None,
        interactivity_tok_s_user=inter,
        interactivity_low=inter_low,
        interactivity_high=inter_high,
        tokens_per_joule=kept(c.tokens_per_joule),
        tokens_per_joule_low=tpj_ci.low if tpj_ci is not None else None,
        tokens_per_joule_high=tpj_ci.high if tpj_ci is not None else None,
        usd_per_million_tokens=kept(c.usd_per_million_tokens),
        mbu_pct=kept(cfg.mbu_pct),
        accuracy_score=cfg.accuracy.score if cfg.accuracy is not None else None,
        accuracy_delta_pts=cfg.accuracy.delta_pts if cfg.accuracy is not None else None,
    )


def report_rows(report: ReportV3, analysis: ReportAnalysis | None = None) -> list[ArchiveRow]:
    """One row per configuration of ``report`` (a migrated record), in record order;
    frontier flags unset (they depend on the whole archive: :func:`mark_frontiers`).
    ``analysis``: the report's :func:`analyse_report`, when the caller has it."""
    analysis = analysis or analyse_report(report)
    return [_row(report, c) for c in analysis.configs]


_AXES: dict[View, tuple[str, int]] = {
    # (field, +1 more is better / -1 less is better) against interactivity (more is better)
    "goodput": ("goodput_per_card", 1),
    "tokens_per_joule": ("tokens_per_joule", 1),
    "cost": ("usd_per_million_tokens", -1),
}


def frontier(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Which of ``points`` (x, y), both more-is-better, no other point dominates: one at
    least as large on both and larger on one. Ties (equal points) are all kept.

    One pass over the points sorted by x, largest first (O(n log n)): a point survives
    when it has the largest y among the points of its x, and that y beats every y of a
    larger x."""
    order = sorted(range(len(points)), key=lambda i: -points[i][0])
    out = [False] * len(points)
    best = -math.inf  # the largest y among points of a strictly larger x
    start = 0
    while start < len(order):
        x = points[order[start]][0]
        end = start
        while end < len(order) and points[order[end]][0] == x:
            end += 1
        group = order[start:end]
        top = max(points[i][1] for i in group)
        if top > best:
            for i in group:
                out[i] = points[i][1] == top
        best = max(best, top)
        start = end
    return out


def mark_frontiers(rows: Iterable[ArchiveRow]) -> list[ArchiveRow]:
    """The rows with their ``frontier_*`` flags set, per model and hardware and per view
    (goodput per card, tokens per joule, cost per million tokens, each against
    interactivity); only eligible rows with both figures can be on a frontier."""
    out = list(rows)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(out):
        groups.setdefault((row.model, row.hardware), []).append(i)
    on: dict[View, set[int]] = {view: set() for view in _AXES}
    for view, (name, sign) in _AXES.items():
        for members in groups.values():
            cand: list[tuple[int, float, float]] = []
            for i in members:
                x, y = out[i].interactivity_tok_s_user, getattr(out[i], name)
                if out[i].eligible and x is not None and y is not None:
                    cand.append((i, x, sign * y))
            flags = frontier([(x, y) for _, x, y in cand])
            on[view] |= {i for (i, _, _), kept in zip(cand, flags, strict=True) if kept}
    return [
        replace(
            row,
            frontier_goodput=i in on["goodput"],
            frontier_tokens_per_joule=i in on["tokens_per_joule"],
            frontier_cost=i in on["cost"],
        )
        for i, row in enumerate(out)
    ]


def frontier_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`mark_frontiers` over rows kept as dicts (:meth:`ArchiveRow.as_dict`, as the
    site's page cache keeps them)."""
    return [r.as_dict() for r in mark_frontiers(ArchiveRow(**row) for row in rows)]


def archive_rows(reports: Iterable[ReportV3]) -> list[ArchiveRow]:
    """Every configuration of every report, frontier flags set, ordered by note id then
    record order."""
    ordered = sorted(reports, key=lambda r: r.id)
    return mark_frontiers(row for r in ordered for row in report_rows(r))

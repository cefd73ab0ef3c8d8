"""Report records → report pages: recomputed tables, conclusion, chart specs, setup.

Rendered through ``site_templates/report.md.j2`` with the escaping environment of
:mod:`tokenwatt.site.pages.templates`.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup

from tokenwatt.analysis import (
    ConfigAnalysis,
    NoCredit,
    ReportAnalysis,
    analyse_report,
    change_pct,
    conclusion,
    gate_comparison,
    gate_delta_text,
    report_rows,
    straddles_threshold,
)
from tokenwatt.errors import Problem
from tokenwatt.records import ReplicationV1, ReportV3
from tokenwatt.site.format.escape import code_block, md_text, trusted
from tokenwatt.site.format.fmt import DASH, num, pct, signed_pct, signed_pts
from tokenwatt.site.format.intervals import (
    band_warning,
    goodput_cell,
    goodput_delta_cell,
    p99_cell,
    tokens_per_joule_cell,
)
from tokenwatt.site.format.windows import repeat_rows
from tokenwatt.site.pages.chart_specs import chart_specs
from tokenwatt.site.pages.compare import compare_rows, hardware_text, has_accuracy, has_power
from tokenwatt.site.pages.cost import cloud_brief, cloud_rows, cloud_totals
from tokenwatt.site.pages.replications import (
    TREND_MARKER,
    latest_verdict,
    replication_sections,
    trend_rows,
)
from tokenwatt.site.pages.reproduce import reproduce_section
from tokenwatt.site.pages.search import result_stories, search_sections
from tokenwatt.site.pages.setup import setup_sections, throttle_rows
from tokenwatt.site.pages.templates import RenderedReport, environment, templates_dir


def refuse_simulated(report: ReportV3, file: str) -> list[Problem]:
    """Simulated measurements are published only in a report marked ``demo: true``."""
    if report.demo:
        return []
    problems = [
        Problem(
            file,
            f"configs[{i}].simulated",
            "simulated measurements are never published as lab notes; "
            "set demo: true on the report to build it as a labelled demo",
        )
        for i, c in enumerate(report.configs)
        if c.simulated
    ]
    if report.simulated and not problems:
        problems.append(
            Problem(file, "simulated", "a simulated report needs demo: true to be built")
        )
    return problems


def _names(analysis: ReportAnalysis) -> list[str]:
    labels = [c.config.label for c in analysis.configs]
    return [
        label if labels.count(label) == 1 else f"{label} ({c.config.key})"
        for label, c in zip(labels, analysis.configs, strict=True)
    ]


def _gate_cell(c: ConfigAnalysis) -> Markup:
    if c.is_baseline:
        return trusted("baseline")
    if c.gate is None:
        return trusted("no accuracy result")
    mark = "✓ pass" if c.gate.passed else "✗ fail"
    return trusted(f"{mark} ({gate_comparison(c.gate)})")


def _headline(report: ReportV3, analysis: ReportAnalysis, names: list[str]) -> list[dict[str, Any]]:
    rows = []
    for name, c in zip(names, analysis.configs, strict=True):
        cfg = c.config
        acc = cfg.accuracy
        rows.append(
            {
                "name": name,
                "engine": cfg.engine,
                "goodput": goodput_cell(c),
                "goodput_delta": goodput_delta_cell(c),
                "tpj": tokens_per_joule_cell(c),
                "tpj_idle": num(c.tokens_per_joule_above_idle, 2),
                "usd_mtok": num(c.usd_per_million_tokens, 2),
                "kwh_mtok": num(c.kwh_per_million_tokens, 3),
                "mbu": pct(cfg.mbu_pct),
                "power": num(c.mean_power_w, 0),
                "ttft": (
                    p99_cell(cfg.ttft_p99_ms, report.slo.ttft_p99_ms, cfg.ttft_p99_ci_ms)
                    if c.measured
                    else DASH
                ),
                "tpot": (
                    p99_cell(cfg.tpot_p99_ms, report.slo.tpot_p99_ms, cfg.tpot_p99_ci_ms)
                    if c.measured
                    else DASH
                ),
                "slo_passes": trusted(f"{cfg.slo_pass_count} / {cfg.repeats}"),
                "accuracy": DASH if acc is None else pct(acc.score),
                "accuracy_delta": (
                    DASH if c.gate is None else trusted(f"{gate_delta_text(c.gate)} pts")
                ),
                "gate": _gate_cell(c),
            }
        )
    return rows


def outcome_brief(analysis: ReportAnalysis, limit: int = 3) -> str:
    """The note's outcome in a few words for the index, one clause per tuned configuration.

    E.g. ``vllm-fp8kv: +10.6% goodput, failed gate → no saving``. Every figure comes from
    :func:`~tokenwatt.analysis.analyse_report` (goodput delta, gate verdict, capacity), never
    from derived numbers stored in the record. At most ``limit`` clauses, then "+N more".
    """
    tuned = analysis.tuned
    if not tuned:
        base = analysis.baseline
        return "baseline only" if base.measured else f"baseline only, {_brief_status(base)}"
    clauses = [_outcome_clause(c, analysis.baseline) for c in tuned[:limit]]
    if len(tuned) > limit:
        clauses.append(f"+{len(tuned) - limit} more")
    return "; ".join(clauses)


def _outcome_clause(c: ConfigAnalysis, base: ConfigAnalysis) -> str:
    cap = c.capacity
    if c.config.result_status == "inconclusive":
        return f"{c.config.label}: inconclusive, not measured → no saving claimed"
    if c.config.result_status == "none_met":
        return f"{c.config.label}: no load met the SLO → no saving"
    if cap is None and base.config.result_status != "measured":
        return f"{c.config.label}: baseline {_brief_status(base)}, not compared"
    if cap is None:
        return f"{c.config.label}: no baseline goodput to compare"
    parts = [f"{change_pct(cap.gain_pct)} goodput"]
    if c.gate is None:
        parts.append("no accuracy gate")
    else:
        parts.append("passed gate" if c.gate.passed else "failed gate")
    if cap.credited:
        result = f"saves {cap.saved} of {cap.cards} cards"
    elif NoCredit.GATE_FAILED in cap.reasons or NoCredit.NO_ACCURACY in cap.reasons:
        result = "no saving"
    elif NoCredit.SLO_MISSED in cap.reasons:
        result = "missed SLO, no saving"
    elif NoCredit.INSIDE_VARIANCE in cap.reasons:
        result = "within noise, no saving"
    else:
        result = "no saving"
    return f"{c.config.label}: {', '.join(parts)} → {result}"


def _brief_status(c: ConfigAnalysis) -> str:
    """A result that is not measured in two words: inconclusive, or none met the SLO."""
    return "inconclusive" if c.config.result_status == "inconclusive" else "met no SLO load"


def status_notes(analysis: ReportAnalysis, names: list[str]) -> list[dict[str, str]]:
    """One admonition per configuration whose result is not measured: its name, the
    admonition's kind (``warning`` for inconclusive, ``note`` for none met) and the words
    (:attr:`~tokenwatt.analysis.ConfigAnalysis.status_text`)."""
    return [
        {
            "name": name,
            "kind": "warning" if c.config.result_status == "inconclusive" else "note",
            "title": "Inconclusive" if c.config.result_status == "inconclusive" else "No load met",
            "text": c.status_text or "",
        }
        for name, c in zip(names, analysis.configs, strict=True)
        if not c.measured
    ]


_WORDS = re.compile(r"[^\W_]+")


def _words(item: str) -> tuple[str, ...]:
    # An item of symbols only is compared whole.
    text = " ".join(item.split()).casefold()
    return tuple(_WORDS.findall(text)) or ((text,) if text else ())


def unique_items(items: list[str]) -> list[str]:
    """Record list items, each said once: exact repeats (up to case, spacing and
    punctuation) are dropped, and so is an item whose words begin another item's
    ("Simulated engine; no real hardware" beside "Simulated engine: no real hardware or
    engine was measured"), the longer one taking the first one's place. Order is kept."""
    keys = [_words(item) for item in items]
    out: list[str] = []
    placed: list[tuple[str, ...]] = []
    for key in keys:
        longer = max((k for k in keys if k[: len(key)] == key), key=len)
        if not key or longer in placed:
            continue
        placed.append(longer)
        out.append(items[keys.index(longer)])
    return out


_TOPIC = re.compile(r"^([^:(;]{3,60}?)\s*(?::\s*(.+)|\((.+)\))$")
"""An item "Topic: detail" or "Topic (detail)"."""


def merge_topics(items: list[str]) -> list[str]:
    """Items that name the same topic said once: "Whole-node power (cloud VM: no BMC
    access)" and "Whole-node power: energy figures are GPU board power only (...)" become
    "Whole-node power (cloud VM: no BMC access): energy figures are GPU board power only
    (...)", in the first one's place. The topic is the words before the first colon or
    parenthesis, compared up to case; other items are kept as they are, in order."""
    parsed = [_TOPIC.match(item) for item in items]
    groups: dict[str, list[int]] = {}
    for i, m in enumerate(parsed):
        if m is not None:
            groups.setdefault(m.group(1).strip().casefold(), []).append(i)
    out: list[str] = []
    for i, item in enumerate(items):
        m = parsed[i]
        group = groups.get(m.group(1).strip().casefold(), []) if m is not None else []
        if m is None or len(group) < 2:
            out.append(item)
            continue
        if group[0] != i:
            continue
        found = [parsed[j] for j in group]
        colon = [f.group(2) for f in found if f is not None and f.group(2)]
        paren = [f.group(3) for f in found if f is not None and f.group(3)]
        text = m.group(1).strip() + "".join(f" ({p})" for p in paren)
        out.append(text + (": " + "; ".join(colon) if colon else ""))
    return out


DEFAULT_CARDS = 64
"""``tokenwatt report``'s ``--cards`` default (``fleet.cards`` when the option is not given)."""

_SPEC_ARG = re.compile(r"--spec(?:=|\s+)(['\"]?)([^\s'\"]+)\1")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def spec_locations(reproduce: str, spec_names: frozenset[str]) -> list[Markup]:
    """Repository paths (``specs/<name>``) of the spec files the reproduce text names.

    A ``--spec`` argument counts when a file of its base name is in ``spec_names`` (the
    names in the repository's ``specs/`` folder) and the name is plain (letters, digits,
    ``._-``), so it can be shown as inline code. In first-mention order, each once.
    """
    out: list[Markup] = []
    for match in _SPEC_ARG.finditer(reproduce):
        name = match.group(2).replace("\\", "/").rsplit("/", 1)[-1]
        path = trusted(f"`specs/{name}`")
        if name in spec_names and _SAFE_NAME.match(name) and path not in out:
            out.append(path)
    return out


def _kv_note(label: str, kv: str) -> Markup:
    """Why a ``--kv-dtype`` is on a line the record has without it (``kv``: letters, digits
    and underscores, as :mod:`tokenwatt.site.pages.reproduce` reads it)."""
    return (
        trusted(f"The `--kv-dtype {kv}` on the ")
        + md_text(label)
        + trusted(
            f" line is added here: the command the record keeps lacks it, though that "
            f"configuration's KV cache was {kv.upper()}."
        )
    )


def _runs_note(paths: list[str]) -> Markup | None:
    """Which run files the commands name are not shipped (plain ``runs/...json`` paths)."""
    if not paths:
        return None
    names = ", ".join(f"`{p}`" for p in paths)
    return trusted(
        f"The run records these commands write and read ({names}) are not shipped in this "
        "repository: the report record below is what was kept of them, with every number "
        "on this page."
    )


def _spec_note(paths: list[Markup]) -> Markup | None:
    if not paths:
        return None
    if len(paths) == 1:
        return trusted(f"The spec file named above is in this repository at {paths[0]}.")
    return trusted(f"The spec files named above are in this repository at {', '.join(paths)}.")


def _accuracy_stats(
    analysis: ReportAnalysis, names: list[str], threshold: float
) -> list[dict[str, Any]]:
    """Per-configuration suite size, seeds, spread, paired CI and McNemar p, when recorded,
    with the rule's verdict (which decides capacity credit) and a "needs the full suite"
    note when the interval straddles the threshold."""
    rows = []
    for name, c in zip(names, analysis.configs, strict=True):
        acc = c.config.accuracy
        if acc is None:
            continue
        has_ci = acc.ci_low_pts is not None and acc.ci_high_pts is not None
        if acc.items is None and acc.seeds is None and not has_ci and acc.mcnemar_p is None:
            continue
        rows.append(
            {
                "name": name,
                "n_items": num(acc.items, 0),
                "seeds": num(acc.seeds, 0),
                "spread": trusted(f"{num(acc.spread_pts)} pts"),
                "ci": (
                    trusted(f"{signed_pts(acc.ci_low_pts)} to {signed_pts(acc.ci_high_pts)}")
                    if has_ci
                    else DASH
                ),
                "p": DASH if acc.mcnemar_p is None else trusted(f"{acc.mcnemar_p:.3g}"),
                "verdict": _gate_text(c),
                "note": (
                    "needs the full suite: the interval holds both a pass and a fail"
                    if has_ci
                    and not c.is_baseline
                    and straddles_threshold(
                        acc.ci_low_pts or 0.0, acc.ci_high_pts or 0.0, threshold
                    )
                    else ""
                ),
            }
        )
    return rows


def _gate_text(c: ConfigAnalysis) -> str:
    if c.is_baseline:
        return "baseline"
    if c.gate is None:
        return "no gate"
    return "pass" if c.gate.passed else "fail"


def _capacity_rows(analysis: ReportAnalysis, names: list[str]) -> list[dict[str, Any]]:
    rows = []
    for name, c in zip(names, analysis.configs, strict=True):
        cap = c.capacity
        if cap is None:
            continue
        reasons = "; ".join(str(r.value) for r in cap.reasons)
        credit = trusted("yes") if cap.credited else trusted("no: ") + md_text(reasons)
        rows.append(
            {
                "name": name,
                "gain": signed_pct(cap.gain_pct),
                "needed": num(cap.cards_needed, 0),
                "saved": num(cap.saved, 0),
                "credit": credit,
            }
        )
    return rows


def _has_intervals(report: ReportV3, analysis: ReportAnalysis) -> bool:
    """Whether the page shows any confidence interval (then it links the methods)."""
    return any(
        c.goodput_ci is not None
        or c.config.ttft_p99_ci_ms is not None
        or c.config.tpot_p99_ci_ms is not None
        for c in analysis.configs
    ) or any(w.ttft_p99_ci_ms is not None for cfg in report.configs for w in cfg.search)


def render_report(
    report: ReportV3,
    file: str,
    spec_names: frozenset[str] = frozenset(),
    run_files: frozenset[str] = frozenset(),
    replications: list[ReplicationV1] | None = None,
) -> RenderedReport:
    """Render one report's page (Markdown) and collect its disagreement warnings.

    ``spec_names``: file names in the repository's ``specs/`` folder; the page says where
    a spec named in the reproduce text is (see :func:`spec_locations`). ``run_files``: the
    repository's run records as ``runs/...`` paths; the page says which run files its
    commands name are not shipped (:func:`~tokenwatt.site.pages.reproduce.reproduce_section`).
    ``replications``: the replication records of this report (its Replications section,
    the trend chart and the index's mark, :mod:`tokenwatt.site.pages.replications`).
    """
    reps = replications or []
    rep = reproduce_section(report, run_files, spec_names)
    analysis = analyse_report(report)
    names = _names(analysis)
    warnings = [
        f"{file}: {d} (the page shows the recomputed value)" for d in analysis.disagreements
    ]
    band = band_warning(analysis)
    if band is not None:
        warnings.append(f"{file}: {band}")
    env = environment(templates_dir())
    power, accuracy = has_power(report), has_accuracy(report)
    context = {
        "has_power": power,
        "has_accuracy": accuracy,
        "compare": compare_rows(report),
        "no_search": not any(c.search for c in report.configs),
        "r": report,
        "id": report.id,
        "names": names,
        "headline": _headline(report, analysis, names),
        "idle_power": any(c.tokens_per_joule_above_idle is not None for c in analysis.configs),
        "has_cost": any(c.cost is not None for c in report.configs),
        "cloud_rows": cloud_rows(report, names),
        "cloud_totals": cloud_totals(report),
        "capacity": _capacity_rows(analysis, names),
        "status_notes": status_notes(analysis, names),
        "accuracy_stats": _accuracy_stats(analysis, names, report.accuracy.threshold_pts),
        "conclusion": conclusion(analysis, report.fleet.cards),
        "charts": chart_specs(report, analysis, names),
        "trend_marker": TREND_MARKER,
        "replications": replication_sections(report, reps),
        "disagreements": [str(d) for d in analysis.disagreements],
        "setup": setup_sections(report, analysis, power=power, accuracy=accuracy),
        "band_warning": band,
        "intervals": _has_intervals(report, analysis),
        "throttle": throttle_rows(report, names),
        "stories": result_stories(report, names),
        "searches": search_sections(report, names),
        "repeats": repeat_rows(report, names),
        "reproduce": code_block(rep.text, "sh"),
        "kv_notes": [_kv_note(label, kv) for label, kv in rep.kv_added],
        "runs_note": _runs_note(rep.missing_runs),
        "spec_note": _spec_note(spec_locations(rep.text, spec_names)),
        "engine_flags": any(
            c.settings.get("engine_flags") or c.settings.get("engine_flags_reported")
            for c in report.configs
        ),
        "not_covered": merge_topics(unique_items(report.not_covered)),
        "slo_ttft": num(report.slo.ttft_p99_ms, 0),
        "slo_tpot": num(report.slo.tpot_p99_ms, 0),
        "threshold": num(report.accuracy.threshold_pts),
        "cards": num(report.fleet.cards, 0),
        "cards_default": report.fleet.cards == DEFAULT_CARDS,
    }
    page = env.get_template("report.md.j2").render(context)
    return RenderedReport(
        id=report.id,
        title=report.title,
        published=report.published.isoformat(),
        status=report.status,
        demo=report.demo,
        hardware=hardware_text(report.hardware),
        model=report.model.name,
        outcome=outcome_brief(analysis),
        cloud=cloud_brief(report),
        updated=bool(report.updates),
        page=page,
        warnings=warnings,
        rows=[row.as_dict() for row in report_rows(report, analysis)],
        replication=latest_verdict(report, reps),
        trend=trend_rows(report, reps),
    )

"""Summarise run records into a report record (``tokenwatt report``), as a pure function.

The caller reads the run files and hashes them; this module only turns
:class:`~tokenwatt.records.RunRecord` objects into a validated
:class:`~tokenwatt.records.ReportV3`, or refuses with one
:class:`~tokenwatt.errors.Problem` per reason (runs that cannot be compared, two baselines,
smoke-mode numbers, …). Nothing here reads a clock or a file: the same runs give the same
report, byte for byte.

Which numbers come from where (methods/goodput.md):

- goodput (tok/s) is the SLO search's result (``run.result.goodput_tok_s``);
- ``search`` keeps every window of the SLO search in order (probes, then every repeat,
  including repeats that missed, the back-offs after them and windows measured again
  because the client lagged), from :func:`~tokenwatt.analysis.window.search_windows.search_windows`;
- the configuration's repeats are those measured at the final rate (after any back-off);
  their p99 TTFT/TPOT (ms) is the worst finite one (a window whose p99 is infinite, because
  failures reached the 99th percentile, is an SLO miss and shows as null in
  ``repeats_detail``), and SLO passes / repeats are counted there;
- mean board power (kW) is the mean of those repeats' valid power windows, summed over GPUs
  (for reading); tokens per joule is derived by the build from each repeat's goodput, length
  and energy in ``repeats_detail`` (goodput tokens ÷ energy, methods/energy.md);
- throttle counts are summed over those repeats' samples;
- the variance band (±%) is the widest of the configurations' repeat goodput bands;
- ``published`` is the day the last run finished, so the same runs give the same record.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Sequence

from pydantic import ValidationError

from tokenwatt.analysis.accuracy.paired import accuracy_summary
from tokenwatt.analysis.report.config_settings import config_settings, stated_value
from tokenwatt.analysis.report.latency_cdf import operating_point_distribution
from tokenwatt.analysis.report.report_setup import (
    final_repeats,
    hardware_of,
    model_of,
    not_covered_of,
    power_of,
    summary_text,
    valid_power,
    workload_of,
)
from tokenwatt.analysis.report.run_problems import run_problems
from tokenwatt.analysis.stats.repeat_stats import (
    delta_interval_pct,
    goodput_interval,
    mean_ci,
    measured_band_pct,
    repeat_goodputs,
    repeat_tpjs,
)
from tokenwatt.analysis.stats.variance import variance_band_pct
from tokenwatt.analysis.window.search_windows import search_windows
from tokenwatt.errors import Problem, RecordError
from tokenwatt.records import (
    AccuracySuiteV1,
    ConfigAccuracyV2,
    ConfigV3,
    FleetV1,
    LatencyMs,
    MbuBreakdownV2,
    PowerSampleV2,
    PowerWindow,
    QuantileCI,
    Repeat,
    RepeatV2,
    ReportV3,
    RunFileV2,
    RunInput,
    RunRecord,
    SloV1,
    SoftwareV1,
    fingerprint_diff,
    fingerprint_fields,
    problems_from,
)
from tokenwatt.text import bidi_isolated

# At most this many points of power timeline per configuration (one repeat's window).
_TIMELINE_POINTS = 600
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def slug(text: str) -> str:
    """A report id from a title: lower-case ASCII letters and digits joined by ``-``.

    A title with no ASCII letter or digit (``"Тест"``, ``"推理"``) gets ``report-`` and the
    first 10 hex digits of the SHA-256 of its UTF-8 text: distinct titles get distinct ids,
    and the same title always the same one.
    """
    import hashlib

    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:120].rstrip("-")
    if out:
        return out
    return "report-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def report_command(
    run_names: Sequence[str],
    *,
    title: str,
    report_id: str | None = None,
    out: str | None = None,
    cards: int | None = None,
    demo: bool = False,
) -> str:
    """The ``tokenwatt report …`` command line that makes this report (shell-quoted)."""
    words = ["tokenwatt", "report", *run_names, "--title", title]
    if report_id is not None:
        words += ["--id", report_id]
    if out is not None:
        words += ["--out", out]
    if cards is not None:
        words += ["--cards", str(cards)]
    if demo:
        words.append("--demo")
    return shlex.join(words)


def summarise(
    runs: Sequence[RunInput],
    *,
    title: str,
    report_id: str | None = None,
    cards: int = 64,
    demo: bool = False,
    command: str = "",
) -> ReportV3:
    """Turn run records into a report record (newest schema).

    Args:
        runs: the runs, one per configuration; exactly one has role ``baseline``.
        title: the report's title.
        report_id: the report's id; default :func:`slug` of the title.
        cards: ``fleet.cards`` for the capacity math.
        demo: allow smoke-mode and simulated runs; the report is marked ``demo``.
        command: the ``tokenwatt report`` command line, appended to the reproduce block.

    Raises:
        RecordError: one problem per reason the runs cannot make a report: no run, bad id,
            no baseline or two, duplicate labels, spec fingerprints that differ (naming the
            fields), smoke-mode or simulated runs without ``demo``, runs without a search
            result or without repeats at the found rate.
    """
    problems = _check_runs(runs, title=title, report_id=report_id, demo=demo)
    if problems:
        raise RecordError(problems)
    ordered = sorted(runs, key=lambda r: r.run.role != "baseline")  # baseline first, stable
    base = ordered[0].run
    configs = _with_deltas([_checked_config(item, ordered) for item in ordered])
    measured = measured_band_pct(configs)
    bands = [_band(final_repeats(item.run)) for item in ordered]
    spec = base.spec
    last = max((r.run.finished or r.run.started) for r in ordered)
    reproduce = "\n".join(r.run.command for r in ordered if r.run.command.strip())
    if command:
        reproduce = f"{reproduce}\n\n{command}" if reproduce else command
    return ReportV3(
        schema_version=3,
        id=report_id or slug(title),
        status="draft",
        title=title,
        published=last.date(),
        summary=summary_text(ordered, configs),
        hardware=hardware_of(base),
        software=SoftwareV1(
            engine=base.environment.engine_name or spec.engine.name,
            engine_version=base.environment.engine_version or spec.engine.version,
            kernels=spec.engine.kernels,
        ),
        model=model_of(ordered),
        slo=SloV1(ttft_p99_ms=spec.slo.ttft_p99_ms, tpot_p99_ms=spec.slo.tpot_p99_ms),
        workload=workload_of(spec),
        power=power_of(ordered),
        accuracy=AccuracySuiteV1(
            suite=spec.accuracy.name, threshold_pts=spec.accuracy.max_drop_pts
        ),
        runs=max(c.repeats for c in configs),  # 0 when no configuration was measured
        variance_band_pct=max(bands),
        fleet=FleetV1(cards=cards),
        configs=configs,
        not_covered=not_covered_of(ordered),
        reproduce=reproduce,
        spec=spec,
        run_files=[RunFileV2(path=r.name, sha256=r.sha256) for r in ordered],
        simulated=any(r.run.simulated for r in ordered),
        demo=demo,
        variance_band_measured_pct=measured,
    )


def _with_deltas(configs: list[ConfigV3]) -> list[ConfigV3]:
    """Each tuned configuration with the 95% intervals of its goodput and tokens-per-joule
    differences from the baseline (the first), as % of the baseline's repeat mean."""
    base = configs[0]
    out = [base]
    for cfg in configs[1:]:
        goodput = delta_interval_pct(
            repeat_goodputs(cfg.repeats_detail), repeat_goodputs(base.repeats_detail)
        )
        tpj = delta_interval_pct(repeat_tpjs(cfg.repeats_detail), repeat_tpjs(base.repeats_detail))
        out.append(
            cfg.model_copy(
                update={
                    "goodput_delta_ci_pct": mean_ci(goodput),
                    "tokens_per_joule_delta_ci_pct": mean_ci(tpj),
                }
            )
        )
    return out


def _check_runs(
    runs: Sequence[RunInput], *, title: str, report_id: str | None, demo: bool
) -> list[Problem]:
    problems: list[Problem] = []
    if not runs:
        return [Problem("<runs>", "", "no run records given; name at least the baseline's")]
    if not title.strip():
        problems.append(Problem("--title", "", "the title must not be empty"))
    if report_id is not None and (not _ID_RE.match(report_id) or len(report_id) > 120):
        problems.append(
            Problem(
                "--id",
                "",
                f"{report_id!r} is not a valid id: use lower-case letters, digits, '.', '_' "
                "and '-', starting with a letter or digit",
            )
        )
    baselines = [r for r in runs if r.run.role == "baseline"]
    if not baselines:
        problems.append(
            Problem(
                runs[0].name,
                "role",
                "no run has role 'baseline'; a report compares tuned runs against one baseline",
            )
        )
    for extra in baselines[1:]:
        problems.append(
            Problem(extra.name, "role", f"a second baseline; {baselines[0].name} is the baseline")
        )
    labels: dict[str, str] = {}
    for item in runs:
        if item.run.label in labels:
            problems.append(
                Problem(
                    item.name,
                    "label",
                    f"label {item.run.label!r} is also {labels[item.run.label]}'s; "
                    "each configuration needs its own label",
                )
            )
        labels.setdefault(item.run.label, item.name)
    reference = baselines[0] if baselines else runs[0]
    for item in runs:
        if item is not reference:
            problems += _fingerprint_problems(reference, item)
        problems += run_problems(item, demo=demo)
    return problems


def _fingerprint_problems(reference: RunInput, item: RunInput) -> list[Problem]:
    differing = fingerprint_diff(reference.run.spec, item.run.spec)
    if not differing:
        return []
    ref_fields = fingerprint_fields(reference.run.spec)
    item_fields = fingerprint_fields(item.run.spec)
    shown = ", ".join(f"{k} ({item_fields.get(k)!r} vs {ref_fields.get(k)!r})" for k in differing)
    return [
        Problem(
            item.name,
            "spec",
            f"cannot be compared with {reference.name}: the spec fingerprints differ in "
            f"{shown}. Measure both configurations with the same spec (KV-cache dtype and "
            "engine flags may differ)",
        )
    ]


def _finite(value: LatencyMs) -> float | None:
    return value if isinstance(value, int | float) and math.isfinite(value) else None


def _worst(values: Iterable[LatencyMs]) -> float | None:
    """The largest finite value (ms), or None; ``"inf"`` windows are SLO misses anyway."""
    finite = [v for v in (_finite(x) for x in values) if v is not None]
    return max(finite) if finite else None


def _worst_ci(repeats: Sequence[Repeat], which: str) -> QuantileCI | None:
    """The p99 interval of the repeat whose finite p99 is the worst (the headline's)."""
    finite = [
        (value, r)
        for r in repeats
        if (value := _finite(getattr(r.window, f"{which}_ms").p99)) is not None
    ]
    if not finite:
        return None
    worst = max(finite, key=lambda pair: pair[0])[1]
    ci: QuantileCI | None = getattr(worst.window, f"{which}_p99_ci_ms")
    return ci


def _band(repeats: Sequence[Repeat]) -> float:
    goodputs = [r.window.goodput_tok_s for r in repeats]
    if not goodputs or sum(goodputs) == 0:
        return 0.0
    return variance_band_pct(goodputs)


def _engine_text(run: RunRecord) -> str:
    """The engine cell: name, version (as the engine reports them) and KV dtype, each
    value's directional controls isolated to itself (:func:`tokenwatt.text.bidi_isolated`):
    a right-to-left override in a reported version must not reverse what follows it."""
    name = bidi_isolated(run.environment.engine_name or run.spec.engine.name)
    reported = run.environment.engine_version or run.spec.engine.version
    version = bidi_isolated(reported) if reported else None
    if version and version.lower().startswith(name.lower()):
        engine = version  # "tokenwatt-sim 0.1.0", not "tokenwatt-sim tokenwatt-sim 0.1.0"
    else:
        engine = f"{name} {version}" if version else name
    kv = stated_value(run, "model.kv_dtype").upper()
    return f"{engine} · KV {kv}"


def _checked_config(item: RunInput, ordered: Sequence[RunInput]) -> ConfigV3:
    """:func:`_config`, with a value the report record refuses (an old run's label longer
    than a report keeps, say) named by the run file it came from and its field there.

    Raises:
        RecordError: one problem per refused value, naming the run file and field.
    """
    try:
        return _config(item, ordered)
    except ValidationError as exc:
        problems = [
            Problem(item.name, p.field, f"{p.message} (as a report configuration's {p.field})")
            for p in problems_from(item.name, exc)
        ]
        raise RecordError(problems) from None


def _config(item: RunInput, ordered: Sequence[RunInput]) -> ConfigV3:
    run = item.run
    assert run.result is not None  # checked by run_problems
    repeats = final_repeats(run)
    power = valid_power(repeats)
    mean_w = sum(p.mean_power_w or 0.0 for p in power) / len(power) if power else None
    throttle: dict[str, int] = {}
    for window in (r.power for r in repeats if r.power is not None):
        for reason, count in window.throttle_counts.items():
            throttle[reason] = throttle.get(reason, 0) + count
    tuned = [r for r in ordered if r.run.role == "tuned"]
    if run.role == "baseline":
        key = "baseline"
    elif len(tuned) == 1:
        key = "tuned"
    else:
        key = slug(run.label)
        if key == "baseline" or sum(1 for r in tuned if slug(r.run.label) == key) > 1:
            key = f"{key}-{tuned.index(item) + 1}"
    status, status_reason = run.result.outcome()
    measured = status == "measured"
    mbu = run.mbu if measured else None
    details = [_repeat(r) for r in repeats]
    return ConfigV3(
        key=key,
        label=run.label,
        engine=_engine_text(run),
        mbu_pct=mbu.mbu_pct if mbu is not None and mbu.mbu_pct <= 100 else None,
        node_power_kw=mean_w / 1000.0 if mean_w and mean_w >= 0.5 else None,
        goodput_tok_s=run.result.goodput_tok_s if measured else 0.0,
        result_status=status,
        result_reason=status_reason,
        ttft_p99_ms=_worst(r.window.ttft_ms.p99 for r in repeats) or 0.0,
        tpot_p99_ms=_worst(r.window.tpot_ms.p99 for r in repeats) or 0.0,
        slo_pass_count=sum(1 for r in repeats if r.window.slo_pass),
        repeats=len(repeats),
        throttle_counts=dict(sorted(throttle.items())),
        accuracy=_accuracy(run, ordered[0].run, run.spec.accuracy.max_drop_pts),
        role=run.role,
        repeats_detail=details,
        search=search_windows(run),
        whole_search=True,
        search_warnings=list(run.result.warnings),
        repeats_planned=run.spec.measurement.repeats,
        complete=run.complete,
        incomplete_reason=run.incomplete_reason,
        idle_power_w=(
            run.idle_power.mean_power_w
            if run.idle_power is not None and run.idle_power.valid and run.idle_power.mean_power_w
            else None
        ),
        mode=run.mode,
        mode_overrides=run.mode_overrides,
        cost=run.cost,
        prompts_drawn=run.prompts.drawn if run.prompts else None,
        prompts_distinct=run.prompts.distinct_prompts if run.prompts else None,
        power_timeline=_timeline(power[0]) if power else [],
        mbu_breakdown=(
            MbuBreakdownV2(
                weights_gbs=mbu.weights_bytes_per_step * mbu.decode_steps_per_s / 1e9,
                kv_gbs=mbu.kv_bytes_per_step * mbu.decode_steps_per_s / 1e9,
            )
            if mbu is not None
            else None
        ),
        simulated=run.simulated,
        ttft_p99_ci_ms=_worst_ci(repeats, "ttft"),
        tpot_p99_ci_ms=_worst_ci(repeats, "tpot"),
        goodput_ci_tok_s=mean_ci(goodput_interval(details)),
        settings=config_settings(run),
        latency_at_operating_point=operating_point_distribution(run, item.request_rows),
    )


def _repeat(r: Repeat) -> RepeatV2:
    power = r.power if r.power is not None and r.power.valid else None
    seen = r.power  # throttle counts and clocks are read even when the energy is invalid
    return RepeatV2(
        rate_rps=r.window.rate_rps,
        goodput_tok_s=r.window.goodput_tok_s,
        ttft_p99_ms=_finite(r.window.ttft_ms.p99),
        tpot_p99_ms=_finite(r.window.tpot_ms.p99),
        slo_pass=r.window.slo_pass,
        window_s=r.window.duration_s,
        mean_power_w=(power.mean_power_w or None) if power else None,
        energy_j=(power.energy_j or None) if power else None,
        power_refused=list(seen.invalid_reasons) if seen is not None and not seen.valid else [],
        slo_attainment_pct=r.window.slo_attainment_pct,
        power_samples=seen.samples if seen is not None else None,
        throttle_counts=dict(sorted(seen.throttle_counts.items())) if seen is not None else {},
        sm_clock_mhz=seen.sm_clock_mhz_mean if seen is not None else None,
        mem_clock_mhz=seen.mem_clock_mhz_mean if seen is not None else None,
    )


def _timeline(window: PowerWindow) -> list[PowerSampleV2]:
    step = max(1, math.ceil(len(window.timeline) / _TIMELINE_POINTS))
    out = []
    for i in range(0, len(window.timeline), step):
        t_s, watts = window.timeline[i]
        if t_s < 0 or watts < 0:
            continue  # a broken reading; the window's mean and energy do not use it either
        reasons = window.timeline_throttle[i] if i < len(window.timeline_throttle) else []
        out.append(PowerSampleV2(t_s=t_s, power_w=watts, throttle=list(reasons)))
    return out


def _accuracy(run: RunRecord, base: RunRecord, threshold_pts: float) -> ConfigAccuracyV2 | None:
    """Score, Δ (points, tuned − baseline), spread, and the paired statistics on the same
    items (bootstrap interval of Δ, McNemar exact p) from
    :func:`tokenwatt.analysis.accuracy.paired.accuracy_summary`; the baseline's own row has Δ 0 and
    no interval."""
    acc = run.accuracy
    if acc is None:
        return None
    if base.accuracy is None or run is base:
        return ConfigAccuracyV2(
            score=acc.score_pct,
            delta_pts=0.0,
            spread_pts=acc.spread_pts,
            items=len(acc.seeds[0].items) if acc.seeds else 0,
            seeds=len(acc.seeds),
        )
    return accuracy_summary(base.accuracy, acc, threshold_pts).record

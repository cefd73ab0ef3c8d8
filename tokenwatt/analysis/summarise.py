"""Summarise run records into a report record (``tokenwatt report``), as a pure function.

The caller reads the run files and hashes them; this module only turns
:class:`~tokenwatt.records.RunRecord` objects into a validated
:class:`~tokenwatt.records.ReportV2`, or refuses with one
:class:`~tokenwatt.errors.Problem` per reason (runs that cannot be compared, two baselines,
smoke-mode numbers, …). Nothing here reads a clock or a file: the same runs give the same
report, byte for byte.

Which numbers come from where (DESIGN.md, "Metric definitions"):

- goodput (tok/s) is the SLO search's result (``run.result.goodput_tok_s``);
- the configuration's repeats are those measured at the final rate (after any back-off);
  their p99 TTFT/TPOT (ms) is the worst finite one (a window whose p99 is infinite, because
  failures reached the 99th percentile, is an SLO miss and shows as null in
  ``repeats_detail``), and SLO passes / repeats are counted there;
- mean board power (kW) is the mean of those repeats' valid power windows, summed over GPUs;
  tokens per joule is derived from it by the build (goodput / power);
- throttle counts are summed over those repeats' samples;
- the variance band (±%) is the widest of the configurations' repeat goodput bands.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Sequence

from tokenwatt.analysis.variance import variance_band_pct
from tokenwatt.errors import Problem, RecordError
from tokenwatt.records.power import PowerWindow
from tokenwatt.records.report_v1 import (
    AccuracySuiteV1,
    FleetV1,
    HardwareV1,
    ModelV1,
    PowerV1,
    SloV1,
    SoftwareV1,
    WorkloadV1,
)
from tokenwatt.records.report_v2 import (
    ConfigAccuracyV2,
    ConfigV2,
    MbuBreakdownV2,
    PowerSampleV2,
    ProbeV2,
    RepeatV2,
    ReportV2,
    RunFileV2,
)
from tokenwatt.records.run import Repeat, RunRecord
from tokenwatt.records.runs_io import RunInput
from tokenwatt.records.spec import Spec, fingerprint_diff, fingerprint_fields
from tokenwatt.records.window import LatencyMs

# chat-mix-v1's lengths when a spec does not restate them (DESIGN.md, "Workloads").
_CHAT_MIX_V1 = ("median 1,024 · p90 4,096", "median 256 · p90 1,024")
# At most this many points of power timeline per configuration (one repeat's window).
_TIMELINE_POINTS = 600
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

NOT_COVERED_BOARD_POWER = (
    "Whole-node power: energy is the GPUs' board power only; CPUs, memory, NICs, fans and "
    "power-supply losses are not counted"
)
NOT_COVERED_SMOKE = (
    "Smoke mode: a pipeline check with very short windows; these numbers are not measurements"
)
NOT_COVERED_QUICK = "Quick mode: short windows and few repeats; a validation run, not a decision"
NOT_COVERED_SIMULATED = "Simulated engine: no real hardware or engine was measured"


def slug(text: str) -> str:
    """A report id from a title: lower-case ASCII letters and digits joined by ``-``."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return out[:120].rstrip("-") or "report"


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
) -> ReportV2:
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
    configs = [_config(item, ordered) for item in ordered]
    bands = [_band(_final_repeats(item.run)) for item in ordered]
    spec = base.spec
    last = max((r.run.finished or r.run.started) for r in ordered)
    reproduce = "\n".join(r.run.command for r in ordered if r.run.command.strip())
    if command:
        reproduce = f"{reproduce}\n\n{command}" if reproduce else command
    return ReportV2(
        schema_version=2,
        id=report_id or slug(title),
        status="draft",
        title=title,
        published=last.date(),
        summary=_summary(ordered, configs),
        hardware=_hardware(base),
        software=SoftwareV1(
            engine=base.environment.engine_name or spec.engine.name,
            engine_version=base.environment.engine_version or spec.engine.version,
            kernels=spec.engine.kernels,
        ),
        model=_model(ordered),
        slo=SloV1(ttft_p99_ms=spec.slo.ttft_p99_ms, tpot_p99_ms=spec.slo.tpot_p99_ms),
        workload=_workload(spec),
        power=_power(ordered),
        accuracy=AccuracySuiteV1(
            suite=spec.accuracy.name, threshold_pts=spec.accuracy.max_drop_pts
        ),
        runs=max(c.repeats for c in configs),
        variance_band_pct=round(max(bands), 2),
        fleet=FleetV1(cards=cards),
        configs=configs,
        not_covered=_not_covered(ordered),
        reproduce=reproduce,
        spec=spec,
        run_files=[RunFileV2(path=r.name, sha256=r.sha256) for r in ordered],
        simulated=any(r.run.simulated for r in ordered),
        demo=demo,
    )


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
        problems += _run_problems(item, demo=demo)
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


def _run_problems(item: RunInput, *, demo: bool) -> list[Problem]:
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
        problems.append(
            Problem(name, "result", "the run has no SLO search result (it stopped too early)")
        )
    repeats = _final_repeats(run)
    if not repeats:
        problems.append(
            Problem(name, "repeats", "the run has no measurement repeats at the found rate")
        )
    elif _worst(r.window.ttft_ms.p99 for r in repeats) is None:
        problems.append(
            Problem(
                name,
                "repeats[*].window.ttft_ms.p99",
                "no repeat has a finite p99 TTFT (every window failed); nothing to report",
            )
        )
    return problems


def _final_repeats(run: RunRecord) -> list[Repeat]:
    """The repeats at the final rate: those after the last back-off."""
    if not run.repeats:
        return []
    last = max(r.backoff for r in run.repeats)
    return [r for r in run.repeats if r.backoff == last]


def _finite(value: LatencyMs) -> float | None:
    return value if isinstance(value, int | float) and math.isfinite(value) else None


def _worst(values: Iterable[LatencyMs]) -> float | None:
    """The largest finite value (ms), or None; ``"inf"`` windows are SLO misses anyway."""
    finite = [v for v in (_finite(x) for x in values) if v is not None]
    return max(finite) if finite else None


def _valid_power(repeats: Sequence[Repeat]) -> list[PowerWindow]:
    return [
        r.power
        for r in repeats
        if r.power is not None and r.power.valid and r.power.mean_power_w is not None
    ]


def _band(repeats: Sequence[Repeat]) -> float:
    goodputs = [r.window.goodput_tok_s for r in repeats]
    if not goodputs or sum(goodputs) == 0:
        return 0.0
    return variance_band_pct(goodputs)


def _engine_text(run: RunRecord) -> str:
    name = run.environment.engine_name or run.spec.engine.name
    version = run.environment.engine_version or run.spec.engine.version
    engine = f"{name} {version}" if version else name
    return f"{engine} · KV {run.spec.model.kv_dtype.upper()}"


def _config(item: RunInput, ordered: Sequence[RunInput]) -> ConfigV2:
    run = item.run
    assert run.result is not None  # checked by _run_problems
    repeats = _final_repeats(run)
    power = _valid_power(repeats)
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
    mbu = run.mbu
    return ConfigV2(
        key=key,
        label=run.label,
        engine=_engine_text(run),
        mbu_pct=round(mbu.mbu_pct, 1) if mbu is not None and mbu.mbu_pct <= 100 else None,
        node_power_kw=round(mean_w / 1000.0, 3) if mean_w else None,
        goodput_tok_s=round(run.result.goodput_tok_s, 1),
        ttft_p99_ms=round(_worst(r.window.ttft_ms.p99 for r in repeats) or 0.0, 1),
        tpot_p99_ms=round(_worst(r.window.tpot_ms.p99 for r in repeats) or 0.0, 1),
        slo_pass_count=sum(1 for r in repeats if r.window.slo_pass),
        repeats=len(repeats),
        throttle_counts=dict(sorted(throttle.items())),
        accuracy=_accuracy(run, ordered[0].run),
        role=run.role,
        repeats_detail=[_repeat(r) for r in repeats],
        sweep=[
            ProbeV2(
                rate_rps=p.window.rate_rps,
                slo_pass=p.window.slo_pass,
                ttft_p99_ms=_finite(p.window.ttft_ms.p99),
                tpot_p99_ms=_finite(p.window.tpot_ms.p99),
                failure_reason=p.window.failure_reason,
                stopped_early=p.window.stopped_early,
            )
            for p in run.probes
        ],
        power_timeline=_timeline(power[0]) if power else [],
        mbu_breakdown=(
            MbuBreakdownV2(
                weights_gbs=round(mbu.weights_bytes_per_step * mbu.decode_steps_per_s / 1e9, 1),
                kv_gbs=round(mbu.kv_bytes_per_step * mbu.decode_steps_per_s / 1e9, 1),
            )
            if mbu is not None
            else None
        ),
        simulated=run.simulated,
    )


def _repeat(r: Repeat) -> RepeatV2:
    power = r.power if r.power is not None and r.power.valid else None
    return RepeatV2(
        rate_rps=r.window.rate_rps,
        goodput_tok_s=round(r.window.goodput_tok_s, 1),
        ttft_p99_ms=_finite(r.window.ttft_ms.p99),
        tpot_p99_ms=_finite(r.window.tpot_ms.p99),
        slo_pass=r.window.slo_pass,
        window_s=r.window.duration_s,
        mean_power_w=(power.mean_power_w or None) if power else None,
        energy_j=(power.energy_j or None) if power else None,
    )


def _timeline(window: PowerWindow) -> list[PowerSampleV2]:
    step = max(1, math.ceil(len(window.timeline) / _TIMELINE_POINTS))
    out = []
    for i in range(0, len(window.timeline), step):
        t_s, watts = window.timeline[i]
        reasons = window.timeline_throttle[i] if i < len(window.timeline_throttle) else []
        out.append(PowerSampleV2(t_s=t_s, power_w=watts, throttle=list(reasons)))
    return out


def _accuracy(run: RunRecord, base: RunRecord) -> ConfigAccuracyV2 | None:
    acc = run.accuracy
    if acc is None:
        return None
    base_score = base.accuracy.score_pct if base.accuracy is not None else acc.score_pct
    return ConfigAccuracyV2(
        score=round(acc.score_pct, 2),
        delta_pts=round(acc.score_pct - base_score, 2),
        spread_pts=round(acc.spread_pts, 2),
        items=len(acc.seeds[0].items),
        seeds=len(acc.seeds),
    )


def _hardware(run: RunRecord) -> HardwareV1:
    env, spec = run.environment, run.spec
    name = env.gpu_name or ("simulated accelerator" if run.simulated else spec.hardware.adapter)
    lowered = name.lower()
    if run.simulated or spec.hardware.adapter == "sim":
        vendor = "simulated"
    elif "nvidia" in lowered or spec.hardware.adapter == "nvidia":
        vendor = "NVIDIA"
    elif "amd" in lowered or "instinct" in lowered or spec.hardware.adapter == "amd":
        vendor = "AMD"
    else:
        vendor = "unknown"
    count = env.gpu_count or (len(spec.hardware.gpus) if spec.hardware.gpus else 0)
    count = count or spec.model.tensor_parallel * spec.model.replicas
    return HardwareV1(
        vendor=vendor,
        accelerator=name,
        count=count,
        rated_bw_tbs_per_gpu=env.rated_bw_tbs_per_gpu or spec.hardware.rated_bw_tbs_per_gpu,
        driver=env.driver,
        host=spec.hardware.host or env.hostname,
    )


def _model(ordered: Sequence[RunInput]) -> ModelV1:
    m = ordered[0].run.spec.model
    kv = {r.run.spec.model.kv_dtype for r in ordered}
    kv_text = "KV cache varies by configuration" if len(kv) > 1 else f"KV cache {m.kv_dtype}"
    experts = next(
        (m.geometry[k] for k in ("num_experts", "n_routed_experts") if k in m.geometry), 0
    )
    shape = "MoE" if isinstance(experts, int | float) and experts > 0 else "dense"
    weights = m.quantization or f"{m.weight_dtype} weights"
    return ModelV1(
        name=m.name,
        shape=shape if m.geometry else "",
        quantization=f"{weights}; {kv_text}",
        parallelism=f"{m.replicas} replica{'s' if m.replicas > 1 else ''} × TP{m.tensor_parallel}",
    )


def _lengths(dist: object, default: str) -> str:
    median = getattr(dist, "median", None)
    p90 = getattr(dist, "p90", None)
    if median is None or p90 is None:
        return default
    return f"median {median:,} · p90 {p90:,}"


def _workload(spec: Spec) -> WorkloadV1:
    w = spec.workload
    chat = w.trace == "chat-mix-v1"
    sweep = spec.sweep
    if sweep.rates:
        arrival = "Poisson, rates " + ", ".join(f"{r:g}" for r in sweep.rates) + " req/s"
    else:
        arrival = "Poisson, rate swept to the SLO boundary"
    return WorkloadV1(
        trace=w.trace,
        input_tokens=_lengths(w.input_tokens, _CHAT_MIX_V1[0] if chat else "from the trace"),
        output_tokens=_lengths(w.output_tokens, _CHAT_MIX_V1[1] if chat else "from the trace"),
        arrival=arrival,
    )


def _power(ordered: Sequence[RunInput]) -> PowerV1:
    spec = ordered[0].run.spec
    windows = [p for r in ordered for p in _valid_power(_final_repeats(r.run))]
    scopes = sorted({p.scope for p in windows})
    sources = sorted({p.source for p in windows})
    if windows:
        source = ", ".join(sources)
        kind = scopes[0] if len(scopes) == 1 else "board"
    else:
        source = "none: no valid power measurement"
        kind = "sim" if spec.power.source == "sim" else "board"
    return PowerV1(
        source=source,
        kind=kind,
        sampling_hz=spec.power.sampling_hz,
        window=f"{spec.measurement.window_s:g} s measurement windows",
    )


def _not_covered(ordered: Sequence[RunInput]) -> list[str]:
    items: list[str] = []
    for r in ordered:
        items += r.run.spec.not_covered
    for r in ordered:
        run, label = r.run, r.run.label
        items += run.not_covered
        repeats = _final_repeats(run)
        power = _valid_power(repeats)
        if not power:
            items.append(f"Power and tokens per joule for {label}: no valid power measurement")
        elif any(p.scope == "board" for p in power):
            items.append(NOT_COVERED_BOARD_POWER)
        if any(p.energy_method == "integrated" for p in power):
            items.append(
                f"Energy for {label} is integrated from power samples (no hardware energy "
                "counter), so it is less exact"
            )
        if run.accuracy is None:
            items.append(
                f"Accuracy gate for {label}: no accuracy result, so it earns no capacity credit"
            )
        if run.mode == "smoke":
            items.append(NOT_COVERED_SMOKE)
        elif run.mode == "quick":
            items.append(NOT_COVERED_QUICK)
        if run.simulated:
            items.append(NOT_COVERED_SIMULATED)
        if not run.complete:
            reason = run.incomplete_reason or "no reason recorded"
            items.append(f"{label}: the run stopped early ({reason}); figures are partial")
        bound = sum(1 for x in repeats if x.window.client_bound)
        if bound:
            items.append(
                f"{label}: {bound} measurement window(s) were client-bound "
                "(send-lag p99 above 10 ms)"
            )
        if any(x.window.usage_missing for x in repeats):
            items.append(
                f"{label}: the server sent no usage for some requests; their output tokens "
                "were counted by the client"
            )
    return _dedupe(items)


def _dedupe(items: Sequence[str]) -> list[str]:
    """Keep the first of items equal up to case and spacing, in order."""
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        text = " ".join(item.split())
        norm = text.casefold().rstrip(".")
        if text and norm not in seen:
            seen.add(norm)
            out.append(text)
    return out


def _summary(ordered: Sequence[RunInput], configs: Sequence[ConfigV2]) -> str:
    base_run = ordered[0].run
    spec = base_run.spec
    hardware = _hardware(base_run)
    mode = base_run.mode.capitalize()
    text = (
        f"{mode} mode on {hardware.count}× {hardware.accelerator}: "
        f"{spec.measurement.window_s:g} s windows, {configs[0].repeats} repeats at the found "
        f"rate, SLO p99 TTFT ≤ {spec.slo.ttft_p99_ms:g} ms and p99 TPOT ≤ "
        f"{spec.slo.tpot_p99_ms:g} ms."
    )
    base = configs[0]
    for cfg in configs[1:]:
        if base.goodput_tok_s > 0:
            change = 100.0 * (cfg.goodput_tok_s - base.goodput_tok_s) / base.goodput_tok_s
            text += f" {cfg.label}: SLO goodput {change:+.1f}% against {base.label}."
    return text

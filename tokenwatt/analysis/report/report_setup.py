"""The descriptive parts of a report made from runs: setup tables, not-covered, summary.

Pure helpers of :mod:`tokenwatt.analysis.report.summarise` (no I/O). The sentences are written for
readers of the lab note; every fact in them comes from the run records.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenwatt.analysis.accuracy.gate import gate_delta_text, gate_verdict
from tokenwatt.analysis.accuracy.paired import straddles_threshold
from tokenwatt.analysis.report.config_settings import stated_value
from tokenwatt.analysis.stats.number_text import change_pct, signed
from tokenwatt.records import (
    NOT_STATED,
    ConfigAccuracyV2,
    ConfigV3,
    HardwareV1,
    ModelV1,
    PowerV1,
    PowerWindow,
    Repeat,
    RunInput,
    RunRecord,
    Spec,
    WorkloadV1,
    retried,
    run_unstated,
)

# chat-mix-v1's lengths when a spec does not restate them (the guide, "What the numbers mean").
_CHAT_MIX_V1 = ("median 1,024 · p90 4,096", "median 256 · p90 1,024")

NOT_COVERED_BOARD_POWER = (
    "Whole-node power: energy is the GPUs' board power only; CPUs, memory, NICs, fans and "
    "power-supply losses are not counted"
)
NOT_COVERED_SMOKE = (
    "Smoke mode: a pipeline check with very short windows; these numbers are not measurements"
)
NOT_COVERED_QUICK = "Quick mode: short windows and few repeats; a validation run, not a decision"
NOT_COVERED_SIMULATED = "Simulated engine: no real hardware or engine was measured"


def final_repeats(run: RunRecord) -> list[Repeat]:
    """The repeats at the final rate: those after the last back-off; for a fixed-load run
    (``sweep.fixed``) the window at its result, the highest load that met the SLO.

    A window the collector measured again because the client lagged
    (:func:`tokenwatt.records.run.window.retried`) is left out: its verdict was replaced by the
    next window's, as the run's own ``result`` counts it. A run whose result is not measured
    (``none_met`` or ``inconclusive``: :meth:`~tokenwatt.records.SearchResult.outcome`) has
    no found load, so none: its windows stay in the search, never a figure.
    """
    if not run.repeats:
        return []
    if run.result is not None and run.result.outcome()[0] != "measured":
        return []
    if run.spec.sweep.fixed:
        return _fixed_operating_point(run)
    last = max(r.backoff for r in run.repeats)
    return [r for r in run.repeats if r.backoff == last and not retried(r.window)]


def no_result_reason(run: RunRecord) -> str:
    """Why a run has no ``result``, in words: an incomplete run (stopped by a signal, its
    engine dead) names why it stopped instead of blaming the SLO; windows that met the SLO
    before the stop are counted, so the words never say none did."""
    if run.complete:
        return "the run has no SLO search result (it stopped too early)"
    met = sum(1 for r in run.repeats if r.window.slo_pass and not retried(r.window))
    why = run.incomplete_reason or "no reason recorded"
    kept = f"; {met} of its windows met the SLO before it stopped" if met else ""
    return f"the run is incomplete ({why}), so it has no result to report{kept}"


def _fixed_operating_point(run: RunRecord) -> list[Repeat]:
    """A fixed-load run's (``sweep.fixed``) window at its result: the load with the highest
    goodput among those whose window met the SLO (clients for a closed loop, else the
    rate); none when no load met it. Its other windows are other loads, not repeats of this
    one."""
    result = run.result
    if result is None or result.slo_pass_count == 0:
        return []
    return [
        r
        for r in run.repeats
        if r.window.slo_pass
        and not retried(r.window)
        and (
            r.window.concurrency == result.concurrency
            if result.concurrency is not None
            else r.window.rate_rps == result.rate_rps
        )
    ]


def valid_power(repeats: Sequence[Repeat]) -> list[PowerWindow]:
    """The repeats' power windows that are valid and carry a mean power (W) above zero.

    A window of zero watts is a meter that read nothing, not a measurement: it is left out,
    so the report says "no valid power measurement" instead of silently dropping the value.
    """
    return [
        r.power
        for r in repeats
        if r.power is not None
        and r.power.valid
        and r.power.mean_power_w is not None
        and r.power.mean_power_w > 0
    ]


def hardware_of(run: RunRecord) -> HardwareV1:
    """The hardware table: accelerator, count, rated bandwidth (TB/s), driver, host."""
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


def _kv_words(kv: str) -> str:
    return "KV-cache dtype not stated" if kv == NOT_STATED else f"KV cache {kv}"


def model_of(ordered: Sequence[RunInput]) -> ModelV1:
    """The model table; the KV-cache dtype is per configuration and may vary."""
    first = ordered[0].run
    m = first.spec.model
    kv = {stated_value(r.run, "model.kv_dtype") for r in ordered}
    kv_text = "KV cache varies by configuration" if len(kv) > 1 else _kv_words(kv.pop())
    experts = next(
        (m.geometry[k] for k in ("num_experts", "n_routed_experts") if k in m.geometry), 0
    )
    shape = "MoE" if isinstance(experts, int | float) and experts > 0 else "dense"
    weight = stated_value(first, "model.weight_dtype")
    weights = m.quantization or (
        "weight dtype not stated" if weight == NOT_STATED else f"{weight} weights"
    )
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
    if median == p90:
        return f"{median:,} (fixed)"
    return f"median {median:,} · p90 {p90:,}"


def trace_text(spec: Spec) -> str:
    """What the requests were drawn from: the trace's name, or, for chat-mix-v1 with both
    lengths pinned, fixed-length synthetic ids with their lengths ("synthetic token ids,
    fixed lengths 16 in / 8 out": no trace's length mix is drawn from then, so the trace is
    not named), or for a replayed dataset its kind and the first 12 hex digits of its
    SHA-256 ("sharegpt dataset 3f2a…")."""
    w = spec.workload
    dataset = w.dataset
    if dataset is None:
        i, o = w.input_tokens, w.output_tokens
        pinned = i is not None and o is not None and i.median == i.p90 and o.median == o.p90
        if w.trace == "chat-mix-v1" and pinned and i is not None and o is not None:
            # What point-and-shoot flags make: the mix's id drawing, both lengths pinned.
            return f"synthetic token ids, fixed lengths {i.median:,} in / {o.median:,} out"
        return w.trace
    digest = f" {dataset.sha256[:12]}…" if dataset.sha256 else ""
    return f"{dataset.kind} dataset{digest}"


def arrival_text(spec: Spec) -> str:
    """How the load was offered, in words: the profile, and the listed loads (a fixed-load
    run or a list search) or the search's range."""
    sweep, profile = spec.sweep, spec.measurement.profile
    how = "measured at each of" if sweep.fixed else "searched over"
    if profile == "concurrency":
        loads = sweep.concurrencies
        head = "closed loop"
        if loads:
            return f"{head}, {how} " + ", ".join(str(c) for c in loads) + " clients"
        return f"{head}, clients swept to the SLO boundary"
    head = "constant rate" if profile == "constant" else "Poisson"
    if sweep.rates:
        return f"{head}, {how} " + ", ".join(f"{r:g}" for r in sweep.rates) + " req/s"
    return f"{head}, rate swept to the SLO boundary"


def workload_of(spec: Spec) -> WorkloadV1:
    """The workload table: trace, token lengths (median, p90) and arrivals."""
    w = spec.workload
    chat = w.trace == "chat-mix-v1" and w.dataset is None
    return WorkloadV1(
        trace=trace_text(spec),
        input_tokens=_lengths(w.input_tokens, _CHAT_MIX_V1[0] if chat else "from the trace"),
        output_tokens=_lengths(w.output_tokens, _CHAT_MIX_V1[1] if chat else "from the trace"),
        arrival=arrival_text(spec),
    )


def power_of(ordered: Sequence[RunInput]) -> PowerV1:
    """The power table: sources and scope of the repeats' valid power windows."""
    spec = ordered[0].run.spec
    windows = [p for r in ordered for p in valid_power(final_repeats(r.run))]
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


def not_covered_of(ordered: Sequence[RunInput]) -> list[str]:
    """The specs' not-covered lists, then what the runs lacked, without duplicates."""
    items: list[str] = []
    for r in ordered:
        items += r.run.spec.not_covered
    for r in ordered:
        run, label = r.run, r.run.label
        items += run.not_covered
        repeats = final_repeats(run)
        power = valid_power(repeats)
        if not power:
            items.append(f"Power and tokens per joule for {label}: no valid power measurement")
        elif any(p.scope == "board" for p in power):
            items.append(NOT_COVERED_BOARD_POWER)
        if any(p.energy_method == "integrated" for p in power):
            items.append(
                f"Energy for {label} is integrated from power samples (no hardware energy "
                "counter), so it is less exact"
            )
        assumed = _assumed_dtypes(run)
        if run.mbu is not None and assumed:
            items.append(
                f"MBU for {label} assumes {assumed}: nobody stated them (the spec's "
                "defaults), so its bytes per weight and per KV element may be wrong"
            )
        if run.mbu is not None and run.mbu.mbu_pct > 100:
            items.append(
                f"MBU for {label}: the computed {run.mbu.mbu_pct:.1f}% exceeds 100% (check the "
                "rated bandwidth), so it is not shown"
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
        sources = {x.window.token_count_source for x in repeats if x.window.usage_missing}
        if "chunks-estimate" in sources:
            items.append(
                f"{label}: the server sent no usage and the spec names no tokenizer: output "
                "tokens, goodput, TPOT and tokens per joule are estimates (one token per "
                "streamed chunk)"
            )
        elif sources:
            items.append(
                f"{label}: the server sent no usage for some requests; their output tokens "
                "were counted by the client with the model's tokenizer"
            )
    return _dedupe(items)


def _assumed_dtypes(run: RunRecord) -> str:
    """The dtypes MBU took from the spec's defaults, in words ("" when all were stated)."""
    unstated = run_unstated(run)
    m = run.spec.model
    parts = []
    if "model.weight_dtype" in unstated:
        parts.append(f"{m.weight_dtype} weights (model.weight_dtype)")
    if "model.kv_dtype" in unstated:
        parts.append(f"a {m.kv_dtype} KV cache (model.kv_dtype)")
    return " and ".join(parts)


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


def _gate_doubt(acc: ConfigAccuracyV2, threshold: float) -> str:
    """The caveat the page's accuracy statistics carry, for the summary sentence: "" unless
    the paired 95% interval of the difference holds both a pass and a fail."""
    low, high = acc.ci_low_pts, acc.ci_high_pts
    if low is None or high is None or not straddles_threshold(low, high, threshold):
        return ""
    on = f" on {acc.items:,} items" if acc.items else ""
    return (
        f" (not beyond doubt{on}: the difference's 95% interval, {signed(low, 1)} to "
        f"{signed(high, 1)} points, holds both a pass and a fail; the full suite decides)"
    )


def status_words(status: str, reason: str | None) -> str:
    """A result that is not measured, in words: ``inconclusive: REASON`` (not measured, no
    figure) or ``no load met the SLO: REASON`` (a measured finding)."""
    why = f" ({reason})" if reason else ""
    if status == "none_met":
        return f"no load met the SLO{why}"
    return f"inconclusive{why}: not measured, so no goodput figure"


def summary_text(ordered: Sequence[RunInput], configs: Sequence[ConfigV3]) -> str:
    """A factual summary: mode, hardware, windows, SLO and each goodput change, with the
    accuracy gate's verdict beside it (a configuration that fails the gate earns no capacity
    credit, methods/goodput.md — the summary says so rather than quote the gain alone)."""
    base_run = ordered[0].run
    spec = base_run.spec
    hardware = hardware_of(base_run)
    mode = base_run.mode.capitalize()
    repeats = configs[0].repeats
    on = (
        "hardware not stated"
        if hardware.accelerator.strip() in ("", "none")
        else f"{hardware.count}× {hardware.accelerator}"
    )
    text = (
        f"{mode} mode on {on}: "
        f"{spec.measurement.window_s:g} s windows, {repeats} repeat{'s' if repeats != 1 else ''}"
        f" at the found rate, SLO p99 TTFT ≤ {spec.slo.ttft_p99_ms:g} ms and p99 TPOT ≤ "
        f"{spec.slo.tpot_p99_ms:g} ms."
    )
    base = configs[0]
    threshold = spec.accuracy.max_drop_pts
    for cfg in configs:
        if cfg.result_status != "measured":
            text += f" {cfg.label}: {status_words(cfg.result_status, cfg.result_reason)}."
    for cfg in configs[1:]:
        if cfg.result_status != "measured" or base.result_status != "measured":
            continue
        if base.goodput_tok_s > 0:
            change = 100.0 * (cfg.goodput_tok_s - base.goodput_tok_s) / base.goodput_tok_s
            text += f" {cfg.label}: SLO goodput {change_pct(change)} against {base.label}"
            acc = cfg.accuracy
            if acc is not None and base.accuracy is not None:
                verdict = gate_verdict(acc.score, base.accuracy.score, threshold)
                shown = gate_delta_text(verdict)
                if verdict.passed:
                    text += f"; accuracy {shown} points, within the {threshold:g}-point gate"
                else:
                    text += (
                        f"; accuracy {shown} points, failing the {threshold:g}-point gate, "
                        "so no capacity credit"
                    )
                text += _gate_doubt(acc, threshold)
            text += "."
    return text

"""Realistic run records built in Python, for tests of ``tokenwatt report``.

Modelled on the seed's quick-mode runs (one H100, vLLM, 120 s windows, two repeats).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

from tokenwatt.records import RunRecord, Spec, fingerprint
from tokenwatt.records.run.accuracy import AccuracyResult, ItemResult, SeedResult
from tokenwatt.records.run.environment import Environment, ToolInfo
from tokenwatt.records.run.power import PowerWindow
from tokenwatt.records.run.run import MbuResult, Probe, Repeat, SearchResult
from tokenwatt.records.run.window import Percentiles, WindowSummary

SPEC_PATH = (
    Path(__file__).resolve().parents[1] / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"
)


def seed_spec(**section_edits: dict[str, Any]) -> Spec:
    """The seed's spec, with ``section={key: value}`` edits."""
    data = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
    for section, edits in section_edits.items():
        data[section].update(edits)
    return Spec.model_validate(data)


def window(
    rate: float,
    goodput: float,
    *,
    ttft_p99: float | str,
    tpot_p99: float,
    slo_pass: bool,
    duration: float = 120.0,
    failure_reason: str | None = None,
) -> WindowSummary:
    requests = round(rate * duration)
    ttft_p50 = ttft_p99 if isinstance(ttft_p99, str) else ttft_p99 / 3
    return WindowSummary(
        rate_rps=rate,
        duration_s=duration,
        requests=requests,
        completed=requests,
        errors=0,
        output_tokens=round(goodput * duration),
        achieved_rps=rate,
        goodput_tok_s=goodput,
        ttft_ms=Percentiles(p50=ttft_p50, p90=ttft_p99, p99=ttft_p99),
        tpot_ms=Percentiles(p50=tpot_p99 * 0.7, p90=tpot_p99 * 0.9, p99=tpot_p99),
        slo_attainment_pct=99.5 if slo_pass else 60.0,
        slo_pass=slo_pass,
        failure_reason=failure_reason,
    )


def power(mean_w: float, *, throttled: int, samples: int = 120) -> PowerWindow:
    timeline = [(float(t), mean_w + (10.0 if t % 2 else -10.0)) for t in range(samples)]
    throttle = [["sw_power_cap"] if t < throttled else [] for t in range(samples)]
    return PowerWindow(
        source="nvml",
        scope="board",
        samples=samples,
        duration_s=float(samples),
        mean_power_w=mean_w,
        energy_j=mean_w * samples,
        energy_method="counter",
        throttle_counts={"sw_power_cap": throttled},
        timeline=timeline,
        timeline_throttle=throttle,
    )


def accuracy(score_pct: float, items: int = 50) -> AccuracyResult:
    right = round(items * score_pct / 100)
    results = [
        ItemResult(id=f"gsm8k-{i}", correct=i < right, answer="1", gold="1") for i in range(items)
    ]
    return AccuracyResult(
        suite="gsm8k-200.jsonl",
        name="gsm8k-5shot",
        seeds=[SeedResult(seed=0, score_pct=score_pct, items=results)],
        score_pct=score_pct,
        spread_pts=0.0,
    )


def make_run(
    label: str = "vllm-default",
    role: str = "baseline",
    *,
    kv_dtype: str = "bf16",
    spec: Spec | None = None,
    goodput: float = 4572.3,
    repeat_goodputs: tuple[float, ...] = (4600.0, 4544.6),
    repeat_passes: tuple[bool, ...] = (True, True),
    ttft_p99s: tuple[float | str, ...] = (320.0, 340.0),
    tpot_p99s: tuple[float, ...] = (44.6, 43.9),
    powers_w: tuple[float, ...] = (640.0, 634.0),
    throttled: tuple[int, ...] = (100, 99),
    score_pct: float | None = 96.0,
    mode: str = "quick",
    simulated: bool = False,
    mbu_pct: float = 56.6,
    engine_flags: tuple[str, ...] = (),
) -> RunRecord:
    """A complete quick-mode run: grow 2→4→8→16 req/s, bisect, two repeats at 9 req/s."""
    spec = spec or seed_spec()
    spec = spec.model_copy(
        update={
            "model": spec.model.model_copy(update={"kv_dtype": kv_dtype}),
            "engine": spec.engine.model_copy(update={"flags": list(engine_flags)}),
        }
    )
    rate = 9.0
    probes = [
        Probe(phase="grow", window=window(r, r * 500, ttft_p99=300, tpot_p99=40, slo_pass=True))
        for r in (2.0, 4.0, 8.0)
    ]
    probes.append(
        Probe(
            phase="grow",
            window=window(
                16.0,
                3000.0,
                ttft_p99=32000.0,
                tpot_p99=48.0,
                slo_pass=False,
                failure_reason="ttft_p99",
            ),
        )
    )
    probes.append(
        Probe(phase="bisect", window=window(rate, 4500, ttft_p99=350, tpot_p99=45, slo_pass=True))
    )
    repeats = [
        Repeat(
            window=window(rate, g, ttft_p99=t, tpot_p99=tp, slo_pass=ok),
            power=power(w, throttled=th),
        )
        for g, ok, t, tp, w, th in zip(
            repeat_goodputs, repeat_passes, ttft_p99s, tpot_p99s, powers_w, throttled, strict=True
        )
    ]
    started = dt.datetime(2026, 10, 6, 9, 0, tzinfo=dt.UTC)
    command = (
        f"tokenwatt run --spec specs/{spec.name}.spec.yaml --label {label} --role {role} "
        f"--out runs/{label}.json"
    )
    return RunRecord(
        tool=ToolInfo(version="0.1.0", git_commit="0" * 40),
        label=label,
        role=role,  # type: ignore[arg-type]
        mode=mode,  # type: ignore[arg-type]
        simulated=simulated,
        spec=spec,
        fingerprint=fingerprint(spec),
        command=command,
        started=started,
        finished=started + dt.timedelta(minutes=25),
        environment=Environment(
            gpu_name="NVIDIA H100 80GB HBM3",
            gpu_count=1,
            driver="580.105.08",
            rated_bw_tbs_per_gpu=3.35,
            engine_name="vLLM",
            engine_version="0.31.0",
            engine_flags=list(engine_flags),
            kv_capacity_tokens=445008 if kv_dtype == "bf16" else 890080,
        ),
        probes=probes,
        repeats=repeats,
        result=SearchResult(
            rate_rps=rate,
            goodput_tok_s=goodput,
            slo_pass_count=sum(repeat_passes),
            repeats=len(repeat_passes),
        ),
        mbu=MbuResult(
            weights_bytes_per_step=3.0e9,
            kv_bytes_per_step=2.8e9 if kv_dtype == "bf16" else 1.6e9,
            decode_steps_per_s=330.0,
            running_batch=145.0,
            rated_bw_tbs_per_gpu=3.35,
            gpus=1,
            mbu_pct=mbu_pct,
        ),
        accuracy=accuracy(score_pct) if score_pct is not None else None,
        engine_warnings=[],
    )


def tuned_run(**overrides: Any) -> RunRecord:
    """The seed's FP8 KV-cache configuration."""
    args: dict[str, Any] = {
        "label": "vllm-fp8kv",
        "role": "tuned",
        "kv_dtype": "fp8",
        "goodput": 5056.9,
        "repeat_goodputs": (5100.0, 5000.0),
        "ttft_p99s": (352.0, 330.0),
        "tpot_p99s": (43.7, 42.0),
        "powers_w": (620.0, 612.0),
        "throttled": (70, 63),
        "score_pct": 88.0,
        "mbu_pct": 45.3,
        "engine_flags": ("--kv-cache-dtype", "fp8"),
    }
    args.update(overrides)
    return make_run(**args)

"""Summarising run records into a report record (``tokenwatt report``'s pure half)."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.runs_factory import make_run, seed_spec, tuned_run
from tokenwatt.analysis import analyse_report, conclusion, summarise
from tokenwatt.analysis.report.report_setup import (
    NOT_COVERED_BOARD_POWER,
    NOT_COVERED_QUICK,
    NOT_COVERED_SMOKE,
)
from tokenwatt.analysis.report.summarise import (
    report_command,
    slug,
)
from tokenwatt.errors import RecordError
from tokenwatt.records import ReportV3, RunRecord
from tokenwatt.records.run.run_input import RunInput

TITLE = "Qwen3-30B-A3B FP8 on 1× H100: BF16 vs FP8 KV cache"


def _inputs(*runs: RunRecord) -> list[RunInput]:
    return [
        RunInput(f"runs/{r.label}.json", f"{i:x}" * 64, r) for i, r in enumerate(runs, start=10)
    ]


def _report(*runs: RunRecord, **kwargs: object) -> ReportV3:
    return summarise(_inputs(*runs), title=TITLE, **kwargs)  # type: ignore[arg-type]


def test_two_runs_give_a_valid_v3_report_with_the_runs_numbers() -> None:
    report = _report(make_run(), tuned_run(), command="tokenwatt report a b")
    again = ReportV3.model_validate(json.loads(report.model_dump_json()))
    assert again == report
    assert report.schema_version == 3 and report.status == "draft"
    assert report.id == "qwen3-30b-a3b-fp8-on-1-h100-bf16-vs-fp8-kv-cache"
    assert report.published.isoformat() == "2026-10-06"
    base, tuned = report.configs
    assert (base.key, base.role) == ("baseline", "baseline")
    assert (tuned.key, tuned.role) == ("tuned", "tuned")
    # goodput is the search result, not the mean of the repeats
    assert base.goodput_tok_s == 4572.3 and tuned.goodput_tok_s == 5056.9
    # mean board power over the repeats: (640 + 634) / 2 W and (620 + 612) / 2 W
    assert base.node_power_kw == 0.637 and tuned.node_power_kw == 0.616
    # worst p99 over the repeats
    assert (base.ttft_p99_ms, base.tpot_p99_ms) == (340.0, 44.6)
    assert (tuned.ttft_p99_ms, tuned.tpot_p99_ms) == (352.0, 43.7)
    assert (base.slo_pass_count, base.repeats) == (2, 2)
    assert base.throttle_counts == {"sw_power_cap": 199}
    assert tuned.throttle_counts == {"sw_power_cap": 133}
    assert (base.mbu_pct, tuned.mbu_pct) == (56.6, 45.3)
    assert base.engine == "vLLM 0.31.0 · KV BF16" and tuned.engine == "vLLM 0.31.0 · KV FP8"
    assert tuned.accuracy is not None
    assert (tuned.accuracy.score, tuned.accuracy.delta_pts) == (88.0, -8.0)
    assert (tuned.accuracy.items, tuned.accuracy.seeds) == (50, 1)
    # paired on the same 50 items: 4 right only in the baseline, none only in the tuned
    # configuration -> McNemar exact p = 2 × 0.5⁴ = 0.125; every bootstrap Δ is ≤ 0
    assert tuned.accuracy.mcnemar_p == 0.125
    assert tuned.accuracy.ci_low_pts is not None and tuned.accuracy.ci_high_pts is not None
    assert tuned.accuracy.ci_low_pts < -8.0 < tuned.accuracy.ci_high_pts <= 0.0
    assert base.accuracy is not None and base.accuracy.delta_pts == 0.0
    assert base.accuracy.mcnemar_p is None
    # per window: power samples, throttle counts per reason
    assert [r.power_samples for r in base.repeats_detail] == [120, 120]
    assert [r.slo_attainment_pct for r in base.repeats_detail] == [99.5, 99.5]
    assert [r.throttle_counts for r in base.repeats_detail] == [
        {"sw_power_cap": 100},
        {"sw_power_cap": 99},
    ]
    assert [r.goodput_tok_s for r in base.repeats_detail] == [4600.0, 4544.6]
    assert [r.energy_j for r in base.repeats_detail] == [640.0 * 120, 634.0 * 120]
    # the whole search: five probes then the two repeats, in order
    assert [(w.step, w.phase, w.backoff, w.rate_rps) for w in base.search] == [
        ("probe", "grow", None, 2.0),
        ("probe", "grow", None, 4.0),
        ("probe", "grow", None, 8.0),
        ("probe", "grow", None, 16.0),
        ("probe", "bisect", None, 9.0),
        ("repeat", None, 0, 9.0),
        ("repeat", None, 0, 9.0),
    ]
    assert base.search[3].failure_reason == "ttft_p99" and not base.search[3].slo_pass
    assert base.search[3].ttft_p99_ms == 32000.0 and base.search[3].goodput_tok_s == 3000.0
    assert base.whole_search and base.repeats_planned == 2 and base.complete
    assert len(base.power_timeline) == 120 and base.power_timeline[0].throttle == ["sw_power_cap"]
    assert base.mbu_breakdown is not None
    assert base.mbu_breakdown.weights_gbs == 990.0  # 3.0e9 B/step × 330 steps/s
    assert base.mbu_breakdown.kv_gbs == 924.0
    # the widest band: tuned (5100 − 5000) / 2 / 5050 = 0.99 %
    assert report.variance_band_pct == pytest.approx(100 * 50 / 5050, rel=1e-12)
    assert report.runs == 2 and report.fleet.cards == 64
    assert report.hardware.accelerator == "NVIDIA H100 80GB HBM3"
    assert report.hardware.vendor == "NVIDIA" and report.hardware.count == 1
    assert report.model.quantization == "fp8 weights; KV cache varies by configuration"
    assert report.power.kind == "board" and report.power.source == "nvml"
    assert report.spec is not None and report.spec.model.kv_dtype == "bf16"
    assert [f.path for f in report.run_files] == ["runs/vllm-default.json", "runs/vllm-fp8kv.json"]
    assert report.run_files[0].sha256 == "a" * 64
    assert not report.simulated and not report.demo
    # the summary puts the gate's verdict beside the gain (no credit without the gate)
    assert report.summary.endswith(
        "vllm-fp8kv: SLO goodput +10.6% against vllm-default; accuracy −8.0 points, "
        "failing the 1-point gate, so no capacity credit."
    )
    assert "2 repeats at the found rate" in report.summary


def test_report_analysis_matches_the_seed_conclusion() -> None:
    report = _report(make_run(), tuned_run())
    analysis = analyse_report(report)
    assert analysis.disagreements == []
    tpj = [c.tokens_per_joule for c in analysis.configs]
    # goodput tokens ÷ energy over the repeats: the factory's tuned repeats deliver
    # (5100 + 5000) × 120 tokens for (620 + 612) × 120 J = 8.198 tok/J (its search result,
    # 5056.9 tok/s, is not their mean; the seed record itself gives 8.21: test_seed_analysis)
    assert [round(x, 3) for x in tpj if x is not None] == [7.178, 8.198]
    assert "failed the accuracy gate by 8.0 points" in conclusion(analysis, 64)


def test_reproduce_block_is_the_runs_commands_then_the_report_command() -> None:
    command = report_command(
        ["runs/vllm-default.json", "runs/vllm-fp8kv.json"], title=TITLE, demo=False
    )
    report = _report(tuned_run(), make_run(), command=command)  # baseline goes first anyway
    lines = report.reproduce.split("\n")
    assert lines[0].startswith("tokenwatt run ") and "--role baseline" in lines[0]
    assert "--role tuned" in lines[1]
    assert lines[2] == ""
    assert lines[3] == (
        "tokenwatt report runs/vllm-default.json runs/vllm-fp8kv.json "
        "--title 'Qwen3-30B-A3B FP8 on 1× H100: BF16 vs FP8 KV cache'"
    )
    assert [c.role for c in report.configs] == ["baseline", "tuned"]


def test_report_command_quotes_and_flags() -> None:
    assert report_command(["a b.json"], title="it's", report_id="x", cards=8, demo=True) == (
        "tokenwatt report 'a b.json' --title 'it'\"'\"'s' --id x --cards 8 --demo"
    )


def test_not_covered_is_merged_and_deduplicated() -> None:
    spec = seed_spec()
    spec = spec.model_copy(update={"not_covered": [*spec.not_covered, NOT_COVERED_QUICK.upper()]})
    base = make_run(spec=spec)
    tuned = tuned_run(spec=spec, score_pct=None)
    tuned = tuned.model_copy(update={"not_covered": ["Whole-node power (cloud VM: no BMC access)"]})
    items = _report(base, tuned).not_covered
    assert items[:4] == spec.not_covered  # the spec's own list comes first, in order
    assert items.count("Whole-node power (cloud VM: no BMC access)") == 1
    assert sum(1 for i in items if i.casefold() == NOT_COVERED_QUICK.casefold()) == 1
    assert NOT_COVERED_BOARD_POWER in items
    assert any(i.startswith("Accuracy gate for vllm-fp8kv: no accuracy result") for i in items)
    assert len(items) == len({" ".join(i.split()).casefold() for i in items})


def test_runs_without_power_say_so_and_store_no_power() -> None:
    run = make_run()
    for repeat in run.repeats:
        repeat.power = None
    report = _report(run, tuned_run())
    assert report.configs[0].node_power_kw is None
    assert report.configs[0].power_timeline == []
    assert "Power and tokens per joule for vllm-default: no valid power measurement" in (
        report.not_covered
    )


def test_invalid_power_windows_are_left_out() -> None:
    run = make_run(powers_w=(640.0, 900.0))
    assert run.repeats[1].power is not None
    run.repeats[1].power.valid = False
    run.repeats[1].power.invalid_reasons = ["energy counter went backwards"]
    report = _report(run, tuned_run())
    assert report.configs[0].node_power_kw == 0.64
    assert report.configs[0].repeats_detail[1].mean_power_w is None


def test_final_repeats_are_those_after_the_last_backoff() -> None:
    run = make_run(repeat_passes=(True, False))
    run.repeats[1].window.failure_reason = "tpot_p99"
    extra = [r.model_copy(deep=True) for r in run.repeats]
    for r in extra:
        r.backoff = 1
        r.window.slo_pass = True
        r.window.rate_rps = 8.1
    run.repeats += extra
    report = _report(run, tuned_run())
    base = report.configs[0]
    assert (base.slo_pass_count, base.repeats) == (2, 2)
    assert {r.rate_rps for r in base.repeats_detail} == {8.1}


def test_a_client_bound_retried_repeat_is_not_counted() -> None:
    # The collector measures a window that missed while the client lagged once more and
    # keeps both; the first (marked "client-bound … measured again") has no verdict.
    run = make_run(repeat_passes=(True, True))
    first = run.repeats[0].model_copy(deep=True)
    first.window.slo_pass = False
    first.window.ttft_ms.p99 = 900.0
    first.window.failure_reason = (
        "client-bound (send-lag p99 80 ms), measured again: queueing/KV-bound (ttft)"
    )
    run.repeats.insert(0, first)
    report = _report(run, tuned_run())
    base = report.configs[0]
    assert (base.slo_pass_count, base.repeats) == (2, 2)
    assert base.ttft_p99_ms == 340.0  # the retried window's 900 ms is not the worst p99
    assert len(base.repeats_detail) == 2 and all(r.slo_pass for r in base.repeats_detail)


def test_a_missed_repeat_counts_and_infinite_p99_is_null() -> None:
    run = tuned_run(repeat_passes=(True, False), ttft_p99s=(352.0, "inf"))
    report = _report(make_run(), run)
    tuned = report.configs[1]
    assert (tuned.slo_pass_count, tuned.repeats) == (1, 2)
    assert tuned.ttft_p99_ms == 352.0
    assert tuned.repeats_detail[1].ttft_p99_ms is None
    cap = analyse_report(report).tuned[0].capacity
    assert cap is not None and cap.saved == 0


def test_kv_dtype_and_engine_flags_may_differ() -> None:
    report = _report(make_run(kv_dtype="bf16"), tuned_run(kv_dtype="fp8_e4m3"))
    assert report.configs[1].engine.endswith("KV FP8_E4M3")


def test_differing_fingerprints_are_refused_naming_the_fields() -> None:
    other = seed_spec(slo={"ttft_p99_ms": 1500.0}, measurement={"window_s": 60})
    with pytest.raises(RecordError) as info:
        _report(make_run(), tuned_run(spec=other))
    (problem,) = info.value.problems
    assert problem.file == "runs/vllm-fp8kv.json" and problem.field == "spec"
    assert "slo.ttft_p99_ms (1500.0 vs 2000.0)" in problem.message
    assert "measurement.window_s (60.0 vs 120.0)" in problem.message
    assert "runs/vllm-default.json" in problem.message


@pytest.mark.parametrize(
    ("runs", "file", "field", "message"),
    [
        (
            lambda: [tuned_run(), tuned_run(label="other")],
            "runs/vllm-fp8kv.json",
            "role",
            "no run has role 'baseline'",
        ),
        (
            lambda: [make_run(), make_run(label="second")],
            "runs/second.json",
            "role",
            "a second baseline; runs/vllm-default.json is the baseline",
        ),
        (
            lambda: [make_run(), tuned_run(label="vllm-default")],
            "runs/vllm-default.json",
            "label",
            "label 'vllm-default' is also runs/vllm-default.json's",
        ),
        (
            lambda: [make_run(mode="smoke"), tuned_run()],
            "runs/vllm-default.json",
            "mode",
            "never reported as measurements",
        ),
        (
            lambda: [make_run(simulated=True), tuned_run()],
            "runs/vllm-default.json",
            "simulated",
            "pass --demo",
        ),
    ],
    ids=["no-baseline", "two-baselines", "duplicate-label", "smoke", "simulated"],
)
def test_refusals(runs, file: str, field: str, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RecordError) as info:
        _report(*runs())
    problem = next(p for p in info.value.problems if p.field == field)
    assert problem.file == file
    assert message in problem.message


def test_run_without_result_or_repeats_is_refused() -> None:
    run = tuned_run()
    run.result = None
    run.repeats = []
    with pytest.raises(RecordError) as info:
        _report(make_run(), run)
    assert sorted(p.field for p in info.value.problems) == ["repeats", "result"]


@pytest.mark.parametrize(
    ("goodput", "message"),
    [
        (5e-324, "5e-324 tok/s is not what the record's repeats measured"),
        (9999.0, "the mean goodput of the 2 passing repeat(s) at the found load is 5050 tok/s"),
    ],
)
def test_a_result_goodput_its_repeats_do_not_give_is_refused(goodput: float, message: str) -> None:
    """A hand-edited (or damaged) goodput would reach the capacity math: a denormal one
    crashed it ("+inf%", an overflow in the cards needed), a large one claimed a saving."""
    run = tuned_run()
    assert run.result is not None
    run.result.goodput_tok_s = goodput
    with pytest.raises(RecordError) as info:
        _report(make_run(), run)
    (problem,) = info.value.problems
    assert (problem.file, problem.field) == ("runs/vllm-fp8kv.json", "result.goodput_tok_s")
    assert message in problem.message


def test_a_measured_result_whose_goodput_rounds_to_zero_is_refused() -> None:
    run = tuned_run(repeat_goodputs=(0.01, 0.02), goodput=0.015)
    with pytest.raises(RecordError) as info:
        _report(make_run(), run)
    (problem,) = info.value.problems
    assert "0.015 tok/s rounds to 0 tok/s, yet the result is measured" in problem.message


def test_bad_id_and_empty_title_are_refused() -> None:
    with pytest.raises(RecordError) as info:
        summarise(_inputs(make_run()), title=" ", report_id="Not An Id")
    assert sorted(p.file for p in info.value.problems) == ["--id", "--title"]


def test_smoke_and_simulated_runs_make_a_marked_demo_report() -> None:
    report = _report(make_run(mode="smoke", simulated=True), tuned_run(simulated=True), demo=True)
    assert report.demo and report.simulated
    assert all(c.simulated for c in report.configs)
    assert NOT_COVERED_SMOKE in report.not_covered
    assert report.hardware.vendor == "simulated"


def test_several_tuned_configurations_get_distinct_keys() -> None:
    report = _report(make_run(), tuned_run(label="fp8 kv"), tuned_run(label="fp8-kv"))
    assert [c.key for c in report.configs] == ["baseline", "fp8-kv-1", "fp8-kv-2"]


def test_summarise_is_deterministic() -> None:
    a = _report(make_run(), tuned_run(), command="c").model_dump_json()
    b = _report(make_run(), tuned_run(), command="c").model_dump_json()
    assert a == b


def test_slug() -> None:
    assert slug("Qwen3 on 1× H100: KV!") == "qwen3-on-1-h100-kv"
    # No ASCII letters: a stable short hash keeps distinct titles apart.
    assert slug("×××") == "report-" + hashlib.sha256("×××".encode()).hexdigest()[:10]
    ids = {slug(t) for t in ("Тест", "推理", "テスト", "×××", "")}
    assert len(ids) == 5 and all(i.startswith("report-") for i in ids)
    # The same title always gets the same id: SHA-256("推理" in UTF-8) begins 132411ba41.
    assert slug("推理") == "report-132411ba41"


def test_mbu_above_100_percent_is_not_shown_and_says_why() -> None:
    report = _report(make_run(mbu_pct=130.0), tuned_run())
    assert report.configs[0].mbu_pct is None
    notes = report.not_covered
    assert any(i.startswith("MBU for vllm-default: the computed 130.0%") for i in notes)


def test_engine_text_does_not_repeat_a_name_the_version_already_carries() -> None:
    base = make_run()
    base.environment.engine_name = "tokenwatt-sim"
    base.environment.engine_version = "tokenwatt-sim 0.1.0"
    report = _report(base, tuned_run())
    assert report.configs[0].engine == "tokenwatt-sim 0.1.0 · KV BF16"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("chunks-estimate", "output tokens, goodput, TPOT and tokens per joule are estimates"),
        ("tokenizer", "counted by the client with the model's tokenizer"),
    ],
)
def test_client_counted_tokens_are_named_in_the_not_covered_list(
    source: str, expected: str
) -> None:
    base = make_run()
    for repeat in base.repeats:
        repeat.window.usage_missing = repeat.window.completed
        repeat.window.token_count_source = source  # type: ignore[assignment]
    notes = _report(base, tuned_run()).not_covered
    assert [n for n in notes if n.startswith("vllm-default: the server sent no usage")] == [
        next(n for n in notes if expected in n)
    ]


# Run records whose measurements went wrong in ways the collector did not flag: the report must
# still say what is missing, never drop a value silently.


def test_zero_watt_power_windows_are_said_to_be_missing() -> None:
    """A "valid" window of 0 W (a meter that read nothing) gives no power and a note."""
    runs = [make_run(), tuned_run(powers_w=(0.0, 0.0))]
    inputs = [RunInput(f"runs/{r.label}.json", "a" * 64, r) for r in runs]
    report = summarise(inputs, title="zero watts")
    baseline, tuned = report.configs
    assert baseline.node_power_kw == 0.637
    assert tuned.node_power_kw is None
    assert "Power and tokens per joule for vllm-fp8kv: no valid power measurement" in (
        report.not_covered
    )


def test_one_zero_watt_window_does_not_halve_the_mean() -> None:
    runs = [make_run(), tuned_run(powers_w=(616.0, 0.0))]
    inputs = [RunInput(f"runs/{r.label}.json", "a" * 64, r) for r in runs]
    tuned = summarise(inputs, title="one zero").configs[1]
    assert tuned.node_power_kw == 0.616


def test_fixed_length_synthetic_workload_names_its_lengths_not_the_trace() -> None:
    from tests.runs_factory import seed_spec
    from tokenwatt.analysis.report.report_setup import trace_text

    fixed = {"median": 16, "p90": 16}
    spec = seed_spec(workload={"input_tokens": fixed, "output_tokens": {"median": 8, "p90": 8}})
    assert trace_text(spec) == "synthetic token ids, fixed lengths 16 in / 8 out"
    spread = seed_spec(workload={"input_tokens": fixed, "output_tokens": {"median": 8, "p90": 9}})
    assert trace_text(spread) == "chat-mix-v1"


@pytest.mark.parametrize(
    ("field", "value"), [("energy_j", 1.0), ("energy_j", 2 * 634 * 120.0), ("mean_power_w", 317.0)]
)
def test_a_repeat_energy_its_power_and_length_do_not_give_is_refused(
    field: str, value: float
) -> None:
    """Tokens per joule divides by each repeat's energy: an edited energy (or mean power)
    would double it or make it absurd, and `report` refuses the run, naming the field."""
    run = make_run()
    power = run.repeats[1].power
    assert power is not None and power.valid and power.energy_j == 634 * 120.0
    setattr(power, field, value)
    with pytest.raises(RecordError) as info:
        _report(run, tuned_run())
    (problem,) = info.value.problems
    assert (problem.file, problem.field) == ("runs/vllm-default.json", "repeats[1].power.energy_j")
    assert "is not the window's mean power × its length" in problem.message
    # Within 5% (a counter's span that starts a few ms early) is a measurement, not an edit.
    power.energy_j = 634 * 120.0 * 1.03
    power.mean_power_w = 634.0
    assert _report(run, tuned_run()).configs[0].repeats_detail[1].energy_j == 634 * 120.0 * 1.03

"""Inputs and outputs of a collect run: modes, API key, atomic record, CLI refusals."""

from __future__ import annotations

import datetime as dt
import errno
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenwatt.analysis.window.failure import classify_failure
from tokenwatt.cli import cli
from tokenwatt.collect.measure.verdict import classification_view, retried
from tokenwatt.collect.plan.modes import PRESETS, apply_mode
from tokenwatt.collect.plan.runfile import load_run_spec, read_api_key, write_record
from tokenwatt.errors import InputError
from tokenwatt.files import WriteError
from tokenwatt.records import RunRecord, load_spec
from tokenwatt.records.run.environment import ToolInfo
from tokenwatt.records.run.request import RequestResult
from tokenwatt.records.run.window import WindowSummary
from tokenwatt.records.spec.spec import fingerprint

REPO = Path(__file__).resolve().parents[3]
SEED_SPEC = REPO / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"
SIM_SPEC = REPO / "tests" / "fixtures" / "sim.spec.yaml"


def test_quick_mode_caps_the_seed_spec_to_the_seed_schedule() -> None:
    spec = load_spec(SEED_SPEC)
    quick = apply_mode(spec, "quick")
    m = quick.measurement
    assert (m.warmup_s, m.search_window_s, m.window_s, m.repeats) == (45, 60, 120, 2)
    assert (quick.accuracy.limit, quick.accuracy.seeds) == (50, 1)
    smoke = apply_mode(spec, "smoke")
    assert (smoke.measurement.window_s, smoke.measurement.repeats) == (20, 1)
    assert smoke.accuracy.limit == 5
    # Full mode measures every window as the spec says, and 30 s of idle power first.
    full = apply_mode(spec, "full")
    assert full == spec.model_copy(update={"power": spec.power.model_copy(update={"idle_s": 30})})
    assert spec.measurement.window_s == 120  # the input is not changed
    assert fingerprint(smoke) != fingerprint(spec)


def test_modes_never_lengthen_a_short_spec() -> None:
    spec = load_spec(SIM_SPEC)
    for mode in ("smoke", "quick", "full"):
        assert apply_mode(spec, mode).measurement.window_s == spec.measurement.window_s  # type: ignore[arg-type]
    assert not PRESETS["smoke"].reportable and PRESETS["quick"].reportable


def test_idle_power_is_on_by_default_in_full_mode_only() -> None:
    spec = load_spec(SEED_SPEC)
    assert spec.power.idle_s is None and spec.power.source != "none"
    idle = {mode: apply_mode(spec, mode).power.idle_s for mode in ("full", "quick", "smoke")}
    assert idle == {"full": 30.0, "quick": 0.0, "smoke": 0.0}
    chosen = spec.model_copy(update={"power": spec.power.model_copy(update={"idle_s": 5.0})})
    assert apply_mode(chosen, "quick").power.idle_s == 5.0  # the spec's own value stands
    unpowered = spec.model_copy(update={"power": spec.power.model_copy(update={"source": "none"})})
    assert apply_mode(unpowered, "full").power.idle_s == 0.0


def test_an_unset_key_variable_is_an_input_error_naming_the_field() -> None:
    spec = load_spec(SIM_SPEC)
    with_key = spec.model_copy(
        update={"engine": spec.engine.model_copy(update={"api_key_env": "SIM_KEY"})}
    )
    assert read_api_key(spec, "s.yaml", {}) is None
    assert read_api_key(with_key, "s.yaml", {"SIM_KEY": "k"}) == "k"
    with pytest.raises(InputError) as err:
        read_api_key(with_key, "s.yaml", {})
    assert err.value.problems[0].field == "engine.api_key_env"
    assert "SIM_KEY" in err.value.problems[0].message


def test_endpoint_override_is_validated(tmp_path: Path) -> None:
    spec = load_run_spec(SIM_SPEC, "quick", "http://127.0.0.1:9/v1")
    assert spec.engine.endpoint == "http://127.0.0.1:9/v1"
    with pytest.raises(InputError, match="http") as err:
        load_run_spec(SIM_SPEC, "quick", "ftp://x")
    assert err.value.problems[0].file == "--endpoint"


def test_kv_dtype_override_keeps_the_fingerprint() -> None:
    plain = load_run_spec(SIM_SPEC, "quick", None)
    fp8 = load_run_spec(SIM_SPEC, "quick", None, "fp8")
    assert (plain.model.kv_dtype, fp8.model.kv_dtype) == ("bf16", "fp8")
    assert fingerprint(plain) == fingerprint(fp8)
    with pytest.raises(InputError) as err:
        load_run_spec(SIM_SPEC, "quick", None, "int3")
    assert err.value.problems[0].file == "--kv-dtype"


def _record() -> RunRecord:
    spec = load_spec(SIM_SPEC)
    return RunRecord(
        tool=ToolInfo(version="0"),
        label="a",
        role="baseline",
        mode="quick",
        spec=spec,
        fingerprint=fingerprint(spec),
        command="tokenwatt collect",
        started=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )


def test_records_are_written_whole_and_leave_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "a.json"
    record = _record()
    write_record(record, out)
    assert RunRecord.model_validate_json(out.read_text()) == record
    assert [p.name for p in out.parent.iterdir()] == ["a.json"]


def test_the_runs_key_is_swept_out_of_every_field_at_the_write(tmp_path: Path) -> None:
    key = "tw-own-key-0042"
    record = _record()
    record.environment.engine_version = f"b1 {key.encode().hex()}"
    record.not_covered.append(f"the server said {key}")
    out = tmp_path / "a.json"
    write_record(record, out, [key])
    text = out.read_text()
    assert key not in text and key.encode().hex() not in text
    kept = RunRecord.model_validate_json(text)
    assert kept.environment.engine_version == "b1 [redacted]"
    assert kept.not_covered[-1] == "the server said [redacted]"


@pytest.mark.parametrize("key", ["measured", "token", "power", "2026", "repeat"])
def test_a_key_that_is_one_of_the_records_own_words_does_not_break_the_write(
    tmp_path: Path, key: str
) -> None:
    """The record's field names and vocabulary (a status, a kind, a date) are the schema's:
    a key equal to one of them leaves them as they are, and is still swept from text."""
    record = _record()
    record.not_covered.append(f"the server said {key}!")
    out = tmp_path / "a.json"
    write_record(record, out, [key])
    kept = RunRecord.model_validate_json(out.read_text())
    assert kept.not_covered[-1] == "the server said [redacted]!"
    assert kept.label == record.label and kept.complete == record.complete


def test_a_failed_write_keeps_the_previous_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "a.json"
    write_record(_record(), out)
    before = out.read_text()

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("os.fsync", boom)
    later = _record().model_copy(update={"label": "b"})
    with pytest.raises(WriteError, match=r"the disk is full \(the previous version is kept\)"):
        write_record(later, out)
    assert out.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_cli_refuses_a_bad_spec_with_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.spec.yaml"
    bad.write_text(SIM_SPEC.read_text().replace("growth: 2", "growth: 1"))
    out = tmp_path / "run.json"
    result = CliRunner().invoke(
        cli,
        ["collect", "--spec", str(bad), "--label", "x", "--role", "baseline", "--out", str(out)],
    )
    assert result.exit_code == 2
    assert "sweep.growth" in result.output
    assert not out.exists()


def test_cli_refuses_an_unreachable_engine_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    args = ["collect", "--spec", str(SIM_SPEC), "--label", "x", "--role", "tuned"]
    args += ["--out", str(out), "--endpoint", "http://127.0.0.1:9/v1", "--no-progress"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert "error:" in result.output
    assert not out.exists()


def test_run_is_an_alias_of_collect() -> None:
    result = CliRunner().invoke(cli, ["run", "--help"])
    assert result.exit_code == 0
    assert "--spec" in result.output and "--role" in result.output


def _summary(**kw: object) -> WindowSummary:
    base: dict[str, object] = {
        "rate_rps": 10.0,
        "duration_s": 1.0,
        "requests": 3,
        "completed": 0,
        "errors": 0,
        "slo_pass": False,
        "stopped_early": True,
    }
    base.update(kw)
    return WindowSummary.model_validate(base)


class _Result:
    def __init__(self, summary: WindowSummary, requests: list[RequestResult]) -> None:
        self.summary = summary
        self.requests = requests


def _req(scheduled: float, chunks: list[float], error: str | None, end: float) -> RequestResult:
    r = RequestResult(scheduled_s=scheduled, sent_s=scheduled, chunk_s=chunks, error=error)
    if chunks and error is None:
        r.first_token_s, r.last_token_s = chunks[0], chunks[-1]
        r.output_tokens = len(chunks)
    r.finished_s = end
    return r


def test_an_early_stop_on_waiting_requests_reads_as_a_ttft_miss() -> None:
    slo = load_spec(SIM_SPEC).slo  # TTFT 400 ms, TPOT 100 ms
    reqs = [
        _req(0.0, [0.1, 0.15, 0.2], None, 0.2),  # fine
        _req(0.0, [], "cancelled", 1.0),  # waited 1 s for a first token
        _req(0.1, [], "cancelled", 1.0),  # waited 0.9 s
    ]
    stored = _summary(errors=2, error_kinds={"cancelled": 2}, failure_reason="ttft,tpot,errors")
    view = classification_view(_Result(stored, reqs), slo)
    assert view.ttft_ms.p99 == "inf"
    assert view.tpot_ms.p99 != "inf"
    assert view.errors == 0
    # our own cancellations are neither engine errors nor a TPOT miss in the reason
    assert view.failure_reason == "ttft,stopped_early"
    assert classify_failure(view, None, slo=slo) == "queueing/KV-bound"


def test_an_early_stop_on_slow_tokens_reads_as_a_tpot_miss() -> None:
    slo = load_spec(SIM_SPEC).slo
    slow = [0.1 + 0.2 * i for i in range(5)]  # 200 ms per token
    reqs = [
        _req(0.0, slow, None, 1.0),
        _req(0.0, slow, None, 1.0),
        _req(0.0, [0.1], "cancelled", 1.0),
    ]
    view = classification_view(_Result(_summary(), reqs), slo)
    assert view.tpot_ms.p99 == "inf"
    assert view.ttft_ms.p99 != "inf"
    assert view.failure_reason == "tpot,stopped_early"
    assert classify_failure(view, None, slo=slo) == "per-token-latency-bound"


def test_retried_windows_are_recognised() -> None:
    assert retried(_summary(failure_reason="client-bound (send-lag p99 50 ms), measured again: x"))
    assert not retried(_summary(failure_reason="queueing/KV-bound (ttft)"))
    assert not retried(_summary())


def test_goodput_is_zero_when_the_backoffs_ran_out() -> None:
    from tokenwatt.collect.measure.measurement import repeats_goodput
    from tokenwatt.records.run.run import Repeat

    passed = Repeat(window=_summary(slo_pass=True, stopped_early=False, goodput_tok_s=500.0))
    missed = Repeat(window=_summary(goodput_tok_s=900.0))
    # the last back-off: repeat 1 met the SLO, repeat 2 missed -> no rate was confirmed
    assert repeats_goodput([passed, missed], confirmed=False) == 0.0
    assert repeats_goodput([passed, passed], confirmed=True) == 500.0


def test_text_longer_than_the_records_allow_is_cut_when_written(tmp_path: Path) -> None:
    """A 1 MB engine version or error message from outside must not make a record that
    `report` would refuse: it is cut at the write, saying how long it was."""
    rec = _record()
    rec.environment.engine_version = "v" * 1_000_000
    rec.not_covered.append("Power: " + "[" * 400_000)
    out = tmp_path / "run.json"
    write_record(rec, out)
    back = RunRecord.model_validate_json(out.read_text())
    assert back.environment.engine_version is not None
    assert len(back.environment.engine_version) == 4000
    assert back.environment.engine_version.endswith("… (cut from 1,000,000 characters)")
    assert len(back.not_covered[-1]) == 4000
    assert rec.environment.engine_version == "v" * 1_000_000  # the caller's copy is untouched


def test_a_bad_trace_is_named_by_the_spec_file_and_field_first(tmp_path: Path) -> None:
    """The reader gave the spec file: a bad line of the trace it names is reported under
    the spec's workload.trace, then the trace's file and line."""
    from tokenwatt.collect.plan.runfile import check_trace_file

    spec_path = tmp_path / "s.spec.yaml"
    (tmp_path / "t.jsonl").write_text(
        '{"prompt": [1, 2, 3], "max_tokens": 4}\n{"prompt": "x", "max_tokens": -1}\n'
    )
    spec = load_spec(Path(__file__).resolve().parents[2] / "fixtures" / "sim.spec.yaml")
    spec = spec.model_copy(
        update={"workload": spec.workload.model_copy(update={"trace": "t.jsonl"})}
    )
    with pytest.raises(InputError) as info:
        check_trace_file(spec, spec_path)
    (problem,) = info.value.problems
    assert (problem.file, problem.field) == (str(spec_path), "workload.trace")
    assert problem.message.startswith(f"{tmp_path / 't.jsonl'}, line 2: max_tokens"), problem

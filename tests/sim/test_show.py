"""``collect`` prints a table of its windows and writes the per-request file; ``show`` reads
both back (tables, ``--json``, ``--requests`` with its hash check), and refuses bad input.

A real ``tokenwatt collect`` against ``tokenwatt sim`` in child processes, quick mode, no
accuracy suite.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.runs_factory import make_run
from tests.sim.sim_process import SimRun
from tokenwatt.analysis import sustained_note
from tokenwatt.analysis.report.run_table import request_percentiles, run_rows
from tokenwatt.cli import cli
from tokenwatt.collect.measure.request_log import SUFFIX
from tokenwatt.records import RunRecord
from tokenwatt.records.run.window import ErrorSample, WindowSummary

WIDE = {"COLUMNS": "300"}


@pytest.fixture
def collected(sim_run: SimRun) -> SimRun:
    """The session's run of ``collect`` against the simulator (``tests/sim/conftest.py``):
    ``sim-run.json``, fp8-kv, piped without ``COLUMNS``."""
    return sim_run


def test_collect_prints_one_row_per_window(collected: SimRun) -> None:
    rows = run_rows(collected.record)
    assert len(rows) == len(collected.record.probes) + len(collected.record.repeats) >= 2
    lines = collected.stdout.splitlines()
    for row in rows:
        # Each window's name, rate and request count sit on one table line, in that order.
        hits = [
            line
            for line in lines
            if f" {row['window']} " in line and f" {row['requests']} " in line
        ]
        assert len(hits) == 1, row["window"]
        assert hits[0].index(row["window"]) < hits[0].index(f"{row['rate_rps']:.4g}")
    assert "TTFT ms p50/p90/p99" in collected.stdout


def test_the_request_file_matches_the_record(collected: SimRun) -> None:
    rec = collected.record
    log = rec.requests_log
    assert log is not None
    path = collected.path.with_name("sim-run" + SUFFIX)
    assert log.file == path.name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == log.sha256
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    assert len(rows) == log.requests
    assert log.windows == len(rec.probes) + len(rec.repeats)
    # Every window's in-window requests are its summary's requests (the cancelled ones of
    # an early stop included, as there).
    for kind, windows in (
        ("probe", [p.window for p in rec.probes]),
        ("repeat", [r.window for r in rec.repeats]),
    ):
        for i, w in enumerate(windows):
            mine = [r for r in rows if (r["kind"], r["index"]) == (kind, i)]
            inside = [r for r in mine if r["in_window"]]
            assert len(inside) == w.requests, (kind, i)
            cancelled = sum(r["error"] == "cancelled" for r in inside)
            assert cancelled == w.cancelled_by_client, (kind, i)
            assert {r["rate_rps"] for r in mine} == {w.rate_rps}
    # The per-request distributions agree with the record's own percentiles, in every
    # window, an early-stopped one included (its cancelled requests infinite in both).
    dists = request_percentiles(rows)
    assert len(dists) == log.windows
    # The file's times are rounded to the microsecond: a difference of two is off by 1 µs.
    for dist, w in zip(dists, all_windows(rec), strict=True):
        assert (dist["counted"], dist["cancelled"]) == (w.requests, w.cancelled_by_client)
        assert dist["errors"] == w.errors
        for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
            assert dist[key] == pytest.approx(getattr(w, key).model_dump(), abs=2e-3), key
        if w.cancelled_by_client:
            assert w.slo_attainment_pct < 100 and w.ttft_ms.p99 == "inf"
    # The search's probe at 60 req/s is far past this simulator's capacity (about 50 req/s
    # at the TPOT limit) and stops early: the comparison above covered a stopped window.
    assert any(w.stopped_early and w.cancelled_by_client for w in all_windows(rec))


def all_windows(rec: RunRecord) -> list[WindowSummary]:
    return [p.window for p in rec.probes] + [r.window for r in rec.repeats]


def test_show_json_is_the_record_rows(collected: SimRun) -> None:
    result = CliRunner().invoke(cli, ["show", "--json", str(collected.path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["label"] == "sim-fp8" and data["mode"] == "quick" and data["simulated"]
    assert data["windows"] == json.loads(json.dumps(run_rows(collected.record)))


def test_show_requests_checks_the_hash_and_prints_distributions(
    collected: SimRun, tmp_path: Path
) -> None:
    result = CliRunner().invoke(cli, ["show", "--requests", str(collected.path)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "SHA-256 checked" in result.output
    log = collected.record.requests_log
    assert log is not None
    # A copy whose per-request file lost its last byte: the hash check names the file.
    run = tmp_path / "sim-run.json"
    shutil.copy(collected.path, run)
    data = collected.path.with_name(log.file).read_bytes()
    (tmp_path / log.file).write_bytes(data[:-1])
    bad = CliRunner().invoke(cli, ["show", "--requests", str(run)])
    assert bad.exit_code == 2
    assert f"error: {tmp_path / log.file}: requests_log.sha256: the file's SHA-256 is" in bad.output
    assert "sim-fp8" not in bad.output  # nothing printed before the error
    (tmp_path / log.file).unlink()
    gone = CliRunner().invoke(cli, ["show", "--requests", str(run)])
    assert gone.exit_code == 2
    assert f"error: {tmp_path / log.file}: requests_log: cannot read the file" in gone.output


def known_record() -> RunRecord:
    """The report tests' run, with an error kind, a hostile label text and a hostile reason."""
    run = make_run()
    w = run.repeats[1].window
    w.errors, w.error_kinds = 3, {"timeout": 1, "http_503": 2}
    w.error_samples = {"http_503": [ErrorSample(kind="http_503", body="\x1b[31mred")]}
    run.probes[0].window.failure_reason = "queueing \x1b]0;owned\x07 [bold]x[/bold]"
    run.probes[0].window.slo_pass = False
    return run


def test_show_table_rows_of_a_known_record(tmp_path: Path) -> None:
    run = known_record()
    path = tmp_path / "known.json"
    path.write_text(run.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(cli, ["show", str(path), "--wide"], env=WIDE)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "repeat 2" in line]
    assert len(lines) == 1
    cells = [c.strip() for c in lines[0].strip().strip("│").split("│")]
    w = run.repeats[1].window
    assert w.ttft_ms.p50 is not None and w.tpot_ms.p50 is not None
    assert cells == [
        "#7 repeat 2 of 2 at 9 req/s",
        f"{w.rate_rps:.4g}",
        f"{w.achieved_rps:.4g}",
        str(w.requests),
        str(w.cancelled_by_client),
        "3 (http_503 2, timeout 1)",
        "113 / 340 / 340",
        "30.7 / 39.5 / 43.9",
        "- / - / -",
        "- / - / -",
        "4,544.6",
        "meets the SLO",
    ]
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "\\x1b]0;owned\\x07 [bold]x[/bold]" in result.output


def test_show_keeps_the_results_warnings_and_the_keep_up_note(tmp_path: Path) -> None:
    # What collect printed below its result line must not be lost on a reread record.
    run = known_record()
    assert run.result is not None
    run.result.warnings = ["the found rate rests on 3 of 5 repeats"]
    note = sustained_note(run)
    assert note is not None and "not judged in" in note  # the factory's windows are short
    path = tmp_path / "known.json"
    path.write_text(run.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(cli, ["show", str(path)], env=WIDE)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    result_at = next(i for i, line in enumerate(lines) if line.startswith("result: "))
    assert lines[result_at + 1] == "warning: the found rate rests on 3 of 5 repeats"
    assert lines[result_at + 2] == f"note: {note}"


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (None, "cannot read the file"),
        ("{not json", ""),
        ('{"configs": [], "title": "t"}', "configs: is a report record"),
        ('{"label": "x"}', "tool"),
    ],
)
def test_show_bad_input_exits_2_naming_the_file(
    tmp_path: Path, content: str | None, field: str
) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = CliRunner().invoke(cli, ["show", str(path)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {path}: ")
    assert field in result.output


def test_show_requests_of_a_record_without_the_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "known.json"
    path.write_text(known_record().model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(cli, ["show", "--requests", str(path)])
    assert result.exit_code == 2
    assert result.output == (f"error: {path}: requests_log: the record names no per-request file\n")


def _row(index: int, text_tokens: int | None, **change: object) -> dict[str, object]:
    row: dict[str, object] = {
        "kind": "repeat",
        "index": index,
        "rate_rps": 2.0,
        "in_window": True,
        "scheduled_s": 0.0,
        "sent_s": 0.0,
        "first_token_s": 0.1,
        "last_token_s": 0.5,
        "end_s": 0.5,
        "input_tokens": 12,
        "output_tokens": 5,
        "status": 200,
        "error": None,
        "prompt": "text",
        "prompt_text_tokens": text_tokens,
    }
    return {**row, **change}


def test_show_requests_summarises_the_measured_text_prompt_lengths() -> None:
    from tokenwatt.cli.terminal import requests_table

    rows = [_row(0, n) for n in (10, 20, 30, 40)]
    rows.append(_row(0, 1000, in_window=False))  # warm-up: not counted
    rows.append(_row(0, 50, error="cancelled"))  # cancelled by the client: counted, infinite
    rows.append(_row(1, None))  # a window of token-id prompts
    windows = [{"window": str(i), **w} for i, w in enumerate(request_percentiles(rows))]
    # Linear percentiles of 10 .. 50: p50 30, p90 40 + 0.6 x 10, p99 40 + 0.96 x 10.
    assert windows[0]["prompt_text_tokens"] == {"p50": 30.0, "p90": 46.0, "p99": 49.6}
    assert windows[0]["counted"] == 5 and windows[0]["requests"] == 6
    assert (windows[0]["cancelled"], windows[0]["errors"]) == (1, 0)
    # Four TTFTs of 100 ms and the cancelled one's infinite: rank 3.96 of 0..4 reaches it.
    assert windows[0]["ttft_ms"] == {"p50": 100.0, "p90": "inf", "p99": "inf"}
    assert windows[1]["prompt_text_tokens"] is None
    table = requests_table("t", windows)
    assert str(table.columns[-1].header) == "text prompt tokens p50/p90/p99"
    assert [str(c) for c in table.columns[-1].cells] == ["30 / 46 / 49.6", "- / - / -"]
    # A file without the field (written before it) and a token-id run: no such column.
    old = [{k: v for k, v in _row(0, None).items() if k != "prompt_text_tokens"}]
    assert request_percentiles(old)[0]["prompt_text_tokens"] is None
    old_windows = [{"window": "#1", **w} for w in request_percentiles(old)]
    assert str(requests_table("t", old_windows).columns[-1].header) == ("E2E ms p50/p90/p99")


def test_the_title_of_a_dataset_run_names_the_dataset_and_its_hash(tmp_path: Path) -> None:
    from tokenwatt.cli.terminal import run_title
    from tokenwatt.records.spec.spec_load import DatasetSpec

    run = known_record()
    assert run_title(run) == "vllm-default (baseline, quick mode, workload chat-mix-v1)"
    dataset = DatasetSpec(kind="sharegpt", path="conv.json", sha256="3f2a" + "0" * 60)
    run.spec.workload = run.spec.workload.model_copy(update={"dataset": dataset})
    assert run_title(run) == (
        "vllm-default (baseline, quick mode, workload sharegpt dataset 3f2a00000000…)"
    )
    path = tmp_path / "dataset.json"
    path.write_text(run.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(cli, ["show", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["workload"] == "sharegpt dataset 3f2a00000000…"


def test_show_json_has_the_figures_bench_serve_users_compare(tmp_path: Path) -> None:
    """Request throughput, send lag, TTFT from the send, input and total tokens/s; and the
    run's explanation and not-covered list."""
    from tokenwatt.records.run.window import Percentiles

    run = known_record()
    w = run.repeats[1].window
    w.input_tokens, w.send_lag_p99_ms = 120_000, 3.5
    w.ttft_from_send_ms = Percentiles(p50=90.0, p90=300.0, p99=330.0)
    run.not_covered = ["Power: the meter could not be opened (no NVML)"]
    path = tmp_path / "known.json"
    path.write_text(run.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(cli, ["show", "--json", str(path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    row = next(r for r in data["windows"] if r["window"].startswith("#7 "))
    assert row["achieved_rps"] == 9.0 and row["send_lag_p99_ms"] == 3.5
    assert row["ttft_from_send_ms"] == {"p50": 90.0, "p90": 300.0, "p99": 330.0}
    # 120,000 prompt tokens over the 120 s window; 545,352 output tokens beside them.
    assert row["input_tok_s"] == 1000.0 and row["output_tok_s"] == 4544.6
    assert row["total_tok_s"] == round((120_000 + 545_352) / 120, 4) == 5544.6
    assert data["not_covered"] == ["Power: the meter could not be opened (no NVML)"]
    assert data["explanation"].startswith("The search found 9 req/s")

"""One label per window, the same in ``show``, ``show --json``, ``show --requests``,
``report --json`` and the built page (analysis.window_labels).

The run is built by hand from the report tests' run: grow probes (one a ``--fast-search``
scout), a bisect probe, a repeat that missed, a back-off, a window the client's lag made the
collector measure again, and its retry. The per-request file beside it is written as the
collector writes it (one gzip member per window), one window in the format of files made
before text prompts were recorded.
"""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tests.runs_factory import make_run, window
from tokenwatt.cli import cli
from tokenwatt.collect.measure.request_log import SUFFIX, gzip_member
from tokenwatt.records import RETRIED_PREFIX, RunRecord
from tokenwatt.records.run.run import Repeat, RequestsLog

WIDE = {"COLUMNS": "1000"}

LABELS = [
    "#1 probe 1 at 2 req/s (grow)",
    "#2 probe 2 at 4 req/s (grow)",
    "#3 probe 3 at 8 req/s (grow, scout)",
    "#4 probe 4 at 16 req/s (grow)",
    "#5 probe 5 at 9 req/s (bisect)",
    "#6 repeat 1 of 2 at 9 req/s",
    "#7 repeat 2 of 2 at 9 req/s",
    "#8 repeat 1 of 2 at 8.1 req/s (back-off 1; client lagged; measured again as #9)",
    "#9 repeat 1 of 2 at 8.1 req/s (back-off 1; retry of #8)",
    "#10 repeat 2 of 2 at 8.1 req/s (back-off 1)",
]
"""Hand-written: the windows of :func:`backed_off_run` in the order measured."""


def backed_off_run() -> RunRecord:
    """Probes 2, 4, 8 (a 15 s scout of the 60 s search window), 16 (missed) and 9 req/s
    (bisect); at 9 req/s the second repeat missed, so the rate backed off to 8.1 req/s,
    where the first window was measured again (the client lagged) and both repeats met."""
    run = make_run()
    scout = run.probes[2].window
    scout.duration_s, scout.requests, scout.completed = 15.0, 120, 120
    missed = run.repeats[1]
    missed.window.slo_pass = False
    missed.window.failure_reason = "queueing/KV-bound (ttft)"
    missed.window.ttft_ms.p99 = 2350.0
    lagged = Repeat(
        window=window(8.1, 3900.0, ttft_p99=2100.0, tpot_p99=43.0, slo_pass=False), backoff=1
    )
    lagged.window.failure_reason = (
        f"{RETRIED_PREFIX} (send-lag p99 80 ms), measured again: queueing/KV-bound (ttft)"
    )
    final = [
        Repeat(window=window(8.1, g, ttft_p99=t, tpot_p99=44.0, slo_pass=True), backoff=1)
        for g, t in ((4100.0, 330.0), (4050.0, 345.0))
    ]
    run.repeats = [*run.repeats, lagged, *final]
    assert run.result is not None
    run.result = run.result.model_copy(
        update={"rate_rps": 8.1, "goodput_tok_s": 4075.0, "backoffs": 1}
    )
    return run


def _request(kind: str, index: int, rate: float, *, old: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "kind": kind,
        "index": index,
        "rate_rps": rate,
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
    }
    if not old:
        row.update(prompt="ids", prompt_text_tokens=None)
    return row


def write_run(run: RunRecord, folder: Path) -> Path:
    """The record and its per-request file (one request per window; the second probe's
    line as files before ``prompt`` and ``prompt_text_tokens`` wrote it)."""
    path = folder / f"{run.label}.json"
    windows = [("probe", i, p.window.rate_rps) for i, p in enumerate(run.probes)]
    windows += [("repeat", i, r.window.rate_rps) for i, r in enumerate(run.repeats)]
    data = b"".join(
        gzip_member([_request(kind, i, rate, old=(kind, i) == ("probe", 1))])
        for kind, i, rate in windows
    )
    log = path.with_name(path.name.removesuffix(".json") + SUFFIX)
    log.write_bytes(data)
    run.requests_log = RequestsLog(
        file=log.name,
        sha256=hashlib.sha256(data).hexdigest(),
        requests=len(windows),
        windows=len(windows),
    )
    path.write_text(run.model_dump_json(), encoding="utf-8")
    return path


def first_cells(output: str) -> list[str]:
    """The first cell of every body row of the rich tables in ``output``."""
    lines = [line for line in output.splitlines() if "│" in line]
    cells = [line.strip().strip("│").split("│")[0].strip() for line in lines]
    return [c for c in cells if c.startswith("#")]


def test_every_place_names_each_window_alike(tmp_path: Path) -> None:
    path = write_run(backed_off_run(), tmp_path)
    runner = CliRunner()

    shown = runner.invoke(cli, ["show", str(path)], env=WIDE)
    assert shown.exit_code == 0, shown.output
    assert first_cells(shown.output) == LABELS

    as_json = runner.invoke(cli, ["show", "--json", "--requests", str(path)])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert [w["window"] for w in data["windows"]] == LABELS
    assert [w["number"] for w in data["windows"]] == list(range(1, 11))
    assert [w["window"] for w in data["requests"]] == LABELS
    # The file's own names are kept beside the label: the third repeat is window #8.
    assert (data["requests"][7]["kind"], data["requests"][7]["index"]) == ("repeat", 2)

    requests = runner.invoke(cli, ["show", "--requests", str(path)], env=WIDE)
    assert requests.exit_code == 0, requests.output
    per_request = requests.output[requests.output.index("per-request file") :]
    assert first_cells(per_request) == LABELS

    reports = tmp_path / "reports"
    reports.mkdir()
    out = reports / "labels.json"
    made = runner.invoke(
        cli, ["report", str(path), "--title", "Labels", "--demo", "--out", str(out), "--json"]
    )
    assert made.exit_code == 0, made.output
    why = (
        "The search found 9 req/s, but the second repeat there (#7) missed p99 TTFT "
        "(2,350 ms > 2,000 ms); backed off to 8.1 req/s, which met the SLO in 2 of 2 repeats."
    )
    assert json.loads(made.output)["explanations"][0]["why"] == why

    built = runner.invoke(cli, ["build", "--reports", str(reports), "--out", str(tmp_path / "d")])
    assert built.exit_code == 0, built.output
    page = (tmp_path / "d" / "reports" / "labels.md").read_text(encoding="utf-8")
    text = html.unescape(page)
    table = text[text.index("| Window | Rate (req/s) |") :]
    table = table[: table.index("\n\n")]
    rows = [line.split(" | ")[0].removeprefix("| ") for line in table.splitlines()[2:]]
    assert [r for r in rows if not r.startswith("**")] == LABELS
    assert "| **⤵ back-off 1** | 9.00 → 8.10 |" in table
    assert text.count(why) == 2  # at the result and above the search table


def test_a_file_window_the_record_lacks_is_named_by_the_file(tmp_path: Path) -> None:
    from tokenwatt.analysis import request_label, run_labels

    labels = run_labels(backed_off_run())
    assert request_label(labels, 5, "probe", 4) == LABELS[4]
    assert request_label(labels, 5, "repeat", 0) == LABELS[5]
    assert request_label(labels, 5, "repeat", 5) == "repeat index 5 (not in the run record)"
    assert request_label(labels, 5, "probe", 5) == "probe index 5 (not in the run record)"


def test_a_window_a_dead_worker_cut_is_labelled_by_that_cause() -> None:
    from tokenwatt.analysis import run_labels
    from tokenwatt.records import WORKER_DIED_PREFIX

    run = backed_off_run()
    lagged = run.repeats[2].window
    lagged.failure_reason = f"{WORKER_DIED_PREFIX} (worker 1), measured again: worker_died"
    labels = [label.text for label in run_labels(run)]
    assert labels[7] == "repeat 1 of 2 at 8.1 req/s (back-off 1; worker died; measured again as #9)"
    assert labels[8] == "repeat 1 of 2 at 8.1 req/s (back-off 1; retry of #8)"

"""``show --requests`` reads only rows the collector could have written: a per-request file
tampered with (its hash updated in the record) exits 2 naming file, line and field, and
``--json`` never prints NaN or Infinity."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.runs_factory import make_run
from tokenwatt.cli import cli
from tokenwatt.collect.measure.request_log import gzip_member
from tokenwatt.errors import InputError
from tokenwatt.records import read_request_rows
from tokenwatt.records.run.run import RequestsLog

WIDE = {"COLUMNS": "250"}


def _row(**change: object) -> dict[str, object]:
    row: dict[str, object] = {
        "kind": "repeat",
        "index": 0,
        "rate_rps": 9.0,
        "in_window": True,
        "scheduled_s": 1.0,
        "sent_s": 1.001,
        "first_token_s": 1.2,
        "last_token_s": 2.0,
        "end_s": 2.0,
        "input_tokens": 12,
        "output_tokens": 5,
        "status": 200,
        "error": None,
    }
    return {**row, **change}


def _write(
    tmp_path: Path, rows: list[dict[str, object]], *, raw: bytes | None = None, requests: int = 0
) -> tuple[Path, Path]:
    """A run record and its per-request file, the record holding the file's real hash
    (``raw``: the file's bytes, else the rows; ``requests``: the count it says, else theirs)."""
    log = tmp_path / "run.requests.jsonl.gz"
    # json.dumps writes float('nan') as NaN: what a hand edit or another tool could leave.
    log.write_bytes(gzip_member(rows) if raw is None else raw)
    run = make_run()
    run.requests_log = RequestsLog(
        file=log.name,
        sha256=hashlib.sha256(log.read_bytes()).hexdigest(),
        requests=requests or len(rows),
        windows=1,
    )
    path = tmp_path / "run.json"
    path.write_text(run.model_dump_json(), encoding="utf-8")
    return path, log


@pytest.mark.parametrize(
    ("bad", "field", "message"),
    [
        ({"first_token_s": math.nan}, "", "not JSON: NaN is not a number JSON allows"),
        ({"end_s": math.inf}, "", "not JSON: Infinity is not a number JSON allows"),
        ({"first_token_s": "0.2"}, ".first_token_s", "'0.2' is not a finite time (s) or null"),
        ({"first_token_s": 0.5}, ".first_token_s", "0.5 s is before scheduled_s (1.0 s)"),
        ({"last_token_s": 1.1}, ".last_token_s", "1.1 s is before first_token_s (1.2 s)"),
        ({"end_s": 1.9}, ".end_s", "1.9 s is before last_token_s (2.0 s)"),
        ({"sent_s": 1.5}, ".first_token_s", "1.2 s is before sent_s (1.5 s)"),
        (  # sent, so it cannot have ended before it was due
            {"first_token_s": None, "last_token_s": None, "end_s": 0.4, "error": "cancelled"},
            ".end_s",
            "0.4 s is before scheduled_s (1.0 s)",
        ),
        (  # never sent, but not cancelled: a time-out cannot end before it was due
            {
                "sent_s": None,
                "first_token_s": None,
                "last_token_s": None,
                "end_s": 0.4,
                "error": "timeout",
                "status": None,
            },
            ".end_s",
            "0.4 s is before scheduled_s (1.0 s)",
        ),
        (  # never sent, yet answered: nothing can come back for a request not sent
            {"sent_s": None, "first_token_s": None, "error": None},
            ".last_token_s",
            "2.0 for a request never sent (sent_s is null)",
        ),
        (
            {"sent_s": None, "first_token_s": None, "last_token_s": None, "error": None},
            ".status",
            "200 for a request never sent (sent_s is null)",
        ),
        ({"output_tokens": -3}, ".output_tokens", "-3 is not a count of tokens"),
        ({"rate_rps": -1.0}, ".rate_rps", "-1.0 is not a finite rate of at least 0"),
        ({"in_window": 1}, ".in_window", "must be true or false"),
    ],
)
def test_a_tampered_row_exits_2_naming_file_line_and_field(
    tmp_path: Path, bad: dict[str, object], field: str, message: str
) -> None:
    path, log = _write(tmp_path, [_row(), _row(), _row(**bad)])
    for args in (["show", "--requests", str(path)], ["show", "--requests", "--json", str(path)]):
        result = CliRunner().invoke(cli, args, env=WIDE)
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"error: {log}: line 3{field}: {message}")
        assert "NaN" not in result.output.replace("NaN is", "")


def test_warm_up_rows_before_the_window_start_are_fine_and_json_is_strict(
    tmp_path: Path,
) -> None:
    """Times count from the window's start, so a warm-up request's are below zero; a failed
    request's latencies are infinite, which --json writes as "inf", never Infinity."""
    warm = _row(
        in_window=False,
        scheduled_s=-3.0,
        sent_s=-3.0,
        first_token_s=-2.9,
        last_token_s=-2.5,
        end_s=-2.5,
    )
    failed = _row(
        first_token_s=None,
        last_token_s=None,
        end_s=1.5,
        status=503,
        error="http_503",
        output_tokens=0,
    )
    # A window stopped early cancels the requests not yet due: never sent, they end before
    # their scheduled time.
    unsent = _row(
        scheduled_s=4.0, sent_s=None, first_token_s=None, last_token_s=None, end_s=2.1,
        status=None, error="cancelled", output_tokens=None,
    )  # fmt: skip
    path, _ = _write(tmp_path, [warm, _row(), failed, unsent])
    result = CliRunner().invoke(cli, ["show", "--requests", "--json", str(path)], env=WIDE)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output, parse_constant=lambda c: pytest.fail(f"{c} printed"))
    (window,) = data["requests"]
    counts = (window["requests"], window["counted"], window["errors"], window["cancelled"])
    assert counts == (4, 3, 1, 1)
    assert window["ttft_ms"]["p99"] == "inf"


def test_one_endless_line_is_read_only_as_far_as_the_line_bound(tmp_path: Path) -> None:
    """A gzip bomb (32 MiB of one line, 32 KiB compressed): an error at line 1, and the
    reader holds a few KiB, never the line."""
    path, log = _write(tmp_path, [], raw=gzip.compress(b"A" * (32 << 20)), requests=3)
    message = f"error: {log}: line 1: longer than 4096 bytes (the rest of the line was not read)"
    for args in (["show", str(path)], ["show", "--requests", str(path)]):
        result = CliRunner().invoke(cli, args, env=WIDE)
        assert result.exit_code == 2, result.output
        assert result.output.startswith(message)
    run = json.loads(path.read_text(encoding="utf-8"))
    rows = read_request_rows(log, RequestsLog.model_validate(run["requests_log"]))  # hashes
    tracemalloc.start()
    try:
        with pytest.raises(InputError):
            list(rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 << 10, peak


def test_lines_past_the_record_count_are_not_read(tmp_path: Path) -> None:
    path, log = _write(tmp_path, [_row()] * 3, requests=2)
    result = CliRunner().invoke(cli, ["show", "--requests", str(path)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(
        f"error: {log}: line 3: more lines than the run record's 2 (requests_log.requests);"
        " the rest was not read"
    )

"""``tokenwatt report`` end to end: run files in, a report record file out (or exit 2)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.runs_factory import make_run, seed_spec, tuned_run
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.cli import cli
from tokenwatt.errors import InputError
from tokenwatt.records import RunRecord, load_report
from tokenwatt.records_io import load_runs, write_report

TWO = ["report", "runs/vllm-default.json", "runs/vllm-fp8kv.json"]


def _write(folder: Path, run: RunRecord) -> Path:
    path = folder / f"{run.label}.json"
    path.write_text(run.model_dump_json(indent=2), encoding="utf-8")
    return path


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_report_writes_a_valid_record_with_hashes(workdir: Path) -> None:
    a = _write(workdir / "runs", make_run())
    b = _write(workdir / "runs", tuned_run())
    result = CliRunner().invoke(
        cli, ["report", "runs/vllm-default.json", "runs/vllm-fp8kv.json", "--title", "KV test"]
    )
    assert result.exit_code == 0, result.output
    out = workdir / "reports" / "kv-test.json"
    assert f"wrote {Path('reports') / 'kv-test.json'}" in result.output
    # after the configurations table and the capacity conclusion
    # (tests/records/test_report_table.py), the sentence on why each result rate is where
    # it is, one line per configuration
    assert result.stdout.splitlines()[-3:] == [
        "vllm-default: The search found 9 req/s, below a probe at 16 req/s (#4) that missed p99 "
        "TTFT (32,000 ms > 2,000 ms), and both repeats there met the SLO.",
        "vllm-fp8kv: The search found 9 req/s, below a probe at 16 req/s (#4) that missed p99 "
        "TTFT (32,000 ms > 2,000 ms), and both repeats there met the SLO.",
        # both bands: (5100 − 5000) / 2 / 5050 = 0.99% for the widest configuration
        "variance band: stated ±0.99%, measured from the repeats ±0.99%",
    ]
    report = load_report(out)
    assert [f.path for f in report.run_files] == ["runs/vllm-default.json", "runs/vllm-fp8kv.json"]
    assert report.run_files[0].sha256 == hashlib.sha256(a.read_bytes()).hexdigest()
    assert report.run_files[1].sha256 == hashlib.sha256(b.read_bytes()).hexdigest()
    assert report.reproduce.endswith(
        "\n\ntokenwatt report runs/vllm-default.json runs/vllm-fp8kv.json --title 'KV test'"
    )
    assert [c.goodput_tok_s for c in report.configs] == [4572.3, 5056.9]
    assert not list((workdir / "reports").glob(".*.tmp"))

    # an existing report is not replaced without --force
    again = CliRunner().invoke(
        cli, ["report", "runs/vllm-default.json", "runs/vllm-fp8kv.json", "--title", "KV test"]
    )
    assert again.exit_code == 2
    assert "already exists; pass --force" in again.output
    forced = CliRunner().invoke(
        cli,
        [*TWO, "--title", "KV test", "--force"],
    )
    assert forced.exit_code == 0, forced.output


def test_refused_runs_exit_2_and_write_nothing(workdir: Path) -> None:
    _write(workdir / "runs", make_run())
    _write(workdir / "runs", tuned_run(spec=seed_spec(slo={"ttft_p99_ms": 1500.0})))
    out = workdir / "out.json"
    result = CliRunner().invoke(
        cli,
        [*TWO, "--title", "T", "--out", str(out)],
    )
    assert result.exit_code == 2
    assert "error: runs/vllm-fp8kv.json: spec: cannot be compared with runs/vllm-default.json" in (
        result.output
    )
    assert "slo.ttft_p99_ms" in result.output
    assert not out.exists()


def test_bad_run_files_are_named_with_their_fields(workdir: Path) -> None:
    _write(workdir / "runs", make_run())
    (workdir / "runs" / "broken.json").write_text('{"label": ""', encoding="utf-8")
    (workdir / "runs" / "wrong.json").write_text('{"label": "x"}', encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        ["report", "runs/vllm-default.json", "runs/broken.json", "runs/wrong.json", "--title", "T"],
    )
    assert result.exit_code == 2
    assert "error: runs/broken.json: not valid JSON" in result.output
    assert "error: runs/wrong.json: spec: required field is missing" in result.output
    assert not (workdir / "reports").exists()


def test_demo_flag_allows_smoke_runs(workdir: Path) -> None:
    _write(workdir / "runs", make_run(mode="smoke"))
    _write(workdir / "runs", tuned_run(mode="smoke"))
    args = ["report", "runs/vllm-default.json", "runs/vllm-fp8kv.json", "--title", "Demo"]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2 and "smoke-mode run" in refused.output
    result = CliRunner().invoke(cli, [*args, "--id", "demo-kv", "--demo"])
    assert result.exit_code == 0, result.output
    report = load_report(workdir / "reports" / "demo-kv.json")
    assert report.demo
    assert report.reproduce.endswith("--title Demo --id demo-kv --demo")


@pytest.mark.parametrize(
    ("finished", "message"),
    [
        ("2020-01-01T00:00:00Z", "is before started"),
        ("2099-01-01T00:00:00", "must both carry a UTC offset, or neither"),
    ],
)
def test_a_run_that_finished_before_it_started_is_refused(
    workdir: Path, finished: str, message: str
) -> None:
    good = make_run()
    assert good.finished is not None and good.started.tzinfo is not None
    path = _write(workdir / "runs", good)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["finished"] = finished
    path.write_text(json.dumps(data), encoding="utf-8")
    tuned = _write(workdir / "runs", tuned_run())
    files = [f"runs/{path.name}", f"runs/{tuned.name}"]
    result = CliRunner().invoke(cli, ["report", *files, "--title", "T"])
    assert result.exit_code == 2, result.output
    assert f"error: runs/{path.name}: finished: " in result.output
    assert message in result.output
    assert not (workdir / "reports").exists()


@pytest.mark.parametrize(
    ("title", "message"),
    [
        ("Evil \u202eflip", "title: must be plain printable text: it holds the control "
         "character U+202E at position 6"),
        ("x" * 201, "title: must have at most 200 characters"),
    ],
)  # fmt: skip
def test_a_title_the_record_cannot_hold_is_a_clear_error(
    workdir: Path, title: str, message: str
) -> None:
    _write(workdir / "runs", make_run())
    _write(workdir / "runs", tuned_run())
    result = CliRunner().invoke(
        cli, ["report", "runs/vllm-default.json", "runs/vllm-fp8kv.json", "--title", title]
    )
    assert result.exit_code == 2, result.output
    assert f"error: <command line>: {message}" in result.output
    assert "Traceback" not in result.output and not (workdir / "reports").exists()


# ``tokenwatt report --out`` aimed at an input run file, or at a disk that fails: exit 2, the run
# record kept byte for byte, no temporary file left.


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "runs").mkdir()
    _write(tmp_path / "runs", make_run())
    _write(tmp_path / "runs", tuned_run())
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("out", ["runs/vllm-default.json", "runs/../runs/vllm-fp8kv.json"])
def test_out_that_is_an_input_run_is_refused_even_with_force(two_runs: Path, out: str) -> None:
    runs = sorted((two_runs / "runs").iterdir())
    before = {p: p.read_bytes() for p in runs}
    result = CliRunner().invoke(
        cli,
        [
            "report",
            "runs/vllm-default.json",
            "runs/vllm-fp8kv.json",
            "--title",
            "t",
            "--out",
            out,
            "--force",
        ],
    )
    assert result.exit_code == 2, result.output
    assert f"error: {out}: --out: is the run file runs/vllm-" in result.output
    assert "would destroy the run record" in result.output
    assert {p: p.read_bytes() for p in runs} == before


def test_out_through_a_link_to_an_input_is_refused(two_runs: Path) -> None:
    link = two_runs / "link.json"
    link.symlink_to(two_runs / "runs" / "vllm-fp8kv.json")
    paths = [two_runs / "runs" / "vllm-default.json", two_runs / "runs" / "vllm-fp8kv.json"]
    runs = load_runs(paths)
    record = summarise(runs, title="t")
    with pytest.raises(InputError, match="is the run file"):
        write_report(record, link, force=True, inputs=paths)


def test_disk_full_while_writing_is_an_input_error_and_leaves_nothing(
    two_runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [two_runs / "runs" / "vllm-default.json", two_runs / "runs" / "vllm-fp8kv.json"]
    record = summarise(load_runs(paths), title="t")
    real_replace = Path.replace

    def full(self: Path, target: str | os.PathLike[str]) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "replace", full)
    out = two_runs / "reports" / "t.json"
    with pytest.raises(InputError) as exc:
        write_report(record, out, inputs=paths)
    monkeypatch.setattr(Path, "replace", real_replace)
    assert [str(p) for p in exc.value.problems] == [f"{out}: cannot write: No space left on device"]
    assert list((two_runs / "reports").iterdir()) == []

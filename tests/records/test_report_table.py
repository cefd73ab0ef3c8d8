"""``tokenwatt report`` prints the configurations as a table, the capacity conclusion and
the search sentences; ``--json`` prints the same as JSON; the report file is unchanged.

The runs are the seed's two configurations (tests/runs_factory.py): baseline repeats 4,600
and 4,544.6 tok/s at 640 and 634 W, tuned 5,100 and 5,000 tok/s at 620 and 612 W.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.runs_factory import make_run, tuned_run
from tokenwatt.cli import cli
from tokenwatt.records import RunRecord

WIDE = {"COLUMNS": "250"}
CONCLUSION = (
    "vllm-fp8kv (+10.6% goodput) earns no capacity saving because it failed the accuracy "
    "gate by 8.0 points against a 1.0-point threshold. Its goodput gain's 95% interval over "
    "the repeats is +3.3% to +17.6%."
)


def _write(folder: Path, run: RunRecord) -> str:
    path = folder / f"{run.label}.json"
    path.write_text(run.model_dump_json(indent=2), encoding="utf-8")
    return f"runs/{path.name}"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _report(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(cli, ["report", *args, "--title", "KV test"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.stdout, Path("reports/kv-test.json").read_text(encoding="utf-8")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("│ ").split("│")]


def test_report_prints_the_configurations_and_the_conclusion(workdir: Path) -> None:
    runs = [_write(workdir / "runs", make_run()), _write(workdir / "runs", tuned_run())]
    stdout, _ = _report(*runs, "--wide")  # every column; the compact one: tests/cli/test_width.py
    lines = stdout.splitlines()
    assert lines[0] == "wrote reports/kv-test.json (2 configurations)"
    rows = [_cells(line) for line in lines if line.startswith("│")]
    # Goodput intervals: mean ± t(0.975, 1) × s/√2 = 4,572.3 ± 12.706 × 27.7 (baseline),
    # 5,050 ± 12.706 × 50 (tuned), as summarise stores them (one decimal). Tokens per joule:
    # 4,572.3 / 637 W and 5,056.9 / 616 W. Change: 5,056.9 / 4,572.3 − 1 = +10.6%.
    assert rows == [
        [
            "vllm-default",
            "baseline",
            "4,572.3 [4,220.3–4,924.3]",
            "–",
            "7.18",
            "2/2",
            "96.0% (baseline)",
            "baseline",
        ],
        [
            "vllm-fp8kv",
            "tuned",
            "5,056.9 [4,414.7–5,685.3]",
            "+10.6%",
            "8.20",  # two decimals on every row (8.198), not 8.2 beside 7.18
            "2/2",
            "88.0%: fails the 1-point gate (−8.0 points)",
            "none: failed the accuracy gate",
        ],
    ]
    assert lines[-4] == CONCLUSION


def test_one_configuration_is_one(workdir: Path) -> None:
    stdout, _ = _report(_write(workdir / "runs", make_run()))
    assert stdout.splitlines()[0] == "wrote reports/kv-test.json (1 configuration)"
    note = "note: capacity figures assume a fleet of 64 cards (the default; --cards)\n"
    args = ["report", _write(workdir / "runs", make_run()), "--title", "KV test", "--force"]
    result = CliRunner().invoke(cli, args, env=WIDE)
    assert result.exit_code == 0 and result.stderr == note  # --cards not given
    result = CliRunner().invoke(cli, [*args, "--cards", "64"], env=WIDE)
    assert result.exit_code == 0 and note not in result.stderr  # given, even at the default


def test_a_credited_configuration_saves_cards(workdir: Path) -> None:
    runs = [
        _write(workdir / "runs", make_run()),
        _write(workdir / "runs", tuned_run(score_pct=95.5)),
    ]
    stdout, _ = _report(*runs)
    rows = [_cells(line) for line in stdout.splitlines() if line.startswith("│")]
    tuned = [cells for cells in rows if cells[0] == "vllm-fp8kv"]
    # ceil(64 × 4,572.3 / 5,056.9) = ceil(57.87) = 58 cards: 6 saved.
    assert tuned[0][-2:] == [
        "95.5%: passes the 1-point gate (−0.5 points)",
        "saves 6 of 64 cards (58 needed)",
    ]


def test_json_prints_the_same_and_the_report_file_is_unchanged(
    workdir: Path, tmp_path: Path
) -> None:
    runs = [_write(workdir / "runs", make_run()), _write(workdir / "runs", tuned_run())]
    _, text_file = _report(*runs)
    Path("reports/kv-test.json").unlink()
    stdout, json_file = _report(*runs, "--json")
    assert json_file == text_file  # --json changes what is printed, not what is written
    data = json.loads(stdout)
    assert data["file"] == "reports/kv-test.json"
    assert (data["id"], data["title"], data["cards"]) == ("kv-test", "KV test", 64)
    base, tuned = data["configs"]
    assert base == {
        "label": "vllm-default",
        "role": "baseline",
        "goodput_tok_s": 4572.3,
        "result_status": "measured",
        "result_reason": None,
        "goodput_ci_tok_s": {
            "low": pytest.approx(4220.338, abs=1e-3),
            "high": pytest.approx(4924.262, abs=1e-3),
        },
        "goodput_delta_pct": None,
        "tokens_per_joule": pytest.approx((4600 + 4544.6) / (640 + 634)),
        "tokens_per_joule_delta_pct": None,
        "slo_pass_count": 2,
        "repeats": 2,
        "accuracy_score_pct": 96.0,
        "accuracy_gate_passed": None,
        "accuracy": "96.0% (baseline)",
        "cards_saved": None,
        "capacity_credited": None,
        "capacity": "baseline",
    }
    assert tuned["goodput_delta_pct"] == pytest.approx(100 * (5056.9 / 4572.3 - 1))
    # goodput tokens ÷ energy over the repeats (equal 120 s windows)
    tuned_tpj = (5100 + 5000) / (620 + 612)
    assert tuned["tokens_per_joule"] == pytest.approx(tuned_tpj)
    base_tpj = (4600 + 4544.6) / (640 + 634)
    assert tuned["tokens_per_joule_delta_pct"] == pytest.approx(100 * (tuned_tpj / base_tpj - 1))
    assert (tuned["accuracy_gate_passed"], tuned["cards_saved"]) == (False, 0)
    assert tuned["capacity_credited"] is False
    assert data["conclusion"] == CONCLUSION
    assert [e["label"] for e in data["explanations"]] == ["vllm-default", "vllm-fp8kv"]
    assert data["explanations"][0]["why"].startswith("The search found 9 req/s")
    assert data["explanations"][0]["doubt"] is None
    assert data["variance_band_pct"] == pytest.approx(100 * 50 / 5050, rel=1e-12)
    assert data["variance_band_measured_pct"] == pytest.approx(100 * 50 / 5050)
    assert data["band_warning"] is None

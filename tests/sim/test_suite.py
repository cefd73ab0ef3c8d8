"""The simulated engine's suite reader (``tokenwatt/sim/suite.py``) with hostile lines: clear
errors naming file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenwatt.errors import InputError
from tokenwatt.sim.suite import load_suite


def _line(gold: str, item_id: str = "a") -> str:
    return json.dumps({"id": item_id, "question": "q", "prompt": "p", "gold": gold})


@pytest.mark.parametrize("gold", ["NaN", "Infinity", "-inf", "sNaN"])
def test_gold_that_is_not_finite_is_refused(gold: str, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(_line(gold) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_suite(path)
    assert [str(p) for p in exc.value.problems] == [f"{path}: line 1.gold: not a number: {gold!r}"]


def test_line_nested_too_deeply_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(_line("1") + "\n" + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_suite(path)
    assert [str(p) for p in exc.value.problems] == [
        f"{path}: line 2: not a row: nested too deeply, or a number of thousands of digits"
    ]


def test_duplicate_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(_line("1") + "\n" + _line("2", "b") + "\n" + _line("3") + "\n", "utf-8")
    with pytest.raises(InputError) as exc:
        load_suite(path)
    assert [str(p) for p in exc.value.problems] == [f"{path}: line 3.id: duplicate id 'a'"]


def test_sim_help_explains_every_option_and_accuracy_p_is_a_probability() -> None:
    from click.testing import CliRunner

    from tokenwatt.cli import cli

    shown = CliRunner().invoke(cli, ["sim", "--help"])
    assert shown.exit_code == 0
    text = " ".join(shown.output.split())  # click wraps the help text
    assert "--accuracy-p FLOAT RANGE Probability (0 to 1) that it answers a suite prompt" in text
    bad = CliRunner().invoke(cli, ["sim", "--accuracy-p", "1.5"])
    assert bad.exit_code == 2 and "--accuracy-p" in bad.output


def test_a_lone_surrogate_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    line = '{"id": "a", "question": "q", "prompt": "x\\ud800", "gold": "1"}\n'
    odd = '{"id": "b", "prompt": "\\udc00", "answer": "1"}\n'
    path.write_text(line + odd, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_suite(path)
    assert [str(p) for p in exc.value.problems] == [
        f"{path}: line 1.prompt: holds a lone surrogate (\\ud800), not text",
        f"{path}: line 2.prompt: holds a lone surrogate (\\udc00), not text",
        f"{path}: line 2.question: missing, empty or not a string",
        f"{path}: line 2.gold: missing, empty or not a string",
    ]

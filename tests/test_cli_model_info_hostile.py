"""``tokenwatt model-info`` with non-finite or absurd numbers and a config nested too deeply:
exit 2 with a clear message, never a traceback or ``Infinity`` in the JSON output."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenwatt.cli import cli

CONFIG = Path(__file__).resolve().parent / "fixtures" / "qwen3-30b-a3b.config.json"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kv-cache-gib", "nan"], "Invalid value for '--kv-cache-gib': 'nan' is not a number."),
        (["--kv-cache-gib", "inf"], "Invalid value for '--kv-cache-gib': inf is not in the range"),
        (["--kv-cache-gib", "1e308"], "Invalid value for '--kv-cache-gib': 1e+308 is not in"),
        (["--batch", "nan"], "Invalid value for '--batch': 'nan' is not a number."),
        (["--batch", "inf"], "Invalid value for '--batch': inf is not in the range"),
    ],
)
def test_non_finite_numbers_are_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["model-info", str(CONFIG), "--json", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_largest_accepted_values_give_finite_json() -> None:
    result = CliRunner().invoke(
        cli, ["model-info", str(CONFIG), "--json", "--kv-cache-gib", "1e6", "--batch", "1e7"]
    )
    assert result.exit_code == 0, result.output
    assert "Infinity" not in result.output and "NaN" not in result.output


def test_config_nested_too_deeply_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    result = CliRunner().invoke(cli, ["model-info", str(path)])
    assert result.exit_code == 2, result.output
    assert f"error: {path}: not valid JSON: arrays or objects are nested too deeply" in (
        result.output
    )

"""``tokenwatt model-info``: table and JSON output, bad files exit 2 naming file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenwatt.cli import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QWEN3 = str(FIXTURES / "qwen3-30b-a3b.config.json")
LLAMA2 = str(FIXTURES / "llama-2-7b.config.json")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["model-info", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_for_qwen3_bf16_kv_with_capacity() -> None:
    code, out, _ = run(QWEN3, "--kv-cache-gib", "40.74", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["geometry"]["layers"] == 48
    assert data["geometry"]["kv_heads"] == 4
    assert data["geometry"]["head_dim"] == 128
    assert data["geometry"]["moe"]["num_experts"] == 128
    assert data["parameters"]["total"] == 30_532_122_624
    assert data["parameters"]["active_per_token"] == 3_353_032_704
    assert data["kv_dtype"] == "bf16"
    assert data["kv_bytes_per_token"] == 98_304
    assert data["kv_capacity_tokens"] == 444_976
    assert data["weight_dtype"] == "bf16" and data["weight_dtype_from"] == "config"
    assert data["weight_bytes"]["total"] == 2 * 30_532_122_624


def test_fp8_kv_doubles_capacity_and_batch_gives_step_bytes() -> None:
    code, out, _ = run(
        QWEN3,
        "--kv-dtype",
        "fp8",
        "--weight-dtype",
        "fp8",
        "--kv-cache-gib",
        "40.74",
        "--batch",
        "145",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["kv_bytes_per_token"] == 49_152
    assert data["kv_capacity_tokens"] == 889_968  # 55,623 FP8 blocks of 16 in 40.74 GiB
    assert data["weight_dtype_from"] == "option"
    assert data["weight_bytes"]["total"] == 29_896_998_912 + 2 * 635_123_712
    assert data["distinct_experts"] == pytest.approx(127.99, abs=0.01)
    assert data["weights_bytes_per_step"] == pytest.approx(30.54e9, rel=1e-3)
    assert data["weight_bytes"]["notes"]


def test_table_shows_the_figures() -> None:
    code, out, _ = run(QWEN3, "--kv-cache-gib", "40.74")
    assert code == 0
    for text in (
        "qwen3_moe",
        "98,304 B",
        "444,976 tokens",
        "30.53 B",
        "3.35 B",
        "128, 8 per token",
    ):
        assert text in out


def test_dense_model_table_and_json() -> None:
    code, out, _ = run(LLAMA2, "--json")
    data = json.loads(out)
    assert code == 0
    assert data["geometry"]["moe"] is None
    assert data["parameters"]["total"] == data["parameters"]["active_per_token"] == 6_738_415_616
    assert data["kv_bytes_per_token"] == 524_288
    assert data["kv_capacity_tokens"] is None
    code, out, _ = run(LLAMA2)
    assert code == 0 and "524,288 B" in out and "experts" not in out


def test_missing_field_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    config = json.loads(Path(QWEN3).read_text())
    del config["num_experts_per_tok"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, out, err = run(str(path))
    assert code == 2
    assert out == ""
    assert f"{path}: num_experts_per_tok: missing" in err


def test_invalid_json_and_absent_file_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"num_hidden_layers": 48,')
    code, _, err = run(str(path))
    assert code == 2 and str(path) in err and "not valid JSON" in err
    code, _, err = run(str(tmp_path / "absent.json"))
    assert code == 2 and "cannot read" in err


def test_unknown_dtype_is_a_usage_error() -> None:
    code, _, err = run(QWEN3, "--kv-dtype", "int3")
    assert code == 2 and "int3" in err


# ``tokenwatt model-info`` with non-finite or absurd numbers and a config nested too deeply: exit
# 2 with a clear message, never a traceback or ``Infinity`` in the JSON output.


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


def test_a_tiny_model_is_shown_in_megabytes(tmp_path: Path) -> None:
    config = json.loads(Path(LLAMA2).read_text())
    config.update(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                  num_key_value_heads=4, num_hidden_layers=2, vocab_size=2048)  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, out, _ = run(str(path), "--json")
    weights = json.loads(out)["weight_bytes"]["total"]
    assert code == 0 and weights < 1e7
    code, out, _ = run(str(path))
    assert code == 0 and "0.00 GB" not in out
    assert f"{weights / 1e6:.2f} MB ({weights / 2**20:.2f} MiB)" in out

"""``tokenwatt cloud types | instances | terminate`` against the API double."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from lambda_double import DoubleInstance, LambdaDouble

from tokenwatt.cli import cli
from tokenwatt.cloud.ledger import read_ledger, record_launch


@pytest.fixture
def double():
    with LambdaDouble() as d:
        yield d


def invoke(double: LambdaDouble, tmp_path: Path, *args: str):
    key = tmp_path / "api.key"
    key.write_text(double.api_key)
    common = ["--api-key-file", str(key), "--api-url", double.url, "--api-max-wait-s", "0.01"]
    result = CliRunner().invoke(cli, ["cloud", *args, *common])
    assert double.api_key not in result.output
    return result


def test_types_table(double, tmp_path):
    result = invoke(double, tmp_path, "types")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    h100 = next(line for line in lines if "gpu_1x_h100_sxm5" in line)
    assert "3.29" in h100 and "us-west-3, us-south-1" in h100
    eight = next(line for line in lines if "gpu_8x_h100_sxm5" in line)
    assert "23.92" in eight and "none" in eight


def test_instances_lists_ours_and_the_ledger(double, tmp_path):
    double.instances["i1"] = DoubleInstance("i1", "tokenwatt-s1", "gpu_1x_a10", "us-east-1", "k")
    double.instances["i2"] = DoubleInstance("i2", "someone-else", "gpu_1x_a10", "us-east-1", "k")
    ledger = tmp_path / "ledger.jsonl"
    record_launch(
        ledger, instance_id="i9", provider="lambda", type_name="gpu_1x_a10",
        region="us-east-1", name="tokenwatt-s0",
    )  # fmt: skip
    result = invoke(double, tmp_path, "instances", "--ledger", str(ledger))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "i1  tokenwatt-s1  booting  gpu_1x_a10  us-east-1  provider",
        "i9  tokenwatt-s0  gone  gpu_1x_a10  us-east-1  ledger",
    ]


def test_terminate_confirms_and_notes_it_in_the_ledger(double, tmp_path):
    double.instances["i1"] = DoubleInstance("i1", "tokenwatt-s1", "gpu_1x_a10", "us-east-1", "k")
    ledger = tmp_path / "ledger.jsonl"
    record_launch(
        ledger, instance_id="i1", provider="lambda", type_name="gpu_1x_a10",
        region="us-east-1", name="tokenwatt-s1",
    )  # fmt: skip
    args = ["terminate", "i1", "--ledger", str(ledger), "--poll-s", "0.01"]
    result = invoke(double, tmp_path, *args)
    assert result.exit_code == 0, result.output
    assert "i1 terminated (confirmed)" in result.output
    assert double.instances["i1"].status == "terminated"
    assert read_ledger(ledger)[0].terminated_at is not None


def test_terminate_never_confirmed_exits_3(double, tmp_path):
    double.instances["i1"] = DoubleInstance("i1", "tokenwatt-s1", "gpu_1x_a10", "us-east-1", "k")
    double.terminate_never = True
    args = ["terminate", "i1", "--poll-s", "0.01", "--timeout-s", "0.2"]
    result = invoke(double, tmp_path, *args, "--ledger", str(tmp_path / "l"))
    assert result.exit_code == 3
    assert "instance i1 could not be confirmed terminated" in result.output


def test_missing_key_file_exits_2(double, tmp_path):
    result = CliRunner().invoke(
        cli, ["cloud", "types", "--api-key-file", str(tmp_path / "nope"), "--api-url", double.url]
    )
    assert result.exit_code == 2
    assert "cannot read the API key file" in result.output

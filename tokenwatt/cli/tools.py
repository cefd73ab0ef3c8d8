"""The tool commands of the command line: ``sim``, ``suites``, ``schema`` and ``model-info``.

Registered on the group in :mod:`tokenwatt.cli.group` (kept thin); each imports its stage lazily
so that ``tokenwatt --help`` stays instant, and errors become exit statuses through
:func:`tokenwatt.cli.exits.errors_to_exit` as everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tokenwatt.cli.exits import errors_to_exit
from tokenwatt.errors import InputError


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port (0: a free one).",
)
@click.option(
    "--profile",
    default="bf16-kv",
    show_default=True,
    help="Simulated configuration: bf16-kv, or fp8-kv (twice the KV cache, slower steps).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of its behaviour.")
@click.option("--model", default="tokenwatt-sim", show_default=True, help="Model name served.")
@click.option(
    "--accuracy-suite",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="JSON Lines suite whose prompts it answers (right with probability --accuracy-p).",
)
@click.option(
    "--accuracy-p",
    default=0.96,
    show_default=True,
    type=click.FloatRange(min=0.0, max=1.0),
    help="Probability (0 to 1) that it answers a suite prompt right; its expected "
    "accuracy score. Set it lower on one configuration to see the accuracy gate fail it.",
)
@click.option(
    "--time-scale",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0.01, max=1000.0),
    help="Multiply every step time (2: same behaviour at half the rates, half the CPU).",
)
@errors_to_exit
def sim(
    host: str,
    port: int,
    profile: str,
    seed: int,
    model: str,
    accuracy_suite: Path | None,
    accuracy_p: float,
    time_scale: float,
) -> None:
    """Serve a simulated engine (OpenAI-compatible API, /metrics) for trying the pipeline."""
    from tokenwatt import sim as simulator

    server = simulator.make_server(
        profile,
        seed=seed,
        model=model,
        accuracy_suite=accuracy_suite,
        accuracy_p=accuracy_p,
        time_scale=time_scale,
    )
    simulator.serve(server, host, port)


@click.group()
def suites() -> None:
    """Accuracy suites: fetch GSM8K and build a seeded 5-shot suite file."""


@suites.command("fetch")
@click.argument("name", type=click.Choice(["gsm8k"]))
@click.option(
    "--dest",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("data/gsm8k"),
    show_default=True,
    help="Folder to download test.jsonl and train.jsonl into.",
)
@click.option(
    "--base-url",
    default=None,
    help="A mirror of grade_school_math/data (files are checked against the same pinned SHA-256).",
)
@errors_to_exit
def suites_fetch(name: str, dest: Path, base_url: str | None) -> None:
    """Download a suite's source files, verified against pinned SHA-256 hashes."""
    from tokenwatt.collect import GSM8K_BASE_URL, fetch_gsm8k

    for got in fetch_gsm8k(dest, base_url=base_url or GSM8K_BASE_URL):
        how = "already present" if got.already_present else "downloaded"
        click.echo(f"{got.path}: {how}, SHA-256 {got.sha256} verified")


@suites.command("build")
@click.argument("name", type=click.Choice(["gsm8k"]))
@click.option(
    "--test",
    "test_path",
    type=click.Path(path_type=Path),
    required=True,
    help="GSM8K test split (JSON Lines).",
)
@click.option(
    "--train",
    "train_path",
    type=click.Path(path_type=Path),
    required=True,
    help="GSM8K train split (JSON Lines); five exemplars are drawn from it.",
)
@click.option("--n", "n", type=int, default=200, show_default=True, help="Items to sample.")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed.")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Suite file to write.")
@errors_to_exit
def suites_build(
    name: str, test_path: Path, train_path: Path, n: int, seed: int, out: Path
) -> None:
    """Build a seeded 5-shot suite file (JSON Lines: id, question, prompt, gold)."""
    from tokenwatt.collect import build_suite_file

    built = build_suite_file(test_path, train_path, n, seed, out)
    click.echo(
        f"{built.path}: {built.items} items, SHA-256 {built.sha256} "
        f"(test {built.test_sha256[:12]}, train {built.train_sha256[:12]}, seed {seed})"
    )


@click.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("schemas"),
    show_default=True,
    help="Folder for report, run, spec and session .schema.json files.",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when the files are stale.")
@errors_to_exit
def schema(out_dir: Path, check: bool) -> None:
    """Export the JSON Schema of every record (report, run, spec, session file)."""
    from tokenwatt.records_io import export_schemas

    result = export_schemas(out_dir, check=check)
    for path in result.written:
        click.echo(f"wrote {path}")
    if check or not result.written:
        click.echo(f"{len(result.current)} schema files are current in {out_dir}")


class _FiniteFloat(click.FloatRange):
    """A float in a range that is also finite: ``nan`` passes click's range check."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


_WEIGHT_DTYPES = (
    "bf16",
    "fp16",
    "fp32",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "int8",
    "int4",
    "awq",
    "gptq",
)
_KV_DTYPES = ("bf16", "fp16", "fp32", "fp8", "fp8_e4m3", "fp8_e5m2")


@click.command("model-info")
@click.argument("config_path", metavar="CONFIG.json", type=click.Path(path_type=Path))
@click.option(
    "--weight-dtype",
    type=click.Choice(_WEIGHT_DTYPES),
    default=None,
    help="Weight dtype [default: from the config's quantization_config/torch_dtype, else bf16].",
)
@click.option(
    "--kv-dtype",
    type=click.Choice(_KV_DTYPES),
    default="bf16",
    show_default=True,
    help="KV-cache dtype.",
)
@click.option(
    "--kv-cache-gib",
    type=_FiniteFloat(min=0, max=1e6),
    default=None,
    help="KV-cache size (GiB, as vLLM logs it) to turn into a capacity in tokens.",
)
@click.option(
    "--batch",
    type=_FiniteFloat(min=0, max=1e7),
    default=None,
    help="Running batch: weights read per decode step (MoE: expected distinct experts).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@errors_to_exit
def model_info_cmd(
    config_path: Path,
    weight_dtype: str | None,
    kv_dtype: str,
    kv_cache_gib: float | None,
    batch: float | None,
    as_json: bool,
) -> None:
    """Geometry, parameters, weight bytes, KV bytes per token and KV capacity of a model."""

    from tokenwatt import analysis
    from tokenwatt.records import read_json

    config = read_json(config_path, InputError)
    info = analysis.model_info(
        config,
        str(config_path),
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        kv_cache_gib=kv_cache_gib,
        batch=batch,
    )
    if as_json:
        from tokenwatt.cli.terminal import json_text

        click.echo(json_text(info.as_dict()))
        return
    from rich.table import Table

    from tokenwatt.cli.terminal import console

    table = Table(title="model-info", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    for label, value in analysis.info_rows(info):
        table.add_row(label, value)
    console().print(table)

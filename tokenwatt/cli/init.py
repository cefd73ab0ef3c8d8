"""``tokenwatt init``: write a commented starting spec from what a running server reports."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import NoReturn

import click

from tokenwatt.text import terminal_safe

SCHEMA_FILE = Path("schemas") / "spec.schema.json"
"""Where ``tokenwatt schema`` writes the spec's JSON Schema (from the current folder)."""


def _name(model: str) -> str:
    """A spec name from a served model id: ``Qwen/Qwen3-8B`` → ``qwen3-8b``."""
    tail = model.rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9._-]+", "-", tail).strip("-._") or "spec"


@click.command("init")
@click.option("--endpoint", required=True, help="The running server's URL (with or without /v1).")
@click.option(
    "--model-config",
    type=click.Path(dir_okay=False, path_type=Path, exists=True),
    help="The model's Hugging Face config.json: vocabulary size, and the geometry for MBU.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The spec file to write; default specs/NAME.spec.yaml.",
)
@click.option("--name", help="The spec's name; default from the served model's id.")
@click.option(
    "--api-key-env", help="Environment variable holding the server's API key, if it needs one."
)
@click.option("--force", is_flag=True, help="Replace an existing file.")
def init_command(
    endpoint: str,
    model_config: Path | None,
    out: Path | None,
    name: str | None,
    api_key_env: str | None,
    force: bool,
) -> None:
    """Write a commented spec from what the server at --endpoint reports.

    The served model (/v1/models), its context length, the engine's name and version and the
    metric names at /metrics go into the spec; SLO limits and windows are starting points.
    Board power is asked for only when NVML or AMD SMI opens on this machine (else power
    source none, saying why). The written spec loads and validates; an existing file is kept
    unless --force.
    """
    import yaml
    from pydantic import ValidationError

    from tokenwatt.collect import (
        board_facts,
        check_endpoint_flag,
        model_config_facts,
        read_server,
        spec_text,
    )
    from tokenwatt.errors import EngineError, InputError
    from tokenwatt.files import atomic_write_text
    from tokenwatt.records import Spec, problems_from

    try:
        check_endpoint_flag(endpoint)  # before any request: no credentials in the URL
    except InputError as exc:
        _refuse(str(exc))
    api_key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and api_key is None:
        _refuse(f"--api-key-env: the variable {api_key_env} is not set")
    try:
        facts = read_server(endpoint, api_key)
    except EngineError as exc:
        _refuse(str(exc))
    if not facts.info.served_models:
        _refuse(f"{endpoint}: /v1/models lists no model")
    spec_name = name or _name(facts.info.served_models[0])
    path = out or Path("specs") / f"{spec_name}.spec.yaml"
    try:
        if path.exists() and not force:
            _refuse(f"{path}: already exists; pass --force to replace it")
    except OSError as exc:  # a name from the server the file system refuses (too long)
        _refuse(f"{_shown(path)}: cannot write: {exc.strerror or exc}; pass --name or --out")
    if model_config is not None:
        try:
            facts.vocab_size, facts.config_path = model_config_facts(model_config, path)
        except ValueError as exc:
            _refuse(str(exc))
    board_facts(facts)
    schema = Path(os.path.relpath(SCHEMA_FILE.resolve(), path.resolve().parent)).as_posix()
    text = spec_text(facts, endpoint=endpoint, name=spec_name, schema=schema)
    if api_key_env:
        text = text.replace(
            "  ignore_eos: true\n", f"  ignore_eos: true\n  api_key_env: {api_key_env}\n"
        )
    try:
        Spec.model_validate(yaml.safe_load(text))
    except yaml.YAMLError as exc:  # a bug here, never the user's: say what failed
        _refuse(f"{_shown(path)}: the spec written would not be YAML: {exc}")
    except ValidationError as exc:
        _refuse(*(str(p) for p in problems_from(str(path), exc)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    except OSError as exc:
        _refuse(f"{_shown(path)}: cannot write: {exc.strerror or exc}")
    click.echo(terminal_safe(f"wrote {path} ({facts.info.served_models[0]} on {endpoint})"))
    if facts.board is None:
        # Said once, here: the spec then asks for no meter, so collect repeats nothing.
        click.echo(
            "note: power not measured (hardware.adapter none, power.source none): no GPU "
            "library opened on this machine; set both on the GPU box",
            err=True,
        )
        for reason in facts.board_reasons:
            click.echo(f"  {terminal_safe(reason)}", err=True)


def _shown(path: Path) -> str:
    """A path for a message, its middle cut when long (a name from a server may be)."""
    text = str(path)
    return text if len(text) <= 120 else f"{text[:60]}…{text[-40:]}"


def _refuse(*lines: str) -> NoReturn:
    """Print each line as ``error: …`` on stderr, made terminal-safe (server text may carry
    escape sequences), and exit with status 2: nothing was written."""
    for line in lines:
        click.echo(f"error: {terminal_safe(line)}", err=True)
    sys.exit(2)

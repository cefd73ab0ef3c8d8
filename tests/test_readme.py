"""The README documents every command, and its quick start is exactly two commands."""

from __future__ import annotations

import re
from pathlib import Path

import click

from tokenwatt.cli import cli

README = Path(__file__).resolve().parents[1] / "README.md"


def _command_names(group: click.Group, prefix: str = "tokenwatt") -> list[str]:
    names = []
    for name, command in sorted(group.commands.items()):
        full = f"{prefix} {name}"
        if isinstance(command, click.Group):
            names += _command_names(command, full)
        else:
            names.append(full)
    return names


def test_every_command_is_in_the_readme_and_has_help() -> None:
    text = README.read_text(encoding="utf-8")
    names = _command_names(cli)
    assert "tokenwatt build" in names and "tokenwatt suites build" in names
    missing = [n for n in names if f"`{n}" not in text]
    assert not missing, f"README does not mention: {missing}"
    for name, command in cli.commands.items():
        assert command.help, f"tokenwatt {name} has no help text"


def test_quick_start_is_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    assert all(len(b.strip().splitlines()) == 1 for b in blocks)
    assert "tokenwatt build" in blocks[0] and "mkdocs build --strict" in blocks[0]
    assert "[test]" in blocks[1] and "pytest" in blocks[1]

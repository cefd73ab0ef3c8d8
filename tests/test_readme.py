"""The README documents every command, and its quick start is exactly two commands."""

from __future__ import annotations

import re
import shlex
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


def _sh_commands(section: str) -> list[list[str]]:
    """Each ``tokenwatt ...`` command of the section's sh blocks, continuation lines joined,
    split as the shell would (``&& mkdocs ...`` cut off)."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("&&")[0].strip()
            if line.startswith("tokenwatt "):
                out.append(shlex.split(line.rstrip("&").strip()))
    return out


def test_measure_your_own_server_uses_real_commands_and_options() -> None:
    """Every command in "Measure your own server" exists and accepts each option it is
    given (the walk-through itself was run against `tokenwatt sim`)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Measure your own server", 1)[1].split("\n## ", 1)[0]
    commands = _sh_commands(section)
    assert [c[1] for c in commands] == [
        *("collect", "show", "show", "init", "collect", "collect", "collect", "report"),
        *("build", "collect"),
    ]
    for argv in commands:
        command = cli.commands[argv[1]]
        known = {o for p in command.params for o in getattr(p, "opts", [])}
        used = [a.split("=")[0] for a in argv[2:] if a.startswith("--")]
        assert set(used) <= known, (argv, set(used) - known)
    for name in ("`tokenwatt session FILE.yaml`", "`tokenwatt cloud session`", "--engine-cmd"):
        assert name in section

"""The README documents every command, and its quick start is exactly two commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import yaml

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
        *("build", "collect", "collect", "collect"),
    ]
    for argv in commands:
        command = cli.commands[argv[1]]
        known = {o for p in command.params for o in getattr(p, "opts", [])}
        used = [a.split("=")[0] for a in argv[2:] if a.startswith("--")]
        assert set(used) <= known, (argv, set(used) - known)
    for name in ("`tokenwatt session FILE.yaml`", "`tokenwatt cloud session`", "--engine-cmd"):
        assert name in section


MKDOCS_PORT = 8000
"""Where ``mkdocs serve`` (and ``python -m http.server``) listen unless told otherwise."""


def test_no_two_servers_of_one_walk_through_share_a_port() -> None:
    """In each section, the servers started in the background (``tokenwatt sim --port N``,
    in sh blocks or inline) and the site's preview (``mkdocs serve``: port 8000) use
    different ports; the gpu-box examples are another machine's and do not count."""
    text = README.read_text(encoding="utf-8")
    checked = 0
    for section in re.split(r"\n## ", text):
        ports = [int(p) for p in re.findall(r"tokenwatt sim --port (\d+)[^`\n]*&", section)]
        if "mkdocs serve" in section:
            ports.append(MKDOCS_PORT)
        assert len(ports) == len(set(ports)), (section.splitlines()[0], ports)
        checked += len(ports) > 1
    assert checked >= 2  # the demo and the walk-through both start a simulator and a site


def test_demo_clean_up_removes_everything_the_demo_writes() -> None:
    """The demo's clean-up names the run records, their per-request files and engine logs,
    the session's smoke runs and the demo reports (what `collect`, `session` and `report`
    write), and git-ignores none of it."""
    text = README.read_text(encoding="utf-8")
    section = text.split("### Try it without a GPU", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```sh\n(.*?)```", section, flags=re.S)[-1]
    for written in (
        "runs/sim-*.json",
        "runs/sim-*.requests.jsonl.gz",
        "runs/sim-*.engine.log",
        "runs/smoke/",
        "reports/simulated-kv-cache-demo*.json",
    ):
        assert written in block, written
    # The report glob matches the ids `report` gives the demo's two titles.
    from fnmatch import fnmatch

    from tokenwatt.analysis.summarise import slug

    session = yaml.safe_load((README.parent / "specs" / "sim-session.yaml").read_text())
    for title in (session["title"], re.findall(r"--title '([^']+)' --demo", section)[0]):
        assert fnmatch(f"reports/{slug(title)}.json", "reports/simulated-kv-cache-demo*.json")
    ignored = (README.parent / ".gitignore").read_text(encoding="utf-8").split()
    assert not [line for line in ignored if line.strip("/").startswith("runs")]


def test_the_readme_llamacpp_python_route_gives_the_tiny_models_vocabulary() -> None:
    """The `collect` command that serves `tests/engines/tiny_model.py`'s model through
    xllamacpp parses as collect's arguments and passes `--vocab-size` equal to that model's
    vocabulary: without it token ids are drawn below 32,000 and llama.cpp refuses every
    request (HTTP 400 "Prompt contains invalid tokens"). The run itself is
    tests/engines/test_engine_launch_real.py's."""
    import inspect

    from tests.engines.tiny_model import make_tiny_model

    text = README.read_text(encoding="utf-8")
    section = text.split("## Measure your own server", 1)[1].split("\n## ", 1)[0]
    (argv,) = [c for c in _sh_commands(section) if "serve_llamacpp.py" in " ".join(c)]
    command = cli.commands["collect"]
    ctx = command.make_context("collect", argv[2:])
    vocab = inspect.signature(make_tiny_model).parameters["vocab"].default
    assert ctx.params["vocab_size"] == vocab == 2048

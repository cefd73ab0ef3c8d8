"""collect never prints: what the user sees goes through the run's reporter
(``collect/measure/progress.py``), which the command line renders (ARCHITECTURE.md).

Each collect module is read as Python: no call of ``print`` or ``input``, no use of
``sys.stdout``/``sys.stderr`` (nor ``sys.__stdout__``…), and no import of the terminal
libraries (rich, click). A reviewer still reads the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

COLLECT = Path(__file__).resolve().parents[2] / "tokenwatt" / "collect"
TERMINAL_LIBRARIES = {"rich", "click"}
STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}


def _modules() -> list[Path]:
    return sorted(COLLECT.rglob("*.py"))


def _problems(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        called = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if called and node.func.id in ("print", "input"):  # type: ignore[attr-defined]
            found.append(f"calls {node.func.id}() on line {node.lineno}")  # type: ignore[attr-defined]
        # sys.stderr, not a finished subprocess's captured .stdout
        is_sys = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        if is_sys and node.value.id == "sys" and node.attr in STREAMS:  # type: ignore[attr-defined]
            found.append(f"uses sys.{node.attr} on line {node.lineno}")  # type: ignore[attr-defined]
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "sys" and {a.name for a in node.names} & STREAMS:
                found.append(f"imports a stream from sys on line {node.lineno}")
            if node.module.split(".")[0] in TERMINAL_LIBRARIES:
                found.append(f"imports {node.module} on line {node.lineno}")
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in TERMINAL_LIBRARIES:
                    found.append(f"imports {alias.name} on line {node.lineno}")
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(COLLECT)))
def test_collect_module_does_not_print(path: Path) -> None:
    assert _problems(ast.parse(path.read_text(encoding="utf-8"))) == []


def test_the_check_finds_what_it_looks_for() -> None:
    code = "import sys\nfrom rich.console import Console\nprint(1)\nsys.stderr.write('x')\n"
    assert len(_problems(ast.parse(code))) == 3
    assert _problems(ast.parse("done = run()\nsha = done.stdout.strip()\n")) == []


def test_there_are_collect_modules() -> None:
    assert len(_modules()) >= 30

"""analysis/ stays pure: no I/O modules, no other stage but records (ARCHITECTURE.md, "The stages").

The check is on imports and on calls of the I/O builtins; a reviewer still reads the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ANALYSIS = Path(__file__).resolve().parents[2] / "tokenwatt" / "analysis"
IO_MODULES = {
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "subprocess",
    "socket",
    "asyncio",
    "httpx",
    "aiohttp",
    "urllib",
    "requests",
    "sys",
}
IO_CALLS = {"open", "print", "input"}


def _modules() -> list[Path]:
    return sorted(ANALYSIS.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_analysis_module_is_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            assert top not in IO_MODULES, f"{path.name} imports {name} (I/O)"
            if top == "tokenwatt":
                stage = name.split(".")[1] if "." in name else ""
                # errors is the package-wide exception hierarchy, not a stage; text is pure
                # string functions (outside text made safe), which records use too
                allowed = ("records", "analysis", "errors", "text")
                assert stage in allowed, f"{path.name} imports {name}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in IO_CALLS, f"{path.name} calls {node.func.id}()"


def test_there_are_analysis_modules() -> None:
    assert len(_modules()) >= 5

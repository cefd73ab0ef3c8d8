"""The console script's entry (`tokenwatt.console`): a Ctrl-C while Python loads the command
line ends with one line and status 130, never a traceback."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from types import ModuleType

import pytest

from tokenwatt import console


class _Interrupting(importlib.abc.MetaPathFinder):
    """Raises KeyboardInterrupt where the import of the command line would run: a Ctrl-C
    that lands while Python loads it."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        if fullname == "tokenwatt.cli.group":
            raise KeyboardInterrupt
        return None


def test_ctrl_c_while_the_command_line_loads_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m == "tokenwatt.cli" or m.startswith("tokenwatt.cli.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Interrupting(), *sys.meta_path])
    with pytest.raises(SystemExit) as info:
        console.main()
    assert info.value.code == 130
    assert capsys.readouterr().err == "interrupted (Ctrl-C); nothing more was done\n"

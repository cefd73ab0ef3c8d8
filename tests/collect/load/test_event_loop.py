"""The load's event loop (:mod:`tokenwatt.collect.load.event_loop`): uvloop by default, asyncio's
own when asked for or when uvloop is not installed, and an unknown kind refused before any
loop starts."""

from __future__ import annotations

import asyncio
import inspect
import sys

import pytest

from tokenwatt.collect.load.event_loop import run_load

uvloop = pytest.importorskip("uvloop")  # a dependency but on Windows


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_the_load_runs_on_uvloop_by_default_and_on_asyncio_when_asked() -> None:
    assert issubclass(run_load(_loop_type()), uvloop.Loop)
    on_asyncio = run_load(_loop_type(), "asyncio")
    assert not issubclass(on_asyncio, uvloop.Loop)
    assert issubclass(on_asyncio, asyncio.BaseEventLoop)


def test_without_uvloop_installed_the_load_runs_on_asyncio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    assert not issubclass(run_load(_loop_type()), uvloop.Loop)


def test_what_the_load_returns_or_raises_comes_back() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise KeyError("the load's own fault")

    with pytest.raises(KeyError, match="the load's own fault"):
        run_load(fails())


def test_an_unknown_loop_is_refused_and_its_coroutine_never_left_unawaited() -> None:
    coro = _loop_type()
    with pytest.raises(ValueError, match="uvloop, asyncio: 'trio'"):
        run_load(coro, "trio")  # type: ignore[arg-type]
    assert inspect.getcoroutinestate(coro) == "CORO_CLOSED"  # no loop ran it, nor will

"""A request whose task is cancelled before its first step (a stop in the same loop turn as
its dispatch) never runs its own handler: the window marks it cancelled by the client
(:meth:`~tokenwatt.collect.load.window_state.WindowState.close_unstarted`), never an
unfinished request with no error (which the summary would count as a ``no_token`` failure)."""

from __future__ import annotations

import asyncio

from loadgen_helpers import config

from tokenwatt.collect.load.http import open_session
from tokenwatt.collect.load.sends import send_wait
from tokenwatt.collect.load.window_state import WindowState
from tokenwatt.records import RequestResult


async def test_a_task_cancelled_before_it_ran_is_marked_cancelled_and_counted_ended() -> None:
    http = open_session(4)
    try:
        state = WindowState(config("http://127.0.0.1:9/v1"), http)
        res = RequestResult(scheduled_s=0.0, in_window=True, prompt_tokens=3, max_tokens=4)
        state.add(res)
        task = asyncio.get_running_loop().create_task(state.request(res, b"{}", send_wait("plain")))
        task.cancel()  # before its first step
        await asyncio.gather(task, return_exceptions=True)
        assert res.error is None and res.finished_s is None  # its handler never ran
        state.close_unstarted()
        assert res.error == "cancelled" and res.finished_s is not None
        assert state.window_pending == 0 and state.errors == 1
        state.close_unstarted()  # once only
        assert state.errors == 1
    finally:
        await http.close()

"""The remote log as labelled lines: whole lines only, read from an offset that only moves
past whole lines (so a read cut off by an SSH drop is repeated, never lost or doubled)."""

from __future__ import annotations

from tokenwatt.cloud.remote_stream import SESSION, Labeller, LineReader


def test_only_whole_lines_are_passed_on_and_the_offset_stops_at_the_last_newline() -> None:
    reader = LineReader()
    assert reader.feed(b"one\ntw", 0) == ["one"]
    assert reader.offset == 4
    # the next read starts at the unfinished line's beginning
    assert reader.feed(b"two\r\nthree\n", 4) == ["two", "three"]
    assert reader.offset == 4 + 11
    assert reader.rest() is None


def test_a_stale_read_from_another_offset_is_ignored() -> None:
    reader = LineReader()
    reader.feed(b"a\nb\n", 0)
    assert reader.feed(b"b\nc\n", 2) == []  # read before the previous one was counted
    assert reader.offset == 4
    assert reader.feed(b"c\nd", 4) == ["c"]
    assert reader.rest() == "d"


def test_lines_take_the_label_of_the_step_they_follow_and_failures_are_collected() -> None:
    label = Labeller()
    out = [
        label(line)
        for line in [
            "starting",
            "session [1/3] a: smoke run -> runs/smoke/a.json",
            "a line of a's collect",
            "session [2/3] b: smoke run -> runs/smoke/b.json",
            "session: b: smoke run failed (collect exited with status 1)",
            "session [3/3] b: skipped (its smoke run failed)",
            "session: done (1 run records, 1 failed)",
            "failed: b: smoke run failed (collect exited with status 1)",
        ]
    ]
    assert out == [SESSION, "a", "a", "b", "b", "b", SESSION, SESSION]
    assert label.failed == ["b"]


def test_a_session_stopped_by_a_signal_fails_the_configuration_it_stopped() -> None:
    label = Labeller()
    label("session [1/2] a: quick run -> runs/a.json")
    assert label("session stopped by SIGTERM; no further configuration was run") == SESSION
    assert label.failed == ["a"]

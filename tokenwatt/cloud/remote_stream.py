"""The remote session's output as lines with their configuration's label.

The box writes ``tokenwatt session``'s output to a log file; the local side reads it from a
byte offset. Only whole lines are passed on, and the offset only moves past whole lines, so
a read cut off by an SSH drop is read again from the start of its unfinished line after the
reconnection: no line is lost or repeated.

Labels come from the session's own progress lines (:mod:`tokenwatt.collect.session`):
``session [N/M] LABEL: ...`` starts a configuration's step, ``session: done (...)`` ends the
last; ``failed: LABEL: why`` (the summary) and ``session: LABEL: ... failed ...`` name a
failed configuration, and ``session stopped by SIGNAL`` fails the one it stopped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SESSION = "session"
"""The label of lines that belong to no configuration (before the first, after the last)."""

_STEP = re.compile(r"^session \[\d+/\d+\] (?P<label>[^:]+): ")
_FAILED = re.compile(r"^(?:failed: (?P<a>[^:]+): |session: (?P<b>[^:]+): .*\bfailed\b)")
_STOPPED = re.compile(r"^session stopped by ")
_DONE = re.compile(r"^session: done \(")


@dataclass
class LineReader:
    """Whole lines out of a growing file read in pieces.

    Attributes:
        offset: bytes of the file consumed as whole lines (where the next read starts).
    """

    offset: int = 0
    _partial: bytes = b""

    def feed(self, data: bytes, at: int) -> list[str]:
        """The whole lines of ``data``, read from byte ``at`` of the file.

        Data read from another offset than :attr:`offset` (a stale read) is ignored; an
        unfinished last line waits for the next read (which starts at its beginning).
        """
        if at != self.offset:
            return []
        *lines, rest = data.split(b"\n")
        self._partial = rest
        self.offset += len(data) - len(rest)
        return [line.decode("utf-8", "replace").rstrip("\r") for line in lines]

    def rest(self) -> str | None:
        """The unfinished last line once the file is complete (None when there is none)."""
        return self._partial.decode("utf-8", "replace") if self._partial else None


@dataclass
class Labeller:
    """Which configuration each line of the session's output belongs to.

    Attributes:
        label: the current configuration's label (:data:`SESSION` outside them).
        failed: labels of configurations that failed, in the order they were reported.
    """

    label: str = SESSION
    failed: list[str] = field(default_factory=list)

    def __call__(self, line: str) -> str:
        """The label of ``line`` (updating the current one on a progress line)."""
        if m := _STEP.match(line):
            self.label = m["label"]
        elif m := _FAILED.match(line):
            self._fail(m["a"] or m["b"])
        elif _STOPPED.match(line):  # the configuration it stopped did not finish
            self._fail(self.label)
            self.label = SESSION
        elif _DONE.match(line):
            self.label = SESSION
        return self.label

    def _fail(self, label: str) -> None:
        if label != SESSION and label not in self.failed:
            self.failed.append(label)


__all__ = ["SESSION", "Labeller", "LineReader"]

"""Text the tool did not write, made safe to keep, count and show (pure, no I/O).

Datasets, server responses, engine logs and spec files are outside text. Two things in it
break the tool or its user if passed along as they are:

* **Lone surrogates** (``"\\ud800"``): JSON and YAML can write half of a UTF-16 pair as an
  escape, and Python decodes it to a ``str`` that cannot be encoded as UTF-8 — a tokenizer
  refuses it (``TypeError``) and a record holding it cannot be written. Server text is kept
  with each lone surrogate replaced by U+FFFD (:func:`valid_unicode`, :func:`valid_json`);
  files the user wrote are refused, naming the field (``records.load``); dataset entries
  holding one are skipped and counted (``collect.workload.dataset``).
* **Control characters and escape sequences** (ESC ``[2J``, OSC titles, BEL, backspace,
  carriage return …): printed raw, they clear, retitle or rewrite the user's terminal and
  can forge lines of output. Everything from an engine or a server shown on the terminal
  goes through :func:`terminal_safe`, which writes them as visible escapes; names written
  into a spec are checked with :func:`control_characters`.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but tab and newline, DEL, C1 controls (0x80-0x9f, CSI is 0x9b), the Unicode
# line/paragraph separators and the directional formatting characters (UAX #9) that reorder
# what a terminal or page shows.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
UNPRINTABLE_IN_NAME = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""What a one-line name must not hold: :data:`_CONTROL`'s characters, tab and newline, and
lone surrogates. The records' :data:`tokenwatt.records.PlainName` refuses them."""


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (U+D800–U+DFFF), which is not text."""
    return _SURROGATE.search(text) is not None


def valid_unicode(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the replacement character);
    ``text`` itself when it has none (the common case costs one regex search)."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def valid_json(value: Any) -> Any:
    """Decoded JSON (``json.loads``, ``httpx.Response.json``) with :func:`valid_unicode`
    applied to every string, keys included; other values as they are."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, list):
        return [valid_json(v) for v in value]
    if isinstance(value, dict):
        return {valid_json(k): valid_json(v) for k, v in value.items()}
    return value


def _escape(match: re.Match[str]) -> str:
    return "".join(
        f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}" for ch in match.group()
    )


def terminal_safe(text: str) -> str:
    """``text`` as it may be printed to a terminal: control characters (but tab and newline)
    written out as escapes, lone surrogates as U+FFFD. ESC ``[2J`` prints as ``\\x1b[2J``:
    the escape character is what makes a sequence act, so escaping it disarms the whole
    sequence. For anything an engine or a server said (log tails, error bodies, error
    messages, model names) before it is printed."""
    return _CONTROL.sub(_escape, valid_unicode(text))


def one_line(text: str) -> str:
    """``text`` as :func:`terminal_safe` writes it, with tab and newline escaped too
    (``\\x09``, ``\\x0a``), so that it prints on one line: for server text quoted in a
    one-line message."""
    return terminal_safe(text).replace("\t", "\\x09").replace("\n", "\\x0a")


def control_characters(text: str) -> str | None:
    """The first control character, escape, line break or lone surrogate in a one-line
    ``text``, written out (``"\\x1b"``); None when it has none. For names a spec holds."""
    found = UNPRINTABLE_IN_NAME.search(text)
    if found is None:
        return None
    ch = found.group()
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


# Unicode's explicit directional formatting characters (UAX #9, "Explicit Directional
# Embeddings, Overrides and Isolates", plus the implicit marks and Arabic letter mark).
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
_ISOLATE_OPENERS = frozenset("\u2066\u2067\u2068")
_FSI, _PDI = "\u2068", "\u2069"


def bidi_isolated(text: str) -> str:
    """``text`` wrapped in a first-strong isolate when it holds directional controls.

    An unclosed right-to-left override in one field would otherwise reverse the fields
    after it on the same line. Inside FSI … PDI, the closing PDI ends every embedding and
    override opened within (UAX #9, rule X6a), so the text reorders only itself. A PDI in
    the text that closes nothing opened inside it is dropped: it would close our isolate
    early. Text without such controls is returned unchanged.
    """
    if _BIDI.isdisjoint(text):
        return text
    kept: list[str] = []
    depth = 0
    for ch in text:
        if ch in _ISOLATE_OPENERS:
            depth += 1
        elif ch == _PDI:
            if depth == 0:
                continue
            depth -= 1
        kept.append(ch)
    return _FSI + "".join(kept) + _PDI * (depth + 1)


__all__ = [
    "UNPRINTABLE_IN_NAME",
    "bidi_isolated",
    "control_characters",
    "has_lone_surrogate",
    "one_line",
    "terminal_safe",
    "valid_json",
    "valid_unicode",
]

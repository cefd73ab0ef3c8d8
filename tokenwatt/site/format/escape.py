"""Turning record text into inert page text.

Text from records (titles, labels, summaries, not-covered items) is data: on the page it
must never become HTML, Markdown structure or template code. Every character that Markdown
or HTML could read as syntax is written as a numeric character reference (``&#42;``), which
Python-Markdown passes through untouched and the browser shows as the character itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

from markupsafe import Markup

from tokenwatt.text import bidi_isolated, terminal_safe

# ASCII punctuation that starts or ends some Markdown or HTML construct: emphasis, links,
# images, code, headings, lists, tables, HTML tags and entities, attribute lists, admonitions,
# abbreviations, footnotes, math and the pymdownx inline extensions.
_SPECIAL = frozenset("\\`*_{}[]()#+-!|<>&~^=:$\"'@%")
_LEADING_ORDERED = re.compile(r"^(\d+)([.)])")
# Control characters (C0, DEL, C1) become spaces; the specials become references.
_TABLE: dict[int, str] = {c: " " for c in [*range(32), *range(0x7F, 0xA0)]}
_TABLE.update({ord(ch): f"&#{ord(ch)};" for ch in _SPECIAL})


DASH = Markup("—")
"""The cell of a value not given (an em dash), safe Markup. Here rather than in ``fmt`` so
that pages without numbers (the spec reference) do not import the analysis."""


def md_text(value: object) -> Markup:
    """Escape one piece of record text for use inline in Markdown (and the HTML it becomes).

    Whitespace runs (newlines included) collapse to one space, so the text cannot start a
    new block; a leading ``1.`` cannot start a list; control characters become spaces;
    directional controls are isolated (:func:`bidi_isolated`). Returns a :class:`Markup`
    so the template engine does not escape it twice.
    """
    text = bidi_isolated(" ".join(str(value).split()))
    leading = _LEADING_ORDERED.match(text)
    if leading:
        marker = leading.end() - 1
        head = text[:marker] + f"&#{ord(text[marker])};"
        return trusted(head + text[marker + 1 :].translate(_TABLE))
    escaped = text.translate(_TABLE)
    return trusted(escaped)


def trusted(text: str) -> Markup:
    """Mark text the package composed itself (formatted numbers, fixed words) as page-safe.

    Never for text from a record: that goes through :func:`md_text`.
    """
    return Markup(text)  # noqa: S704 - composed by the package, not from records


def code_block(text: str, language: str = "") -> Markup:
    """A fenced code block whose fence is longer than any backtick run in ``text``.

    Inside a fenced block Markdown does no inline processing and HTML-escapes the text, so
    the content stays literal as long as no line can close the fence. Control characters and
    directional controls are written out (``\x1b``, ``\u202e``;
    :func:`tokenwatt.text.terminal_safe`): the block's copy button copies its text as it is,
    and an escape sequence or a right-to-left override pasted into a shell would run, or
    show, something other than the command the page shows.
    """
    text = terminal_safe(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    lines = [line.rstrip() for line in text.splitlines()]
    body = "\n".join(lines)
    return trusted(f"{fence}{language}\n{body}\n{fence}")


def _isolated(data: Any) -> Any:
    """``data`` with every string value isolated (:func:`tokenwatt.text.bidi_isolated`)."""
    if isinstance(data, str):
        return bidi_isolated(data)
    if isinstance(data, dict):
        return {k: _isolated(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_isolated(v) for v in data]
    return data


def json_for_script(data: Any) -> Markup:
    """JSON for a ``<script type="application/json">`` element, each string value's
    directional controls isolated to that value (a chart label with a right-to-left override
    reorders only itself, in the chart and its tooltips).

    Keys sorted (deterministic output); ``<``, ``>`` and ``&`` written as ``\\u003c`` etc. so
    no text in the data can close the element or open a comment; U+2028/9 escaped too.
    """
    text = json.dumps(_isolated(data), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    for raw, esc in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, esc)
    return trusted(text)

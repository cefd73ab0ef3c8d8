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

# ASCII punctuation that starts or ends some Markdown or HTML construct: emphasis, links,
# images, code, headings, lists, tables, HTML tags and entities, attribute lists, admonitions,
# abbreviations, footnotes, math and the pymdownx inline extensions.
_SPECIAL = frozenset("\\`*_{}[]()#+-!|<>&~^=:$\"'@%")
_LEADING_ORDERED = re.compile(r"^(\d+)([.)])")
# Control characters (C0, DEL, C1) become spaces; the specials become references.
_TABLE: dict[int, str] = {c: " " for c in [*range(32), *range(0x7F, 0xA0)]}
_TABLE.update({ord(ch): f"&#{ord(ch)};" for ch in _SPECIAL})


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
    the content stays literal as long as no line can close the fence.
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    lines = [line.rstrip() for line in text.splitlines()]
    body = "\n".join(lines)
    return trusted(f"{fence}{language}\n{body}\n{fence}")


def json_for_script(data: Any) -> Markup:
    """JSON for a ``<script type="application/json">`` element.

    Keys sorted (deterministic output); ``<``, ``>`` and ``&`` written as ``\\u003c`` etc. so
    no text in the data can close the element or open a comment; U+2028/9 escaped too.
    """
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    for raw, esc in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, esc)
    return trusted(text)

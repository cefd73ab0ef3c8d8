"""The scrubber against keys and encodings drawn at random (Hypothesis): whatever form a
server, a proxy or a log echoes the run's key in — percent-encoded whole or in part (any
safe set, either case, UTF-8 or Latin-1), JSON ``\\u`` escapes, HTML character references,
base64 (standard, URL-safe, unpadded, after a ``user:`` prefix), hex — none of it survives
:func:`tokenwatt.redact.remove_secrets`, and text without the key comes back unchanged."""

from __future__ import annotations

import base64
import html.entities
import json
import urllib.parse
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenwatt.redact import REDACTED, remove_secrets

KEY_ALPHABET = st.characters(
    codec="utf-8",
    categories=("L", "N", "P", "S", "Zs"),
    exclude_characters="\x00",
)
keys = st.text(KEY_ALPHABET, min_size=8, max_size=40).filter(lambda k: k.strip() == k)
# Surrounding text that cannot itself spell out part of an encoding.
around = st.text(st.sampled_from(" \n\t,;()[]{}<>|!~"), max_size=6)

Encode = Callable[[str, st.DataObject], str]


def _per_char(key: str, data: st.DataObject, encode: Callable[[str], str]) -> str:
    """Each character encoded or not, as Hypothesis draws it (a partial encoding)."""
    mask = data.draw(st.lists(st.booleans(), min_size=len(key), max_size=len(key)))
    return "".join(encode(ch) if m else ch for ch, m in zip(key, mask, strict=True))


def percent(key: str, data: st.DataObject) -> str:
    upper = data.draw(st.booleans())
    latin1 = data.draw(st.booleans()) and all(ord(c) < 256 for c in key)
    style = data.draw(st.sampled_from(["%{:02x}", "%25{:02x}", "\\x{:02x}", "={:02X}", "\\{:03o}"]))

    def one(ch: str) -> str:
        raw = bytes([ord(ch)]) if latin1 else ch.encode()
        text = "".join(style.format(b) for b in raw)
        return text.upper() if upper and "o}" not in style else text

    return _per_char(key, data, one)


def quoted(key: str, data: st.DataObject) -> str:
    safe = data.draw(st.sampled_from(["", "/", "-_.~", ":@!$&'()*+,;="]))
    plus = data.draw(st.booleans())
    return (urllib.parse.quote_plus if plus else urllib.parse.quote)(key, safe=safe)


def json_escaped(key: str, data: st.DataObject) -> str:
    style = data.draw(st.sampled_from(["utf16", "U", "braces"]))

    def one(ch: str) -> str:
        if style == "U":
            return f"\\U{ord(ch):08x}"
        if style == "braces":
            return f"\\u{{{ord(ch):x}}}"
        units = ch.encode("utf-16-be")
        hexes = [units[i : i + 2].hex() for i in range(0, len(units), 2)]
        return "".join("\\u" + h for h in hexes)

    return _per_char(key, data, one)


def html_references(key: str, data: st.DataObject) -> str:
    style = data.draw(st.sampled_from(["dec", "hex", "HEX", "named"]))

    names = {v: k for k, v in html.entities.html5.items() if k.endswith(";")}

    def one(ch: str) -> str:
        name = names.get(ch)
        if style == "named" and name:
            return f"&{name}"
        if style == "dec":
            return f"&#{ord(ch)};"
        return f"&#x{ord(ch):x};" if style != "HEX" else f"&#X{ord(ch):X};"

    return _per_char(key, data, one)


def b64(key: str, data: st.DataObject) -> str:
    prefix = data.draw(st.sampled_from(["", "u:", "ab:"]))
    encode = data.draw(st.sampled_from([base64.b64encode, base64.urlsafe_b64encode]))
    text = encode((prefix + key).encode()).decode()
    return text.rstrip("=") if data.draw(st.booleans()) else text


def hexed(key: str, data: st.DataObject) -> str:
    sep = data.draw(st.sampled_from(["", ":", " ", "-", ", "]))
    prefix = data.draw(st.sampled_from(["", "0x", "\\x"]))
    text = sep.join(f"{prefix}{b:02x}" for b in key.encode())
    return text.upper() if data.draw(st.booleans()) else text


def plain(key: str, data: st.DataObject) -> str:
    return json.dumps(key)[1:-1] if data.draw(st.booleans()) else key


def fullwidth(key: str, data: st.DataObject) -> str:
    """ASCII characters as their fullwidth forms (U+FF01–U+FF5E), some or all."""
    return _per_char(key, data, lambda ch: chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch)


def invisible(key: str, data: st.DataObject) -> str:
    """Zero-width characters (or soft hyphens) between the key's characters."""
    mark = data.draw(st.sampled_from(["\u200b", "\u00ad", "\u2060", "\ufeff"]))
    return mark.join(key)


ENCODINGS: list[Encode] = [
    plain,
    percent,
    quoted,
    json_escaped,
    html_references,
    b64,
    hexed,
    invisible,
    fullwidth,
]


@settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(key=keys, before=around, after=around, data=st.data())
def test_no_encoding_of_a_drawn_key_survives(
    key: str, before: str, after: str, data: st.DataObject
) -> None:
    encode = data.draw(st.sampled_from(ENCODINGS))
    form = encode(key, data)
    text = f"{before}{form}{after}"
    swept = remove_secrets(text, [key])
    assert REDACTED in swept
    # What is left outside the markers (a key may look like part of "[redacted]" itself).
    left = swept.replace(REDACTED, "\0")
    assert form not in left, (encode.__name__, form, swept)
    assert key not in left


@settings(max_examples=200, deadline=None, database=None)
@given(key=keys, text=st.text(st.characters(codec="utf-8"), max_size=60))
def test_text_without_the_key_comes_back_unchanged(key: str, text: str) -> None:
    if key in text or any(key in s for s in (urllib.parse.unquote(text), html.unescape(text))):
        return
    assert remove_secrets(text, [key]) == text

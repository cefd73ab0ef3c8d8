"""Scrubbing credentials out of text that came from outside: error messages, error bodies, logs.

Pure functions, no I/O. Whatever a server, a library or an engine log says may echo a
credential back (an ``Authorization`` header in a proxy's error page, a ``?api_key=`` in a
URL, a ``password=`` in a connection string); text is scrubbed with :func:`scrub` before it
is kept in a record, printed or shown on a page. What is replaced (value only; the name
stays so that a reader still sees *what* was there):

* ``Bearer``/``Basic``/``Token`` credentials (``Authorization: Bearer sk-…``);
* ``name=value``, ``name: value`` and JSON ``"name": "value"`` where the name says it is a
  secret (``api_key``, ``api-key``, ``x-api-key``, ``token``, ``access_token``, ``password``,
  ``passwd``, ``secret``, ``client_secret``, ``private_key``, ``credential``, …);
* the password of ``user:password@`` in a URL, and the whole query string of a URL (query
  parameters carry signatures and keys often enough that none is kept);
* well-known token shapes even without a name: OpenAI-style ``sk-…``, Hugging Face
  ``hf_…``, GitHub ``ghp_…``/``github_pat_…``, Slack ``xox?-…``, AWS access key ids;
* any value passed in ``secrets`` (the API key the run itself holds), in any letter case,
  also in the forms text carries it in when it went through a URL, JSON or base64: percent-encoded
  (any character or none, hex in either case, UTF-8 or Latin-1), JSON-escaped (any
  character as ``\\uXXXX``, ``/`` as ``\\/``), hex (any case, bytes together or apart: a
  server that logs the header's bytes), and base64 (standard and URL-safe, with and without
  padding, at any offset, as inside a Basic ``user:key``).

It errs on the side of removing too much: a scrubbed message is for a human to read, not
to parse.
"""

from __future__ import annotations

import base64
import functools
import html.entities
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

REDACTED = "[redacted]"
"""What a scrubbed value is replaced with."""

_SCHEMES = {"bearer", "basic", "token", "digest"}
# A scheme word, then a credential that looks like one (8+ characters with a digit or one
# of + / = _ . -): "Bearer sk-…" is scrubbed, "token count" and "basic usage" are words.
_SCHEME_CREDENTIAL = re.compile(
    r"\b(Bearer|Basic|Token|Digest)(\s+)(?=[^\s\"',;]*[0-9+/=_.-])[^\s\"',;]{8,}", re.IGNORECASE
)
# After "Authorization:" any credential is one, whatever it looks like.
_AUTH_HEADER = re.compile(
    r"\b(Authorization\s*[:=]\s*[\"']?(?:Bearer|Basic|Token|Digest)?)(\s*)[^\s\"',;]+",
    re.IGNORECASE,
)

# A secret's name: a word that ends in (or is) one of these, in snake, kebab or camel case.
_SENSITIVE_NAMES = (
    r"[A-Za-z0-9_.-]*?(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|"
    r"token|secret|password|passwd|pwd|credentials?|auth|authorization|signature|sig|"
    r"session[_-]?id)"
)
# name, an optional closing quote, '=' or ':', an optional opening quote, then the value up
# to the closing quote or a delimiter. A JSON string value may hold escaped quotes.
_NAMED_VALUE = re.compile(
    r"(?P<name>\b" + _SENSITIVE_NAMES + r")(?P<q1>[\"']?)(?P<sep>\s*[=:]\s*)"
    r"(?:(?P<q2>[\"'])(?P<quoted>(?:\\.|(?!(?P=q2)).)*)(?P=q2)|(?P<bare>[^\s\"',;&}\]]+))",
    re.IGNORECASE,
)
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^\s/:@]*):[^\s/@]*@", re.I)
_URL_QUERY = re.compile(r"(?P<base>\b[a-z][a-z0-9+.-]*://[^\s?#\"'<>]*)\?[^\s#\"'<>]*", re.I)
_TOKEN_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16})\b"
)


def _named(match: re.Match[str]) -> str:
    bare = match.group("bare") or ""
    # "Authorization: Bearer [redacted]", or a value an earlier pattern already scrubbed.
    if bare.lower() in _SCHEMES or bare.startswith(REDACTED[:-1]):
        return match.group(0)
    quote = match.group("q2") or ""
    return f"{match.group('name')}{match.group('q1')}{match.group('sep')}{quote}{REDACTED}{quote}"


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credentials replaced by :data:`REDACTED` (see the module docstring).

    Args:
        text: any text (an exception message, the head of a response body, a log line).
        secrets: exact values to remove wherever they occur (empty strings are ignored;
            values shorter than 4 characters are ignored too, as they would blank out
            ordinary words).

    Returns:
        The scrubbed text; text with nothing to scrub comes back unchanged.
    """
    text = remove_secrets(text, secrets)
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{REDACTED}@", text)
    text = _URL_QUERY.sub(lambda m: f"{m.group('base')}?{REDACTED}", text)
    text = _SCHEME_CREDENTIAL.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _AUTH_HEADER.sub(
        lambda m: m.group(0) if REDACTED in m.group(0) else f"{m.group(1)}{m.group(2)}{REDACTED}",
        text,
    )
    text = _NAMED_VALUE.sub(_named, text)
    return _TOKEN_SHAPES.sub(REDACTED, text)


def remove_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every exact value of ``secrets`` (4 characters or more) replaced by
    :data:`REDACTED`, in any letter case and in each form text carries it in
    (:func:`scrub`'s list: any character percent-encoded or not, hex in either case, UTF-8
    or Latin-1; JSON escapes; hex in any case, bytes apart or together; base64 standard or
    URL-safe, at any offset, as inside a Basic credential ``user:key``); the pattern rules
    of :func:`scrub` are not applied, so text without a secret comes back unchanged."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            for form in _secret_forms(secret):
                text = text.replace(form, REDACTED)
            for pattern in _secret_patterns(secret):
                text = pattern.sub(REDACTED, text)
    return text


def remove_secrets_json(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` (JSON-like: dicts, lists, scalars) with :func:`remove_secrets` applied to
    every string value in it (mapping keys are the record's own field names, left as they
    are): the last sweep before a record is written, so that no field a run filled from
    outside (a version string, an error body, a completion) can carry the run's own key,
    whatever its form."""
    if not any(s and len(s) >= 4 for s in secrets):
        return value
    if isinstance(value, str):
        return remove_secrets(value, secrets)
    if isinstance(value, dict):
        return {k: remove_secrets_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [remove_secrets_json(v, secrets) for v in value]
    return value


def _hex_class(digit: str) -> str:
    return f"[{digit}{digit.upper()}]" if digit.isalpha() else digit


def _percent(data: bytes, prefix: str = "%") -> str:
    return "".join(prefix + "".join(_hex_class(d) for d in f"{b:02x}") for b in data)


def _byte_forms(data: bytes) -> list[str]:
    """Patterns of a character's bytes as escapes write them: percent-encoded once or twice
    (``%2F``, ``%252F``), C/Python ``\\x2f``, octal ``\\057`` and quoted-printable ``=2F``."""
    octal = "".join(re.escape(f"\\{b:03o}") for b in data)
    return [
        _percent(data),
        _percent(data, "%25"),
        _percent(data, r"\\[xX]"),
        octal,
        _percent(data, "="),
    ]


# Characters a copy may carry between a key's characters and that show as nothing: soft
# hyphen, zero-width space, non-joiner and joiner, word joiner, BOM.
_INVISIBLE = "(?:[\u00ad\u200b-\u200d\u2060\ufeff])*"


@functools.lru_cache(maxsize=64)
def _secret_patterns(secret: str) -> tuple[re.Pattern[str], ...]:
    """The patterns of ``secret``'s forms that a list of strings cannot hold: each
    character as itself, percent-encoded (UTF-8 or Latin-1, hex in either case, ``+``
    for a space) or an HTML character reference (:func:`_html_entities`), so any safe set
    and a partial encoding match; its bytes in hex, in any
    case, together or one separator apart; its JSON escapes (:func:`_json_escaped`); and
    the core of its base64 at each of the three offsets a prefix (``user:``) can put it."""
    chars = []
    for ch in secret:
        alts = {re.escape(ch), *_byte_forms(ch.encode()), *_html_entities(ch)}
        if "!" <= ch <= "~":  # its fullwidth form (U+FF01–U+FF5E), which NFKC folds back
            alts.add(re.escape(chr(ord(ch) + 0xFEE0)))
        if ch == " ":
            alts.update((r"\+", "\u3000"))
        if ord(ch) < 256:  # Latin-1, as a form encoded in it carries the character
            alts.update(_byte_forms(bytes([ord(ch)])))
        chars.append(f"(?:{'|'.join(sorted(alts))})")
    raw = secret.encode()
    hex_bytes = [r"(?:\\[xX]|0[xX])?" + "".join(_hex_class(d) for d in f"{b:02x}") for b in raw]
    patterns = [
        # In any case: a server may echo a key lowercased or uppercased (a header value
        # folded, a log that lowercases its lines).
        re.compile(_INVISIBLE.join(chars), re.IGNORECASE),
        re.compile(r"[\s:.,-]{0,2}".join(hex_bytes)),
        _json_escaped(secret),
    ]
    cores = set()
    for offset in range(3):
        # Characters wholly made of the secret's bits: 6i >= 8·offset, 6i + 6 <= 8·(offset + n).
        first = -(-8 * offset // 6)
        last = (8 * (offset + len(raw))) // 6
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(b"\0" * offset + raw + b"\0\0").decode()[first:last]
            if len(core) >= 8:
                cores.add(re.escape(core))
    if cores:
        patterns.append(re.compile("|".join(sorted(cores, key=len, reverse=True))))
    return tuple(patterns)


def _html_entities(ch: str) -> list[str]:
    """Patterns of ``ch`` as an HTML character reference (HTML Living Standard, 13.2.5.72
    onwards): decimal ``&#NN;`` and hexadecimal ``&#xHH;`` (either case, leading zeros),
    and its named reference where HTML has one (``&amp;``, ``&lt;``, ``&quot;``, ``&apos;``,
    ``&eacute;`` …, from :data:`html.entities.codepoint2name`); the ``;`` may be left out,
    as browsers read ``&#38`` too."""
    code = ord(ch)
    hex_digits = "".join(_hex_class(d) for d in f"{code:x}")
    alts = [rf"&#0*{code};?", rf"&#[xX]0*{hex_digits};?"]
    alts += [re.escape(f"&{name}") for name in _html5_names().get(ch, ())]
    return alts


@functools.cache
def _html5_names() -> dict[str, tuple[str, ...]]:
    """HTML's named character references by the one character each stands for
    (:data:`html.entities.html5`: ``lowbar;``, ``sol;``, ``amp`` …, with and without ``;``
    as the standard lists them)."""
    out: dict[str, list[str]] = {}
    for name, value in html.entities.html5.items():
        if len(value) == 1:
            out.setdefault(value, []).append(name)
    return {ch: tuple(names) for ch, names in out.items()}


def _secret_forms(secret: str) -> list[str]:
    """``secret`` as written and as a JSON string or base64 would carry it, longest
    first (so that a longer form is not half-replaced through a shorter one inside it)."""
    raw = secret.encode()
    # Percent-encoded and hex forms are matched by :func:`_secret_patterns`.
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode(),
    }
    forms |= {form.rstrip("=") for form in forms}
    return sorted((form for form in forms if len(form) >= 4), key=len, reverse=True)


@functools.lru_cache(maxsize=64)
def _json_escaped(secret: str) -> re.Pattern[str]:
    """``secret`` as a JSON string may carry it with any of its characters escaped: ``\\/``
    for ``/`` (PHP, Java and Go encoders write it) or ``\\uXXXX`` (any character, hex in
    either case; a character outside the BMP as its UTF-16 pair), so that a server's body
    cannot hide the key from the plain forms and have it decoded later for the screen."""
    parts = []
    for ch in secret:
        escaped = json.dumps(ch)[1:-1]  # "\\u00e9", '\\"', or ch itself
        units = ch.encode("utf-16-be")
        hex_units = [units[i : i + 2].hex() for i in range(0, len(units), 2)]
        alts = {re.escape(ch), re.escape(escaped)}
        alts.add("".join(r"\\u" + "".join(f"[{d}{d.upper()}]" for d in h) for h in hex_units))
        # \U0000005f (Python, C++) and \u{5f} (JavaScript, Rust, Swift) of the code point.
        point = "".join(_hex_class(d) for d in f"{ord(ch):x}")
        alts.add(rf"\\U0*{point}")
        alts.add(rf"\\u\{{0*{point}\}}")
        if ch == "/":
            alts.add(r"\\/")
        parts.append(f"(?:{'|'.join(sorted(alts))})")
    return re.compile("".join(parts))


def cap(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when it was cut.

    Raises:
        ValueError: ``limit`` below 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def scrub_capped(text: str, limit: int, secrets: Iterable[str] = ()) -> str:
    """:func:`scrub` then :func:`cap`: scrubbing first, so a cut never leaves half a secret
    that the patterns no longer recognise."""
    return cap(scrub(text, secrets), limit)


_SECRET_PARTS = frozenset(
    {"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIAL"}
    | {"CREDENTIALS", "AUTH", "PAT"}
)
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})  # the shell's working folders
_SECRET_SUFFIXES = ("TOKEN", "SECRET", "PASSWORD", "APIKEY")


def secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret: one of its
    ``_``-separated parts is KEY, TOKEN, SECRET, PASSWORD, AUTH, ... or ends in TOKEN,
    SECRET, PASSWORD or APIKEY (``HF_TOKEN``, ``VLLM_API_KEY``, ``DB_PASSWORD``); not
    ``PWD``/``OLDPWD`` (the working folder) nor ``TOKENIZERS_PARALLELISM``."""
    upper = name.upper()
    if upper in _NOT_SECRET:
        return False
    parts = re.split(r"[^A-Z0-9]+", upper)
    return any(p in _SECRET_PARTS or p.endswith(_SECRET_SUFFIXES) for p in parts)


__all__ = ["REDACTED", "cap", "scrub", "scrub_capped", "secret_name"]

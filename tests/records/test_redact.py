"""Credential scrubbing: every form a secret is seen in, and text that must stay as it is."""

from __future__ import annotations

import base64
from collections.abc import Callable
from urllib.parse import quote

import pytest

from tokenwatt.redact import REDACTED, cap, remove_secrets, remove_secrets_json, scrub, scrub_capped

R = REDACTED

SCRUBBED = {
    "Authorization: Bearer sk-abc123def456": f"Authorization: Bearer {R}",
    "authorization: bearer eyJhbGciOi.J9.x": f"authorization: bearer {R}",
    "Authorization: Basic dXNlcjpwYXNz": f"Authorization: Basic {R}",
    "Authorization: raw-key-123": f"Authorization: {R}",
    '{"error": "bad key", "api_key": "k-12345"}': f'{{"error": "bad key", "api_key": "{R}"}}',
    '{"password": "p\\"w\\"d", "user": "ann"}': f'{{"password": "{R}", "user": "ann"}}',
    "api_key=abcd1234&model=x": f"api_key={R}&model=x",
    "x-api-key: abcdef": f"x-api-key: {R}",
    "OPENAI_API_KEY=abcdef": f"OPENAI_API_KEY={R}",
    "token=t0k3n, next": f"token={R}, next",
    "access_token: 'zzz999'": f"access_token: '{R}'",
    "password=hunter22;": f"password={R};",
    "client_secret = s3cr3t": f"client_secret = {R}",
    "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz": f"HF_TOKEN={R}",
    "to postgres://bob:pw123@db:5432/x failed": f"to postgres://bob:{R}@db:5432/x failed",
    "GET http://h:8000/v1/models?key=zz&x=1 failed": f"GET http://h:8000/v1/models?{R} failed",
    "https://u:p@host/a?sig=1#frag": f"https://u:{R}@host/a?{R}#frag",
    "key sk-proj-ABCDEFGHIJKLMNOPqrst leaked": f"key {R} leaked",
    "hf_ABCDEFGHIJKLMNOPQRSTUVWX in log": f"{R} in log",
    "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123": R,
    "aws AKIAIOSFODNN7EXAMPLE id": f"aws {R} id",
}


@pytest.mark.parametrize("text", sorted(SCRUBBED))
def test_credentials_are_scrubbed(text: str) -> None:
    assert scrub(text) == SCRUBBED[text]


KEPT = [
    "Cannot connect to host 127.0.0.1:8000 ssl:default [Connect call failed]",
    '{"usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}',
    "max_tokens=16 exceeds the context (n_ctx: 2048)",
    "Server disconnected",
    "http://127.0.0.1:8000/v1/completions",
    "the author: Ann; the config: small",
    "",
]


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert scrub(text) == text


def test_exact_secrets_go_wherever_they_are() -> None:
    text = "echo: my-own-key-0042 (twice: my-own-key-0042)"
    assert scrub(text, ["my-own-key-0042"]) == f"echo: {R} (twice: {R})"
    assert scrub("a b c", ["", "b"]) == "a b c"  # empty and tiny values are not blanked


def test_a_secret_in_url_json_and_base64_forms_goes_too() -> None:
    key = "k3y/with+plus&é=1"
    texts = {
        "GET /v1/models/k3y%2Fwith%2Bplus%26%C3%A9%3D1 failed": "GET /v1/models/{R} failed",
        "form: key=k3y%2Fwith%2Bplus%26%C3%A9%3D1 bad": "form: key={R} bad",
        '{"echo": "k3y/with+plus&\\u00e9=1"}': '{{"echo": "{R}"}}',
        "b64 azN5L3dpdGgrcGx1cybDqT0x! std": "b64 {R}! std",
        "b64 azN5L3dpdGgrcGx1cybDqT0x? url-safe": "b64 {R}? url-safe",
    }
    for text, want in texts.items():
        assert scrub(text, [key]) == want.format(R=R), text
    odd = "?>?>?>key"  # standard and URL-safe base64 differ: Pz4/Pj8+... and Pz4_Pj8-...
    assert scrub("a Pz4/Pj8+a2V5 b Pz4_Pj8-a2V5 c", [odd]) == f"a {R} b {R} c"
    plain = "k3y and with plus"  # pieces of the key are not the key
    assert scrub(plain, [key]) == plain


def test_a_secret_in_hex_goes_in_either_case_and_a_record_is_swept_whole() -> None:
    key = "sk-live-0042"
    low, up = key.encode().hex(), key.encode().hex().upper()
    assert scrub(f"bytes {low} / {up}.", [key]) == f"bytes {R} / {R}."
    record = {"engine_version": f"b1 {key}", "items": [{"error": f"HTTP 500: {up}"}], "n": 1}
    swept = remove_secrets_json(record, [key])
    assert swept == {"engine_version": f"b1 {R}", "items": [{"error": f"HTTP 500: {R}"}], "n": 1}
    # Mapping keys are the record's own field names: a key that is one stays.
    assert remove_secrets_json({"token": "token"}, ["token"]) == {"token": R}
    assert remove_secrets_json(record, ["", "abc"]) == record  # no key: nothing changes
    assert remove_secrets("max_tokens=16 token count", [key]) == "max_tokens=16 token count"


@pytest.mark.parametrize(
    "encode",
    [
        lambda k: quote(k),  # "/" left as is, as Python's default and JS encodeURI do
        lambda k: quote(k, safe="").lower(),  # lower-case hex
        lambda k: quote(k, safe="", encoding="latin-1"),
        lambda k: quote(k[:5], safe="") + k[5:],  # only a part encoded
        lambda k: base64.b64encode(b"user:" + k.encode()).decode(),  # a Basic credential
        lambda k: base64.urlsafe_b64encode(b"x" + k.encode()).decode(),
        lambda k: " ".join(f"{b:02X}" for b in k.encode()),  # hex bytes apart
        lambda k: "".join(f"{b:02x}" if i % 2 else f"{b:02X}" for i, b in enumerate(k.encode())),
        lambda k: k.upper(),  # a server that folds the header's case
        lambda k: k.swapcase(),
        lambda k: quote(k, safe="").upper(),
    ],
    ids=[
        "quote",
        "lower",
        "latin-1",
        "partial",
        "basic",
        "b64-offset",
        "hex-apart",
        "hex-mixed",
        "upper-case",
        "swapped-case",
        "quote-upper",
    ],
)
def test_a_secret_in_any_reversible_encoding_goes(encode: Callable[[str], str]) -> None:
    key = "sk/abc+def=ghi~é"
    text = f"echoed: {encode(key)} (end)"
    out = remove_secrets(text, [key])
    assert out.startswith("echoed: ") and out.endswith(" (end)") and R in out
    for leftover in (encode(key), key, quote(key, safe=""), key.encode().hex()):
        assert leftover not in out


def test_a_secret_with_json_escapes_a_decoder_would_undo_goes_too() -> None:
    """A server may echo the key JSON-escaped in ways Python's encoder never writes
    (``\\/``, ``\\u006b``, upper-case hex, a non-BMP character as a surrogate pair): the
    error note decodes the body's message, so each form must be scrubbed while raw."""
    key = "k3y/with/slashes-1234567890"
    texts = {
        r'{"message": "key: k3y\/with\/slashes-1234567890"}': r'{"message": "key: [redacted]"}',
        r'{"message": "\u006b3y/with\u002Fslashes-1234567890!"}': r'{"message": "[redacted]!"}',
    }  # fmt: skip
    for text, want in texts.items():
        assert scrub(text, [key]) == want, text
    assert scrub(r"x \ud83d\ude00abcd y", ["\U0001f600abcd"]) == f"x {R} y"
    near = r"k3y\/with\/slashes-123456789"  # one character short: not the key
    assert scrub(near, [key]) == near


def test_cap_and_scrub_before_cap() -> None:
    assert cap("abcdef", 6) == "abcdef"
    assert cap("abcdefg", 6) == "abcde…" and len(cap("x" * 999, 300)) == 300
    with pytest.raises(ValueError):
        cap("a", 0)
    # Capping first would cut the key in half, and the pattern would no longer see it.
    text = "x" * 20 + " Bearer sk-0123456789abcdefXYZ"
    out = scrub_capped(text, 40)
    assert "sk-0123" not in out and out.startswith("x" * 20 + " Bearer [red")


@pytest.mark.parametrize(
    "text",
    [
        "usage.prompt_tokens -1 is not a token count",
        "basic usage of the token budget",
        "Digest of the run",
    ],
)
def test_ordinary_words_after_a_scheme_name_stay(text: str) -> None:
    assert scrub(text) == text

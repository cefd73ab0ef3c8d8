"""What is wrong with a record or spec, said for a reader: pydantic's validation errors turned
into one :class:`~tokenwatt.errors.Problem` per field path (``configs[1].accuracy.score``),
each message in plain words with the value shown (never a secret's)."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from tokenwatt.errors import Problem
from tokenwatt.records.shared.base import FieldValueError

_UNION_TAG = re.compile(
    r"(?:constrained-)?(?:int|float|str|bool|bytes|decimal)"  # scalar members
    r"|[a-z-]+\[.*\]"  # literal['inf'], list[int], function-after[...], is-instance[...]
)
"""A segment pydantic adds to an error's location for the member of a union that failed
(``constrained-float``, ``literal['inf']``, ``function-after[...]``): its schema's name, never
a field a reader sees (the records' fields are lower-case words joined by ``_``)."""


def _is_union_tag(part: str) -> bool:
    return _UNION_TAG.fullmatch(part) is not None


def field_path(loc: tuple[int | str, ...]) -> str:
    """Format a pydantic error location as ``a.b[2].c`` (union tags removed)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("1", "2", "3") and not out:
            continue  # the discriminator's tag, not a field
        elif _is_union_tag(part):
            continue
        else:
            out += f".{part}" if out else part
    return out


def _merged(messages: list[str]) -> str:
    """One message for the failed members of a union at one field: ``must be a number or
    'inf', got "abc"`` from ``must be a number, got "abc"`` and ``must be 'inf', got "abc"``."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    tails = {m[m.rfind(", got ") :] for m in unique if ", got " in m}
    if len(tails) == 1 and all(m.startswith("must be ") and ", got " in m for m in unique):
        (tail,) = tails
        alternatives = [m.removeprefix("must be ").removesuffix(tail) for m in unique]
        return "must be " + " or ".join(alternatives) + tail
    return "; ".join(unique)


def json_kind(value: Any) -> str:
    """The JSON name of a Python value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def shown(value: Any) -> str:
    """A short rendering of a bad input value (scalars only; containers by kind)."""
    if isinstance(value, dict | list) or value is None:
        return json_kind(value)
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# Our words for pydantic's error types, keyed by the error's ``type`` code (pydantic_core's
# ErrorType, stable across releases) and filled from its ``ctx``; pydantic's own message
# text is never parsed. "got VALUE" is added for scalar inputs.
_TYPE_MESSAGES = {
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
    "list_type": "must be a JSON array",
    "tuple_type": "must be a JSON array",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
}

_BOUND_MESSAGES = {
    "greater_than": ("gt", "must be greater than {}"),
    "greater_than_equal": ("ge", "must be greater than or equal to {}"),
    "less_than": ("lt", "must be less than {}"),
    "less_than_equal": ("le", "must be less than or equal to {}"),
    "multiple_of": ("multiple_of", "must be a multiple of {}"),
}


_UNSIGNED_EXPONENT = re.compile(r"([-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)[eE])(\d+)")
"""A number with an exponent but no sign on it (``1.0e308``), which YAML 1.1 (PyYAML) reads
as text: its float pattern wants ``e+308`` or ``e-308`` (yaml.org/spec/1.1, float)."""


def _unsigned_exponent(value: Any) -> str:
    """The hint for a string that is a number YAML 1.1 read as text; "" for any other."""
    if not isinstance(value, str):
        return ""
    found = _UNSIGNED_EXPONENT.fullmatch(value.strip())
    if found is None:
        return ""
    signed = f"{found.group(1)}+{found.group(2)}"
    return (
        " (YAML reads a number with an exponent as text unless the exponent has a sign:"
        f" write {signed})"
    )


def _number(value: Any) -> str:
    """A bound as a person writes it: ``0`` and ``1000000000000``, not ``0.0`` or ``1e12``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def _count(n: Any, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _ctx_message(kind: str, ctx: dict[str, Any]) -> str | None:
    """Our message for an error type that carries its limits in ``ctx`` (None if unknown)."""
    if kind in _BOUND_MESSAGES:
        key, template = _BOUND_MESSAGES[kind]
        return template.format(_number(ctx[key]))
    if kind == "string_too_short":
        return f"must have at least {_count(ctx['min_length'], 'character')}"
    if kind == "string_too_long":
        return f"must have at most {_count(ctx['max_length'], 'character')}"
    if kind == "too_long":
        most = _count(ctx["max_length"], "item")
        return f"must have at most {most}, not {ctx.get('actual_length', 'more')}"
    if kind in ("literal_error", "enum"):
        return f"must be {ctx['expected']}"
    if kind == "string_pattern_mismatch":
        return f"must match pattern '{ctx['pattern']}'"
    return None


_SECRET_NAMES = frozenset({"api_key", "apikey", "password", "token", "secret"})


def _message(err: Any) -> tuple[str, str]:
    """(extra field path, message) for one pydantic error, chosen by its ``type`` code."""
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    got = "" if isinstance(value, dict | list) or value is None else f", got {shown(value)}"
    if kind == "extra_forbidden":
        if str(err["loc"][-1]) in _SECRET_NAMES:
            return "", (
                "secrets never go in a file: put the secret in an environment variable and "
                "give its name instead (api_key_env, password_env)"
            )
        return "", "unknown field (not in the schema; check the spelling)"
    if kind == "missing":
        return "", "required field is missing"
    if kind in _TYPE_MESSAGES:
        return "", f"{_TYPE_MESSAGES[kind]}, got {shown(value)}{_unsigned_exponent(value)}"
    if kind == "value_error":
        cause = ctx.get("error")
        text = str(cause) if cause is not None else str(err["msg"])
        return (cause.field if isinstance(cause, FieldValueError) else ""), text
    if kind == "too_short":
        return "", "must not be empty (at least one item)"
    if kind == "string_pattern_mismatch" and err["loc"][-1:] == ("id",):
        return "", (
            f"{shown(value)} is not a valid id: use lower-case letters, digits, '.', '_' and"
            " '-', starting with a letter or digit (it becomes a file and page name)"
        )
    if kind.startswith(("date_", "datetime_")):
        datetime = kind.startswith("datetime_")
        form = "a date and time as YYYY-MM-DDTHH:MM:SSZ" if datetime else "a date as YYYY-MM-DD"
        why = f" ({ctx['error']})" if "error" in ctx else ""
        return "", f"must be {form}, got {shown(value)}{why}"
    message = _ctx_message(kind, ctx)
    if message is None:
        # A type no record field produces today: pydantic's own sentence, marked as such.
        message = f"is not valid ({kind}: {err['msg']})"
    return "", f"{message}{got}"


def problems_from(file: str, error: ValidationError) -> list[Problem]:
    """One :class:`Problem` per field pydantic reports, in its order; the errors of a
    union's members at one field are one problem, named by the field, never by pydantic's
    name of the member (:data:`_UNION_TAG`).

    Messages are our own plain words, chosen by each error's ``type`` code and filled from
    its ``ctx`` and ``input`` (``must be greater than 0, got -0.6``); pydantic's message text
    is not parsed. A validator's :class:`FieldValueError` adds its field to the path.
    """
    found: dict[str, list[str]] = {}
    for err in error.errors(include_url=False):
        extra, msg = _message(err)
        path = field_path(tuple(err["loc"]))
        if extra:
            path = f"{path}.{extra}" if path and not extra.startswith("[") else path + extra
        found.setdefault(path, []).append(msg)  # a union's members fail at one path
    return [Problem(file, path, _merged(messages)) for path, messages in found.items()]


# NaN or Infinity as a bare value (after ':', ',' or '['), as Python's json module reads them.

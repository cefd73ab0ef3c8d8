"""Reading records from files, with one clear :class:`Problem` per thing wrong.

Every loader names the file and the field path (``configs[1].accuracy.score``) of each
problem and raises :class:`~tokenwatt.errors.RecordError` or
:class:`~tokenwatt.errors.SpecError`; nothing is written.
"""

from __future__ import annotations

import json
import math
import re
import stat
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, Discriminator, Tag, TypeAdapter, ValidationError

from tokenwatt.errors import InputError, Problem, RecordError, SpecError
from tokenwatt.records.base import FieldValueError
from tokenwatt.records.report_v1 import ReportV1
from tokenwatt.records.report_v2 import ReportV2, v1_to_v2
from tokenwatt.records.report_v3 import ReportV3, v2_to_v3
from tokenwatt.records.spec import Spec

M = TypeVar("M", bound=BaseModel)


def _report_version(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("schema_version", 1))
    return str(getattr(value, "schema_version", 1))


AnyReport = Annotated[
    Annotated[ReportV1, Tag("1")] | Annotated[ReportV2, Tag("2")] | Annotated[ReportV3, Tag("3")],
    Discriminator(_report_version),
]
_REPORT_ADAPTER: TypeAdapter[ReportV1 | ReportV2 | ReportV3] = TypeAdapter(AnyReport)

NEWEST_REPORT_VERSION = 3
KNOWN_REPORT_VERSIONS = (1, 2, 3)


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


def _json_kind(value: Any) -> str:
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


def _shown(value: Any) -> str:
    """A short rendering of a bad input value (scalars only; containers by kind)."""
    if isinstance(value, dict | list) or value is None:
        return _json_kind(value)
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
    got = "" if isinstance(value, dict | list) or value is None else f", got {_shown(value)}"
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
        return "", f"{_TYPE_MESSAGES[kind]}, got {_shown(value)}{_unsigned_exponent(value)}"
    if kind == "value_error":
        cause = ctx.get("error")
        text = str(cause) if cause is not None else str(err["msg"])
        return (cause.field if isinstance(cause, FieldValueError) else ""), text
    if kind == "too_short":
        return "", "must not be empty (at least one item)"
    if kind == "string_pattern_mismatch" and err["loc"][-1:] == ("id",):
        return "", (
            f"{_shown(value)} is not a valid id: use lower-case letters, digits, '.', '_' and"
            " '-', starting with a letter or digit (it becomes a file and page name)"
        )
    if kind.startswith(("date_", "datetime_")):
        datetime = kind.startswith("datetime_")
        form = "a date and time as YYYY-MM-DDTHH:MM:SSZ" if datetime else "a date as YYYY-MM-DD"
        why = f" ({ctx['error']})" if "error" in ctx else ""
        return "", f"must be {form}, got {_shown(value)}{why}"
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
_JSON_CONSTANT = re.compile(r"(?<=[:,\[])\s*(-?Infinity|NaN)\b")


def _reject_constant(name: str) -> float:
    raise ValueError(
        f"{name} is not a number JSON allows; write a number, or null where the field allows"
    )


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


_TOO_DEEP = "arrays or objects are nested too deeply (no record needs more than a few levels)"


def _plain(exc: ValueError) -> str:
    """A parser's ValueError in the user's words (Python's digit limit names a sys call)."""
    if "integer string conversion" in str(exc):
        return "a number has thousands of digits (no field needs one)"
    return str(exc)


# A high surrogate escape not followed by a low one, or a low one not after a high one: a
# pair (an emoji written as two escapes) is one character and fine.
_SURROGATE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def _surrogate_path(data: Any, path: str = "") -> str:
    """The field path of the first string (or key) holding a lone surrogate ("" if none)."""
    if isinstance(data, str):
        return path if _has_surrogate(data) else ""
    if isinstance(data, dict):
        for k, v in data.items():
            here = f"{path}.{k}" if path else str(k)
            if _has_surrogate(str(k)):
                return here
            found = _surrogate_path(v, here)
            if found:
                return found
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found = _surrogate_path(v, f"{path}[{i}]")
            if found:
                return found
    return ""


MAX_YAML_BYTES = 1 << 20
"""Largest YAML file read (1 MiB): specs and session files are written by hand and are a
few kilobytes; PyYAML parses about a megabyte a second, so a far larger file would hold the
command for minutes before any error."""
MAX_JSON_BYTES = 64 << 20
"""Largest JSON file read (64 MiB): run records with every power timeline are a few
megabytes, report records and config.json files less."""


def _check_size(path: Path, error: type[InputError], max_bytes: int) -> None:
    """Refuse, before reading, a file that is not a plain file (a FIFO would block the read
    forever) or is larger than ``max_bytes``: one policy for every YAML and JSON file the
    tool reads from the user. (``tokenwatt.files.check_regular_file`` is the same check for
    the stages; records may not import ``files``, which ``analysis`` must not reach.)"""
    file = str(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise error([Problem(file, "", f"cannot read the file: {exc.strerror or exc}")]) from exc
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a plain file"
        raise error([Problem(file, "", f"the file is {kind}; give a file")])
    if info.st_size > max_bytes:
        message = (
            f"the file is {info.st_size:,} bytes, more than the {max_bytes:,} accepted "
            "for this kind of file"
        )
        raise error([Problem(file, "", message)])


def read_json(path: Path, error: type[InputError] = RecordError) -> Any:
    """Parse a JSON file strictly.

    NaN/Infinity literals, duplicate keys in one object, nesting too deep for the parser and
    syntax errors become ``error`` (one :class:`Problem` naming the file, with line and
    column for syntax errors). A file over :data:`MAX_JSON_BYTES`, or not a plain file, is
    refused before it is read.
    """
    file = str(path)
    _check_size(path, error, MAX_JSON_BYTES)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error([Problem(file, "", f"cannot read the file: {exc.strerror or exc}")]) from exc
    except UnicodeDecodeError as exc:
        raise error([Problem(file, "", "the file is not UTF-8 text")]) from exc
    if not text.strip():
        raise error(
            [Problem(file, "", "not valid JSON: the file is empty (expected a JSON object)")]
        )
    try:
        data = json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys
        )
        surrogate = _SURROGATE_ESCAPE.search(text)
        if surrogate is not None and (where := _surrogate_path(data)):
            line = text.count("\n", 0, surrogate.start()) + 1
            raise error(
                [
                    Problem(
                        file,
                        where,
                        f"line {line}: {surrogate.group()} is half of a character (a lone "
                        "surrogate), not text; write the text as UTF-8",
                    )
                ]
            )
        return data
    except RecursionError as exc:
        raise error([Problem(file, "", f"not valid JSON: {_TOO_DEEP}")]) from exc
    except json.JSONDecodeError as exc:
        hint = ""
        if exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()) - 1:
            hint = "; the file ends early (truncated?)"
        raise error(
            [
                Problem(
                    file,
                    "",
                    f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}){hint}",
                )
            ]
        ) from exc
    except ValueError as exc:
        constant = _JSON_CONSTANT.search(text)
        where = f" (line {text.count(chr(10), 0, constant.start()) + 1})" if constant else ""
        raise error([Problem(file, "", f"not valid JSON{where}: {_plain(exc)}")]) from exc


def validate(model: type[M], data: Any, file: str, error: type[InputError] = RecordError) -> M:
    """Validate parsed JSON ``data`` as ``model``, strictly, as its JSON Schema reads.

    Strict: a number written as a string (``"4572.3"``), a boolean where a number goes, or
    ``2.0`` where a whole number goes is an error, not silently converted — the record is
    published as it is and must fit the schema published beside it. Every pydantic error
    becomes one :class:`Problem`.
    """
    try:
        return model.model_validate_json(_as_json(data), strict=True)
    except ValidationError as exc:
        raise error(problems_from(file, exc)) from exc


def _as_json(data: Any) -> str:
    """``data`` (as :func:`read_json` gives it) back as JSON text, for pydantic's JSON mode.

    JSON mode reads dates from strings even when strict, which Python mode does not. A
    number too big for a float (``1e999``) is written as ``Infinity``, which the models
    refuse as not finite.
    """
    return json.dumps(data, ensure_ascii=False)


def parse_report(data: Any, file: str) -> ReportV1 | ReportV2 | ReportV3:
    """Validate a report record of any known version, as stored (no migration)."""
    if not isinstance(data, dict):
        raise RecordError(
            [Problem(file, "", f"a report record must be a JSON object, got {_json_kind(data)}")]
        )
    if "schema_version" in data:
        version = data["schema_version"]
        if type(version) is not int or version not in KNOWN_REPORT_VERSIONS:
            known = ", ".join(str(v) for v in KNOWN_REPORT_VERSIONS)
            raise RecordError(
                [
                    Problem(
                        file,
                        "schema_version",
                        f"unknown schema_version {_shown(version)}; known versions are {known}"
                        " (a JSON number; leave it out for version 1)",
                    )
                ]
            )
    try:
        return _REPORT_ADAPTER.validate_json(_as_json(data), strict=True)
    except ValidationError as exc:
        raise RecordError(problems_from(file, exc)) from exc


def migrate_report(report: ReportV1 | ReportV2 | ReportV3) -> ReportV3:
    """Bring a report of any version to the newest version (pure): v1 → v2 → v3."""
    if isinstance(report, ReportV3):
        return report
    if not isinstance(report, ReportV2):
        report = v1_to_v2(report)
    return v2_to_v3(report)


def load_report(path: Path) -> ReportV3:
    """Read, validate and migrate a report record file to the newest version.

    Raises:
        RecordError: unreadable file, bad JSON, or schema problems (one per problem).
    """
    return migrate_report(parse_report(read_json(path), str(path)))


def load_spec(path: Path) -> Spec:
    """Read and validate a YAML (or JSON) benchmark spec.

    Raises:
        SpecError: unreadable file, bad YAML, or schema problems (one per problem).
    """
    data = read_yaml(
        path, SpecError, "a spec must be a mapping of sections (name, hardware, engine, ...)"
    )
    try:
        # Strict, as for JSON records: `window_s: "120"` or `repeats: true` is an error.
        return Spec.model_validate(data, strict=True)
    except ValidationError as exc:
        raise SpecError(problems_from(str(path), exc)) from exc


def read_yaml(
    path: Path, error: type[InputError], what: str, kind: str = "a spec"
) -> dict[str, Any]:
    """A YAML (or JSON) file that must hold a mapping: duplicate keys, NaN and infinity are
    refused, as for JSON records.

    Args:
        path: the file.
        error: the error class to raise.
        what: the start of the message when the file holds no mapping ("a spec must be …").
        kind: what the file is, in messages ("a spec", "a session file").

    Raises:
        error: unreadable file, not a plain file or over :data:`MAX_YAML_BYTES`, not UTF-8,
            bad YAML, not a mapping, a lone surrogate (``"\\ud800"``) in a string (naming
            the file, and the field where there is one).
    """
    file = str(path)
    _check_size(path, error, MAX_YAML_BYTES)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error([Problem(file, "", f"cannot read the file: {exc.strerror or exc}")]) from exc
    except UnicodeDecodeError as exc:
        raw = path.read_bytes()
        line = raw[: exc.start].count(b"\n") + 1
        message = f"line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); save it as UTF-8"
        raise error([Problem(file, "", message)]) from None
    try:
        loader = _StrictYamlLoader(text)
        loader.kind = kind
        try:
            data = loader.get_single_data()  # what yaml.load does, with the kind set
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise error([Problem(file, "", f"not valid YAML: {_yaml_message(exc)}")]) from exc
    except RecursionError as exc:
        raise error([Problem(file, "", f"not valid YAML: {_TOO_DEEP}")]) from exc
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise error([Problem(file, "", f"not valid YAML: {_plain(exc)}")]) from exc
    if not isinstance(data, dict):
        raise error([Problem(file, "", f"{what}, got {_json_kind(data)}")])
    _reject_nonfinite(data, file, error)
    if where := _surrogate_path(data):
        message = "holds half of a character (a lone surrogate such as \\ud800), not text"
        raise error([Problem(file, where, message)])
    return data


class _StrictYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error, and
    so is any alias (``*name``): a spec never needs one, and nested aliases expand
    exponentially (the "billion laughs" file that takes minutes and gigabytes to walk)."""

    kind = "a spec"
    """What the file is, for messages ("a spec", "a session file")."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        """Compose a node, refusing aliases."""
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None,
                None,
                f"anchors and aliases (&name, *name) are not allowed in {self.kind}; write "
                "the values out",
                event.start_mark,
            )
        return super().compose_node(parent, index)


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, list | dict | set):  # `[a, b]: 3` or `? {a: 1}`: no field name
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a {type(key).__name__} is used as a key; keys are field names",
                key_node.start_mark,
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key!r} appears twice in one mapping", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictYamlLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def _yaml_message(exc: yaml.YAMLError) -> str:
    """A one-line YAML error: what was wrong, and where (1-based line and column)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        what = exc.problem or exc.context or "syntax error"
        mark = exc.problem_mark or exc.context_mark
        if mark is not None:
            return f"{what} (line {mark.line + 1}, column {mark.column + 1})"
        return what
    return str(exc).splitlines()[0]


def _reject_nonfinite(
    data: Any, file: str, error: type[InputError] = SpecError, path: str = ""
) -> None:
    """YAML allows ``.nan`` and ``.inf``; no spec or session file needs them."""
    if isinstance(data, float) and not math.isfinite(data):
        raise error([Problem(file, path, f"{data} is not a finite number")])
    if isinstance(data, dict):
        for k, v in data.items():
            _reject_nonfinite(v, file, error, f"{path}.{k}" if path else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _reject_nonfinite(v, file, error, f"{path}[{i}]")

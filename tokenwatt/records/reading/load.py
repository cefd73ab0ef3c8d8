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
from tokenwatt.records.reading.problems import json_kind, problems_from, shown
from tokenwatt.records.report.report_v1 import ReportV1
from tokenwatt.records.report.report_v2 import ReportV2, v1_to_v2
from tokenwatt.records.report.report_v3 import ReportV3, v2_to_v3
from tokenwatt.records.spec.spec import Spec

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
            [Problem(file, "", f"a report record must be a JSON object, got {json_kind(data)}")]
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
                        f"unknown schema_version {shown(version)}; known versions are {known}"
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
        raise error([Problem(file, "", f"{what}, got {json_kind(data)}")])
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

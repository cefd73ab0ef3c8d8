"""Reading records from files, with one clear :class:`Problem` per thing wrong.

Every loader names the file and the field path (``configs[1].accuracy.score``) of each
problem and raises :class:`~tokenwatt.errors.RecordError` or
:class:`~tokenwatt.errors.SpecError`; nothing is written.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, Discriminator, Tag, TypeAdapter, ValidationError

from tokenwatt.errors import InputError, Problem, RecordError, SpecError
from tokenwatt.records.report_v1 import ReportV1
from tokenwatt.records.report_v2 import ReportV2, v1_to_v2
from tokenwatt.records.spec import Spec

M = TypeVar("M", bound=BaseModel)


def _report_version(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("schema_version", 1))
    return str(getattr(value, "schema_version", 1))


AnyReport = Annotated[
    Annotated[ReportV1, Tag("1")] | Annotated[ReportV2, Tag("2")],
    Discriminator(_report_version),
]
_REPORT_ADAPTER: TypeAdapter[ReportV1 | ReportV2] = TypeAdapter(AnyReport)

NEWEST_REPORT_VERSION = 2


def field_path(loc: tuple[int | str, ...]) -> str:
    """Format a pydantic error location as ``a.b[2].c`` (union tags removed)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("1", "2") and not out:
            continue  # the discriminator's tag, not a field
        elif part.startswith(("function-", "tagged-union")):
            continue
        else:
            out += f".{part}" if out else part
    return out


def problems_from(file: str, error: ValidationError) -> list[Problem]:
    """One :class:`Problem` per pydantic error, in the order pydantic reports them."""
    problems = []
    for err in error.errors(include_url=False):
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field (not in the schema; check the spelling)"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "union_tag_invalid":
            msg = f"unknown schema_version {err.get('input')!r}; known: 1, 2"
        problems.append(Problem(file, field_path(tuple(err["loc"])), msg))
    return problems


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def read_json(path: Path, error: type[InputError] = RecordError) -> Any:
    """Parse a JSON file; NaN/Infinity literals and syntax errors become ``error``."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error([Problem(file, "", f"cannot read the file: {exc.strerror or exc}")]) from exc
    except UnicodeDecodeError as exc:
        raise error([Problem(file, "", "the file is not UTF-8 text")]) from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise error(
            [
                Problem(
                    file, "", f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
                )
            ]
        ) from exc
    except ValueError as exc:
        raise error([Problem(file, "", f"not valid JSON: {exc}")]) from exc


def validate(model: type[M], data: Any, file: str, error: type[InputError] = RecordError) -> M:
    """Validate ``data`` as ``model``; every pydantic error becomes one :class:`Problem`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(problems_from(file, exc)) from exc


def parse_report(data: Any, file: str) -> ReportV1 | ReportV2:
    """Validate a report record of any known version, as stored (no migration)."""
    if not isinstance(data, dict):
        raise RecordError([Problem(file, "", "a report record must be a JSON object")])
    try:
        return _REPORT_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise RecordError(problems_from(file, exc)) from exc


def migrate_report(report: ReportV1 | ReportV2) -> ReportV2:
    """Bring a report of any version to the newest version (pure)."""
    if isinstance(report, ReportV2):
        return report
    return v1_to_v2(report)


def load_report(path: Path) -> ReportV2:
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
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(
            [Problem(file, "", f"cannot read the file: {exc.strerror or exc}")]
        ) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError([Problem(file, "", f"not valid YAML: {exc}")]) from exc
    if not isinstance(data, dict):
        raise SpecError([Problem(file, "", "a spec must be a mapping of sections")])
    _reject_nonfinite(data, file)
    return validate(Spec, data, file, SpecError)


def _reject_nonfinite(data: Any, file: str, path: str = "") -> None:
    """YAML allows ``.nan`` and ``.inf``; a spec never needs them."""
    if isinstance(data, float) and not math.isfinite(data):
        raise SpecError([Problem(file, path, f"{data} is not a finite number")])
    if isinstance(data, dict):
        for k, v in data.items():
            _reject_nonfinite(v, file, f"{path}.{k}" if path else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _reject_nonfinite(v, file, f"{path}[{i}]")

"""JSON Schema export of every record model (published on the site, committed under schemas/)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from tokenwatt.errors import InputError, Problem, TokenwattError
from tokenwatt.files import atomic_write_bytes
from tokenwatt.records.base import MAX_TEXT_CHARS
from tokenwatt.records.load import AnyReport
from tokenwatt.records.run import RunRecord
from tokenwatt.records.spec import Spec


def json_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schemas (draft 2020-12, pydantic's output) keyed by file stem.

    ``report`` accepts every known report version (v1 without ``schema_version``, v2, v3);
    ``run`` is the run record; ``spec`` the benchmark spec.
    """
    schemas = {
        "report": TypeAdapter(AnyReport).json_schema(),
        "run": RunRecord.model_json_schema(),
        "spec": Spec.model_json_schema(),
    }
    for schema in schemas.values():
        _bound_strings(schema)
    return schemas


def _bound_strings(node: Any) -> None:
    """Write the models' default text limit (:data:`MAX_TEXT_CHARS`) into every string
    schema that has no limit of its own, mapping keys included: pydantic applies
    ``str_max_length`` but its versions differ in what they export (2.14 writes it for
    mapping keys only), and the committed schemas must not depend on the version."""
    if isinstance(node, dict):
        if "additionalProperties" in node and node.get("type") == "object":
            node.setdefault("propertyNames", {}).setdefault("maxLength", MAX_TEXT_CHARS)
        if node.get("type") == "string" and not {"maxLength", "enum", "const", "format"} & set(
            node
        ):
            node["maxLength"] = MAX_TEXT_CHARS
        for value in node.values():
            _bound_strings(value)
    elif isinstance(node, list):
        for value in node:
            _bound_strings(value)


def schema_text(schema: dict[str, Any]) -> str:
    """Canonical text of a schema: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class StaleSchemaError(TokenwattError):
    """``tokenwatt schema --check`` found committed schema files that differ from the models."""


@dataclass(frozen=True)
class SchemaExport:
    """What :func:`export_schemas` did: files written, and files already current."""

    written: list[Path]
    current: list[Path]


def schema_files(out_dir: Path) -> dict[Path, str]:
    """Each schema's file (``<out_dir>/<name>.schema.json``) and its canonical text."""
    return {
        out_dir / f"{name}.schema.json": schema_text(schema)
        for name, schema in json_schemas().items()
    }


def export_schemas(out_dir: Path, *, check: bool = False) -> SchemaExport:
    """Write the JSON Schema files into ``out_dir``, or with ``check`` only compare them.

    Each file is written atomically (temporary file in the same folder, then ``os.replace``),
    and only when its text changed, so an up-to-date folder is left untouched.

    Raises:
        StaleSchemaError: with ``check``, when a file is missing or differs (names each one).
        InputError: a schema file cannot be read or written: a folder in its place, a file
            where ``out_dir`` should be, a full or read-only disk.
    """
    written: list[Path] = []
    current: list[Path] = []
    stale: list[Path] = []
    for path, text in schema_files(out_dir).items():
        try:
            old: str | None = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            old = None
        except (IsADirectoryError, NotADirectoryError) as exc:
            raise _cannot(path, exc) from exc
        except UnicodeDecodeError:
            old = None  # not UTF-8: stale, rewritten below
        if old == text:
            current.append(path)
        elif check:
            stale.append(path)
        else:
            try:
                out_dir.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(path, text.encode("utf-8"))
            except OSError as exc:
                raise _cannot(path, exc) from exc
            written.append(path)
    if stale:
        names = ", ".join(str(p) for p in stale)
        raise StaleSchemaError(
            f"schema files are stale or missing: {names}; run `tokenwatt schema` and commit them"
        )
    return SchemaExport(written, current)


def _cannot(path: Path, exc: OSError) -> InputError:
    """The error for a schema file that cannot be read or written (a folder in its place,
    a file where the folder should be, a full or read-only disk)."""
    why = "a folder is in the way" if path.is_dir() else str(exc.strerror or exc)
    return InputError([Problem(str(path), "", f"cannot read or write the schema file: {why}")])

"""JSON Schema export of every record model (published on the site, committed under schemas/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from tokenwatt.records.reading.load import AnyReport
from tokenwatt.records.reading.session import Session
from tokenwatt.records.report.replication import ReplicationV1
from tokenwatt.records.run.run import RunRecord
from tokenwatt.records.shared.base import MAX_TEXT_CHARS
from tokenwatt.records.spec.spec import Spec


def json_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schemas (draft 2020-12, pydantic's output) keyed by file stem.

    ``report`` accepts every known report version (v1 without ``schema_version``, v2, v3);
    ``run`` is the run record; ``spec`` the benchmark spec; ``session`` the file
    ``tokenwatt session`` runs; ``replication`` what ``tokenwatt replicate`` writes.
    """
    schemas = {
        "report": TypeAdapter(AnyReport).json_schema(),
        "run": RunRecord.model_json_schema(),
        "spec": Spec.model_json_schema(),
        "session": Session.model_json_schema(),
        "replication": ReplicationV1.model_json_schema(),
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


def schema_files(out_dir: Path) -> dict[Path, str]:
    """Each schema's file (``<out_dir>/<name>.schema.json``) and its canonical text."""
    return {
        out_dir / f"{name}.schema.json": schema_text(schema)
        for name, schema in json_schemas().items()
    }

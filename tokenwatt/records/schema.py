"""JSON Schema export of every record model (published on the site, committed under schemas/)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter

from tokenwatt.records.load import AnyReport
from tokenwatt.records.run import RunRecord
from tokenwatt.records.spec import Spec


def json_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schemas (draft 2020-12, pydantic's output) keyed by file stem.

    ``report`` accepts every known report version (v1 without ``schema_version``, v2);
    ``run`` is the run record; ``spec`` the benchmark spec.
    """
    return {
        "report": TypeAdapter(AnyReport).json_schema(),
        "run": RunRecord.model_json_schema(),
        "spec": Spec.model_json_schema(),
    }


def schema_text(schema: dict[str, Any]) -> str:
    """Canonical text of a schema: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

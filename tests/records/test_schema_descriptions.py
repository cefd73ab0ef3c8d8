"""Every property of every record schema explains itself: a walker over the generated JSON
Schemas fails on any property without a description.

The spec schema (what people write) has no exception. Run and report fields that had no
description when this test came in are listed in ``undescribed_fields.txt``; the list may
only shrink: a new field without a description fails, and so does a listed field that has
gained one (take it off the list).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenwatt.records.schema import json_schemas

KNOWN_GAPS = Path(__file__).with_name("undescribed_fields.txt")


def undescribed(schema: dict[str, Any], where: str) -> set[str]:
    """``Model.field`` of every property (top level and under ``$defs``) that has no
    non-empty description; ``where`` names the top-level model."""
    out: set[str] = set()
    for name, prop in schema.get("properties", {}).items():
        if not (isinstance(prop, dict) and str(prop.get("description", "")).strip()):
            out.add(f"{where}.{name}")
    for name, sub in schema.get("$defs", {}).items():
        out |= undescribed(sub, name)
    return out


def test_the_walker_finds_a_property_without_description() -> None:
    schema = {
        "properties": {"a": {"type": "string", "description": "A."}, "b": {"type": "string"}},
        "$defs": {"Inner": {"properties": {"c": {"description": " "}}}},
    }
    assert undescribed(schema, "Top") == {"Top.b", "Inner.c"}


def test_every_spec_field_has_a_description() -> None:
    schema = json_schemas()["spec"]
    assert undescribed(schema, "Spec") == set()


def test_no_run_or_report_field_is_undescribed_beyond_the_known_gaps() -> None:
    schemas = json_schemas()
    found = undescribed(schemas["run"], "RunRecord") | undescribed(schemas["report"], "Report")
    known = set(KNOWN_GAPS.read_text(encoding="utf-8").split())
    assert sorted(found - known) == [], "new fields need a description"
    assert sorted(known - found) == [], "described now: remove them from undescribed_fields.txt"

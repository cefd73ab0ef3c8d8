"""Every property of every record schema explains itself: a walker over the generated JSON
Schemas fails on any property without a description, in the spec (what people write), the
run record and the report record (what they read) alike.
"""

from __future__ import annotations

from typing import Any

import pytest

from tokenwatt.records.reading.schema import json_schemas


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


@pytest.mark.parametrize("name", sorted(json_schemas()))
def test_every_field_of_every_schema_has_a_description(name: str) -> None:
    assert sorted(undescribed(json_schemas()[name], name)) == []


def test_the_walker_covers_spec_run_and_report() -> None:
    assert {"spec", "run", "report"} <= set(json_schemas())

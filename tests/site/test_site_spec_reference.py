"""The spec reference page lists every field of the spec's JSON Schema, escaped."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from sitecase import HOSTILE

from tokenwatt.records.reading.schema import json_schemas
from tokenwatt.site.build import build_site
from tokenwatt.site.pages.spec_reference import field_paths, type_text
from tokenwatt.site.pages.templates import render_spec_reference


def schema_paths(node: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> list[str]:
    """Every property path of the schema, found independently of the page's code."""
    out = []
    for name, prop in node.get("properties", {}).items():
        out.append(prefix + name)
        refs = [prop.get("$ref")] + [o.get("$ref") for o in prop.get("anyOf", [])]
        for ref in (r for r in refs if r):
            out += schema_paths(defs[ref.rsplit("/", 1)[-1]], defs, f"{prefix}{name}.")
    return out


def test_the_page_lists_every_spec_field(
    tmp_path: Path, seed_reports: Path, cache_dir: Path
) -> None:
    schema = json_schemas()["spec"]
    expected = schema_paths(schema, schema["$defs"])
    assert "measurement.window_s" in expected and "workload.input_tokens.p90" in expected
    assert sorted(field_paths(schema)) == sorted(expected)
    build_site(seed_reports, tmp_path / "docs", cache_dir=cache_dir)
    page = html.unescape((tmp_path / "docs/spec-reference.md").read_text(encoding="utf-8"))
    for path in expected:
        section, _, name = path.rpartition(".")
        heading = f"## {section or 'spec'}\n"
        part = page[page.index(heading) :]
        part = part[: part.find("\n## ", 1) if "\n## " in part[1:] else len(part)]
        assert f"| `{name}` |" in part, path
    assert "| `endpoint` | string | required | Base URL of the OpenAI-compatible API" in page
    assert '| `api` | "completions" | "chat" | "completions" |' in page


def test_types_read_as_words() -> None:
    assert type_text({"type": "number", "exclusiveMinimum": 0}) == "number > 0"
    assert type_text({"type": "integer", "minimum": 1, "maximum": 1e12}) == "integer ≥ 1"
    assert type_text({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "string | null"
    assert type_text({"type": "array", "items": {"type": "integer", "minimum": 0}}) == (
        "list of integer ≥ 0"
    )


def test_schema_text_is_escaped() -> None:
    schema = {
        "description": HOSTILE,
        "properties": {"x": {"type": "string", "description": HOSTILE, "default": HOSTILE}},
        "required": [],
    }
    page = render_spec_reference(schema)
    assert HOSTILE not in page
    assert html.unescape(page).count(HOSTILE) == 3

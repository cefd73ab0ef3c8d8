"""The spec reference page: every field of the benchmark spec, generated from its JSON Schema.

One section per part of the spec (``hardware``, ``engine``, ...), nested parts under their
parent's dotted name, and a table row per field with its type, default and description.
Everything comes from :func:`tokenwatt.records.reading.schema.json_schemas` (the same schema the
``# yaml-language-server: $schema=...`` comment of a spec points editors at), so the page
cannot drift from the model. Schema text is escaped like record text.
"""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup

from tokenwatt.site.format.escape import DASH, md_text, trusted

Schema = dict[str, Any]


def _ref_name(node: Schema) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _object_ref(node: Schema) -> str | None:
    """The ``$defs`` name of a nested part, also when it may be null (``anyOf``)."""
    name = _ref_name(node)
    if name is not None:
        return name
    for option in node.get("anyOf", []):
        if isinstance(option, dict) and _ref_name(option) is not None:
            return _ref_name(option)
    return None


def type_text(node: Schema) -> str:
    """A field's type in words: ``number > 0``, ``"a" | "b"``, ``list of integer``,
    ``section hardware``, ``... | null``."""
    if "anyOf" in node:
        return " | ".join(type_text(option) for option in node["anyOf"])
    name = _ref_name(node)
    if name is not None:
        return f"object ({name})"
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return " | ".join(json.dumps(v) for v in node["enum"])
    kind = node.get("type", "any")
    if kind == "array":
        return f"list of {type_text(node.get('items', {}))}"
    if kind == "object":
        values = node.get("additionalProperties")
        return f"map of {type_text(values)}" if isinstance(values, dict) else "object"
    bounds = []
    if "exclusiveMinimum" in node:
        bounds.append(f"> {node['exclusiveMinimum']:g}")
    elif "minimum" in node and node["minimum"] != 0:
        bounds.append(f"≥ {node['minimum']:g}")
    elif "minimum" in node:
        bounds.append("≥ 0")
    if "exclusiveMaximum" in node:
        bounds.append(f"< {node['exclusiveMaximum']:g}")
    elif "maximum" in node and node["maximum"] < 1e12:
        bounds.append(f"≤ {node['maximum']:g}")
    return " ".join([str(kind), *bounds])


def _default(node: Schema, required: bool) -> Markup | str:
    if required:
        return trusted("required")
    if "default" not in node:
        return DASH
    return json.dumps(node["default"], ensure_ascii=False)


def _description(node: Schema) -> str:
    return " ".join(str(node.get("description", "")).split())


def reference_sections(schema: Schema) -> list[dict[str, Any]]:
    """The page's sections in order: ``title`` (dotted path, ``spec`` for the top),
    ``description`` and ``rows`` (``name``, ``type``, ``default``, ``description``) for
    each object of the spec, depth first in the schema's field order."""
    defs: dict[str, Schema] = schema.get("$defs", {})
    sections: list[dict[str, Any]] = []

    def visit(node: Schema, path: str) -> None:
        required = set(node.get("required", []))
        rows = []
        nested: list[tuple[str, Schema]] = []
        for name, prop in node.get("properties", {}).items():
            rows.append(
                {
                    "name": trusted(f"`{name}`") if name.isidentifier() else md_text(name),
                    "type": type_text(prop),
                    "default": _default(prop, name in required),
                    "description": _description(prop),
                }
            )
            ref = _object_ref(prop)
            if ref is not None and ref in defs:
                nested.append((f"{path}.{name}" if path else name, defs[ref]))
        sections.append({"title": path or "spec", "description": _description(node), "rows": rows})
        for child_path, child in nested:
            visit(child, child_path)

    visit(schema, "")
    return sections


def field_paths(schema: Schema) -> list[str]:
    """Dotted paths of every field the page lists (``engine.endpoint``, ...), for tests and
    for checking that the page is complete."""
    out = []
    for section in reference_sections(schema):
        prefix = "" if section["title"] == "spec" else section["title"] + "."
        for row in section["rows"]:
            out.append(prefix + str(row["name"]).strip("`"))
    return out

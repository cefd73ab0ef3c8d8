"""The Jinja2 side of the site: the template folder, the escaping environment, small pages.

The template environment escapes every value it prints (``finalize``) unless the value is
:class:`~markupsafe.Markup` made by this package (numbers, code blocks, chart JSON), so
record text cannot become HTML, Markdown or template code even if a template forgets to
escape it. This module stays light (no pydantic models, no Altair) so that a rebuild with
nothing changed never imports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

import tokenwatt
from tokenwatt.site.format.escape import code_block, md_text, trusted


def templates_dir() -> Path:
    """The ``site_templates/`` folder: the repository's, else the copy installed with us."""
    package = Path(tokenwatt.__file__).resolve().parent
    for candidate in (package.parent / "site_templates", package / "site_templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("site_templates/ not found beside the tokenwatt package")


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup):
        return value
    return md_text(value)


_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def slug(value: str) -> Markup:
    """A report id for use in a link target; ids are validated to ``[a-z0-9._-]``.

    Raises:
        ValueError: anything else (a record model that stopped validating ids).
    """
    if not _SLUG.match(value):
        raise ValueError(f"not a safe report id: {value!r}")
    return trusted(value)


@cache
def environment(folder: Path) -> Environment:
    """The Jinja2 environment over ``folder``: strict undefined, escaping finalize."""
    # Output is Markdown, not HTML: HTML autoescaping would be the wrong escape; _finalize
    # applies the Markdown-and-HTML escape to every printed value instead.
    env = Environment(
        loader=FileSystemLoader(str(folder)),
        undefined=StrictUndefined,
        finalize=_finalize,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # noqa: S701
    )
    env.filters["code"] = code_block
    env.filters["md"] = md_text
    env.filters["slug"] = slug
    return env


@dataclass(frozen=True)
class RenderedReport:
    """One report's page, ready to write, plus what the index and terminal need.

    ``outcome`` is the few-word verdict the index shows (recomputed by the analysis);
    ``updated`` is True when the record carries update notices; ``cloud`` the cloud
    sessions' total cost (empty for a report without one); ``rows`` the configurations'
    archive rows (:func:`tokenwatt.analysis.report_rows`, as dicts; None in cache entries
    of an older shape), ``replication`` the latest replication's verdict (``agrees``,
    ``disagrees``, ``inconclusive``; empty without one), ``trend`` the points its
    replications give the trend chart (:func:`tokenwatt.site.pages.replications.trend_rows`),
    which the build completes with other notes of the same spec fingerprint.
    """

    id: str
    title: str
    published: str
    status: str
    demo: bool
    hardware: str
    model: str
    outcome: str
    updated: bool
    page: str
    warnings: list[str]
    cloud: str = ""
    rows: list[dict[str, Any]] | None = None
    replication: str = ""
    trend: list[dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (for the page cache)."""
        return dict(self.__dict__)


def render_index(reports: list[RenderedReport]) -> str:
    """The index of lab notes, newest first (then by id for a stable order)."""
    ordered = sorted(reports, key=lambda r: r.id)
    ordered.sort(key=lambda r: r.published, reverse=True)
    env = environment(templates_dir())
    return env.get_template("index.md.j2").render({"reports": ordered})


def render_frontier(rows: list[dict[str, Any]]) -> str:
    """The frontier page over every note's archive rows, frontier flags set
    (:mod:`tokenwatt.site.pages.frontier`)."""
    from tokenwatt.site.pages.frontier import frontier_context

    env = environment(templates_dir())
    return env.get_template("frontier.md.j2").render(frontier_context(rows))


def render_spec_reference(spec_schema: dict[str, Any]) -> str:
    """The spec reference page: every spec field with its type, default and description,
    from the spec's JSON Schema (:mod:`tokenwatt.site.pages.spec_reference`)."""
    from tokenwatt.site.pages.spec_reference import reference_sections

    env = environment(templates_dir())
    return env.get_template("spec-reference.md.j2").render(
        {"sections": reference_sections(spec_schema)}
    )


def render_schemas(schemas: dict[str, str]) -> str:
    """The schemas page: one section per schema with its text and a download link."""
    env = environment(templates_dir())
    items = [
        {"name": name, "file": f"{name}.schema.json", "code": code_block(text.rstrip("\n"), "json")}
        for name, text in sorted(schemas.items())
    ]
    return env.get_template("schemas.md.j2").render({"schemas": items})

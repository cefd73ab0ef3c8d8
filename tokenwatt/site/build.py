"""``tokenwatt build``: report records → the MkDocs docs folder.

Reads every ``*.json`` under the reports folder (hidden names aside), validates and
migrates it, refuses simulated measurements outside demo reports, recomputes every derived number
(:mod:`tokenwatt.analysis`), and writes the pages, the raw records, the methods pages, the
schemas page, the guide pages (with the CLI reference the CLI hands over) and the chart
scripts. Every problem of every file is collected before
anything is written; the output is byte-for-byte the same for the same input.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenwatt.errors import InputError, Problem, RecordError, StaleSiteError
from tokenwatt.site.files.archive_audit import (
    Replication,
    archive_run_files,
    changed_runs,
    load_replications,
    orphan_replications,
    replication_problems,
    report_id_of,
    validated_replications,
)
from tokenwatt.site.files.assets import BUNDLE_PATH, static_assets, vega_bundle
from tokenwatt.site.files.cache import PageCache, code_key
from tokenwatt.site.files.output import (
    SITE_MARKER,
    SITE_MARKER_TEXT,
    replace_refusal,
    stale_paths,
    swap_in,
)
from tokenwatt.site.pages.templates import RenderedReport, templates_dir

MBU_PLACEHOLDER = """# MBU

Model bandwidth utilisation: the bytes that must be read from device memory per decode
step (weights touched plus the KV cache of the running batch) times decode steps per second,
divided by the rated memory bandwidth times the number of GPUs.

This page is a placeholder; the full derivation is on its way.
"""

CLI_PLACEHOLDER = """# Command-line reference

`tokenwatt build` writes this page from the click commands; this build was not given
the reference. `tokenwatt COMMAND --help` prints each command's usage and options.
"""

COPIED_FOLDERS = ("methods", "guide")
"""Folders of ``site_templates/`` whose Markdown pages are copied into the docs folder as
they are, each into the folder of the same name."""


@dataclass(frozen=True)
class BuildResult:
    """What a build did: a one-line ``summary`` and the ``warnings`` to show the user."""

    summary: str
    warnings: list[str] = field(default_factory=list)
    pages: int = 0
    changed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Loaded:
    file: str
    raw: bytes
    page: RenderedReport


def build_site(
    reports_dir: Path,
    docs_dir: Path,
    *,
    check: bool = False,
    cache_dir: Path | None = None,
    specs_dir: Path | None = None,
    cli_reference: str | None = None,
) -> BuildResult:
    """Build (or, with ``check``, verify) the docs folder from the report records.

    Args:
        reports_dir: folder of report records (``*.json``).
        docs_dir: the MkDocs docs folder; generated, replaced as a whole on success.
        check: write nothing; raise :class:`StaleSiteError` when ``docs_dir`` differs from
            what the records give.
        cache_dir: where rendered pages and the vega-embed bundle are cached; default
            ``.tokenwatt-cache/`` beside ``docs_dir``. Deleting it only costs time.
        specs_dir: the repository's spec folder, default ``specs/`` beside ``reports_dir``;
            a page whose reproduce text names a spec file found there says where it is.
            A page also says which run files it names are not in ``runs/`` beside
            ``reports_dir``.
        cli_reference: the command-line reference page's Markdown, written as
            ``guide/cli.md`` (``tokenwatt build`` makes it from the click commands: this
            layer never imports the CLI); without it the page says how to get it.

    Raises:
        RecordError: one :class:`Problem` per problem in any record, or per ``*.json`` entry
            that is not a file; nothing is written.
        InputError: ``docs_dir`` is a file, holds the records, is a folder the build did not
            make (see :func:`~tokenwatt.site.files.output.replace_refusal`), or cannot be written
            (disk full, read-only); the previous site is left as it was.
        StaleSiteError: ``check`` found stale, missing or extra files.
    """
    started = time.perf_counter()
    if not reports_dir.is_dir():
        raise RecordError([Problem(str(reports_dir), "", "no such folder of report records")])
    if docs_dir.exists() and not docs_dir.is_dir():
        raise InputError(
            [
                Problem(
                    str(docs_dir),
                    "",
                    "is a file, not a folder: the site is written as a folder here "
                    "(move the file away, or pass another --out)",
                )
            ]
        )
    templates = templates_dir()
    cache_root = cache_dir or docs_dir.resolve().parent / ".tokenwatt-cache"
    spec_names = _spec_names(specs_dir or reports_dir.resolve().parent / "specs")
    run_files = archive_run_files(reports_dir.resolve().parent)
    # The pages depend on which spec and run files exist: their names are in the cache key.
    code = code_key(templates, extra="\n".join([*sorted(spec_names), *sorted(run_files)]))
    cache = PageCache(cache_root / "pages", code, writable=not check)
    # Hidden names are editors' lock and swap files (Emacs' .#x.json is a dangling link).
    refusal = None if check else replace_refusal(docs_dir, reports_dir)
    if refusal is not None:
        raise InputError([Problem(str(docs_dir), "--out", refusal)])
    found = sorted(p for p in reports_dir.glob("*.json") if not p.name.startswith("."))
    files = [p for p in found if p.is_file()]
    reps, problems = load_replications(reports_dir.resolve().parent / "replications")
    loaded, load_problems = _load_all(files, cache, spec_names, run_files, reps)
    problems += load_problems
    problems += orphan_replications(reps, files)
    problems += [p for path in files for p in changed_runs(path, reports_dir.resolve().parent)]
    problems += [_not_a_file(p) for p in found if not p.is_file()]
    problems += _duplicate_ids(loaded)
    if problems:
        raise RecordError(problems)
    outputs = _site_files(loaded, templates, cache, cache_root, write_cache=not check)
    outputs["guide/cli.md"] = (cli_reference or CLI_PLACEHOLDER).encode("utf-8")
    stale = stale_paths(docs_dir, outputs)
    warnings = [w for item in loaded for w in item.page.warnings]
    if check:
        if stale:
            shown = ", ".join(stale[:5]) + (" …" if len(stale) > 5 else "")
            raise StaleSiteError(
                f"{docs_dir}: {len(stale)} generated file(s) differ from what the records give "
                f"({shown}); run `tokenwatt build`"
            )
        return BuildResult(
            f"{docs_dir} is up to date with {len(loaded)} report(s)", warnings, len(loaded)
        )
    if stale:
        try:
            swap_in(docs_dir, outputs, set(stale))
        except OSError as exc:
            raise InputError(
                [
                    Problem(
                        str(docs_dir),
                        "",
                        f"cannot write the site: {exc.strerror or exc}; the previous site is "
                        "unchanged",
                    )
                ]
            ) from exc
    summary = (
        f"built {len(loaded)} report page(s) into {docs_dir}: {len(stale)} file(s) changed, "
        f"{len(warnings)} warning(s), {time.perf_counter() - started:.2f} s"
    )
    return BuildResult(summary, warnings, len(loaded), stale)


def _spec_names(folder: Path) -> frozenset[str]:
    """Names of the regular files in the spec folder (empty when there is none)."""
    try:
        return frozenset(p.name for p in folder.iterdir() if p.is_file())
    except OSError:
        return frozenset()


def _load_all(
    files: list[Path],
    cache: PageCache,
    spec_names: frozenset[str],
    run_files: frozenset[str],
    reps: list[Replication],
) -> tuple[list[_Loaded], list[Problem]]:
    loaded: list[_Loaded] = []
    problems: list[Problem] = []
    for path in files:
        file = str(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            problems.append(Problem(file, "", f"cannot read the file: {exc.strerror or exc}"))
            continue
        mine = [r for r in reps if r.report_id == report_id_of(raw)] if reps else []
        key = cache.key(file, b"\0".join([raw, *(r.raw for r in mine)]))
        entry = cache.get(key)
        if entry is not None:
            try:
                page = RenderedReport(**entry)
                if page.rows is not None and page.trend is not None:
                    loaded.append(_Loaded(file, raw, page))
                    continue
            except TypeError:
                pass  # an entry of an older shape: render again
        # Imported only when a page must be rendered: pydantic models and Altair take ~1 s.
        from tokenwatt.records import load_report
        from tokenwatt.site.pages.pages import refuse_simulated, render_report

        try:
            report = load_report(path)
        except RecordError as exc:
            problems += exc.problems
            continue
        refused = refuse_simulated(report, file)
        if refused:
            problems += refused
            continue
        valid, bad = validated_replications([r for r in mine if r.report_id == report.id])
        bad += replication_problems(report, valid, path.resolve().parent.parent)
        if bad:
            problems += bad
            continue
        page = render_report(report, file, spec_names, run_files, [rep for _, rep in valid])
        cache.put(key, page.to_json())
        loaded.append(_Loaded(file, raw, page))
    return loaded, problems


def _not_a_file(path: Path) -> Problem:
    """A ``*.json`` entry that is a folder, a broken link or a device: said, not skipped."""
    if path.is_symlink() and not path.exists():
        what = "a link to nothing (broken symbolic link)"
    elif path.is_dir():
        what = "a folder"
    else:
        what = "not a regular file"
    return Problem(str(path), "", f"is {what}; a report record must be a JSON file")


def _duplicate_ids(loaded: list[_Loaded]) -> list[Problem]:
    first: dict[str, str] = {}
    problems = []
    for item in loaded:
        other = first.setdefault(item.page.id, item.file)
        if other != item.file:
            problems.append(
                Problem(item.file, "id", f"the id {item.page.id!r} is already used by {other}")
            )
    return problems


TREND_MARKER_TEXT = "<!-- tokenwatt: trends -->"
"""Where a note's trend chart goes (``site.replications.TREND_MARKER``, repeated here so
that a build with nothing changed need not import the module)."""


def _across_notes(loaded: list[_Loaded], cache: PageCache) -> tuple[str, dict[str, str]]:
    """The frontier page and each note's trend section (by id): from the page cache when
    no note's archive rows or replication points changed, else made again (importing the
    analysis and Altair, a second on a 1,000-note archive)."""
    import hashlib

    inputs = [[item.page.id, item.page.rows, item.page.trend] for item in loaded]
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode("utf-8")).hexdigest()
    key = f"across-{cache.code}-{digest}"
    entry = cache.get(key)
    if entry is not None and isinstance(entry.get("frontier"), str):
        trends = entry.get("trends")
        if isinstance(trends, dict) and all(isinstance(v, str) for v in trends.values()):
            return entry["frontier"], {str(k): v for k, v in trends.items()}
    from tokenwatt.site.pages.replications import families, trend_section
    from tokenwatt.site.pages.templates import render_frontier

    fams = families([row for item in loaded for row in item.page.rows or []])
    made = {
        item.page.id: trend_section(item.page.id, item.page.rows or [], item.page.trend or [], fams)
        for item in loaded
    }
    frontier = render_frontier(_frontier_rows(loaded))
    cache.put(key, {"frontier": frontier, "trends": made})
    return frontier, made


def _frontier_rows(loaded: list[_Loaded]) -> list[dict[str, Any]]:
    """Every note's archive rows, frontier flags set across the archive."""
    from tokenwatt import analysis

    ordered = sorted(loaded, key=lambda item: item.page.id)
    return analysis.frontier_rows(row for item in ordered for row in item.page.rows or [])


def schema_texts(cache: PageCache) -> dict[str, str]:
    """The JSON Schema texts by name, from the page cache when the code has not changed."""
    key = f"schemas-{cache.code}"
    entry = cache.get(key)
    if entry is not None and all(isinstance(v, str) for v in entry.values()):
        return {str(k): str(v) for k, v in entry.items()}
    from tokenwatt.records import json_schemas, schema_text

    texts = {name: schema_text(schema) for name, schema in json_schemas().items()}
    cache.put(key, dict(texts))
    return texts


def copied_pages(templates: Path) -> dict[str, bytes]:
    """The methods and guide pages, copied as they are: ``site_templates/F/*.md`` becomes
    ``F/*.md`` in the docs folder for each folder F of :data:`COPIED_FOLDERS`."""
    out: dict[str, bytes] = {}
    for folder in COPIED_FOLDERS:
        for page in sorted((templates / folder).glob("*.md")):
            out[f"{folder}/{page.name}"] = page.read_bytes()
    return out


def _site_files(
    loaded: list[_Loaded],
    templates: Path,
    cache: PageCache,
    cache_root: Path,
    *,
    write_cache: bool,
) -> dict[str, bytes]:
    import json

    from tokenwatt.site.pages.templates import render_index, render_schemas, render_spec_reference

    out: dict[str, bytes] = {}
    frontier, trends = _across_notes(loaded, cache)
    for item in loaded:
        page = item.page
        text = page.page.replace(TREND_MARKER_TEXT + "\n", trends.get(page.id, ""))
        out[f"reports/{item.page.id}.md"] = text.encode("utf-8")
        out[f"reports/{item.page.id}.json"] = item.raw
    out["index.md"] = render_index([item.page for item in loaded]).encode("utf-8")
    out["frontier.md"] = frontier.encode("utf-8")
    out[SITE_MARKER] = SITE_MARKER_TEXT
    out.update(copied_pages(templates))
    out.setdefault("methods/mbu.md", MBU_PLACEHOLDER.encode("utf-8"))
    texts = schema_texts(cache)
    for name, text in texts.items():
        out[f"schemas/{name}.schema.json"] = text.encode("utf-8")
    out["schemas.md"] = render_schemas(texts).encode("utf-8")
    out["spec-reference.md"] = render_spec_reference(json.loads(texts["spec"])).encode("utf-8")
    out.update(static_assets(templates))
    out[BUNDLE_PATH] = vega_bundle(cache_root, write_cache=write_cache)
    return out

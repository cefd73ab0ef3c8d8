"""Record text is data: it never becomes HTML, Markdown structure or template code."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
from sitecase import HOSTILE, MARKDOWN_TRAP, hostile_data, write_record

from tokenwatt.site.build import build_site
from tokenwatt.site.format.escape import bidi_isolated, code_block, json_for_script, md_text

EXTENSIONS = ["admonition", "tables", "fenced_code", "toc"]  # as in mkdocs.yml


class Tags(HTMLParser):
    """Collects start tags with attributes and the text between them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def render(md_text_: str) -> Tags:
    parser = Tags()
    parser.feed(markdown.markdown(md_text_, extensions=EXTENSIONS))
    return parser


@pytest.mark.parametrize(
    "text",
    [HOSTILE, MARKDOWN_TRAP, "1. item", "# heading", "- item", "`code`", "a\n\n# b", "{: .x}"],
)
def test_md_text_renders_as_the_literal_text(text: str) -> None:
    parsed = render(f"Before {md_text(text)} after")
    assert [tag for tag, _ in parsed.tags] == ["p"]
    assert "".join(parsed.text) == "Before " + " ".join(text.split()) + " after"


def test_md_text_at_line_start_starts_no_block() -> None:
    for text in ("1. item", "# heading", "- item", "> quote", "    indented", "!!! note"):
        parsed = render(str(md_text(text)))
        assert [tag for tag, _ in parsed.tags] == ["p"], text


def test_code_block_cannot_be_closed_from_inside() -> None:
    content = "a\n```\n<b>bold</b>\n````\nz"
    parsed = render(str(code_block(content)))
    assert [tag for tag, _ in parsed.tags] == ["pre", "code"]
    assert "".join(parsed.text).strip() == content


def test_json_for_script_cannot_end_the_script_element() -> None:
    data = {"label": "</script><script>alert(1)</script><!--", "amp": "a&b"}
    text = str(json_for_script(data))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == data


def test_hostile_record_stays_text_on_the_page(tmp_path: Path, cache_dir: Path) -> None:
    reports = tmp_path / "reports"
    write_record(reports, hostile_data())
    docs = tmp_path / "docs"
    build_site(reports, docs, cache_dir=cache_dir)
    page = (docs / "reports/hostile-labels.md").read_text(encoding="utf-8")
    parsed = render(page)
    names = [tag for tag, _ in parsed.tags]
    assert "img" not in names
    assert not [a for tag, a in parsed.tags if tag == "a" and a.get("href") == "b"]
    # Only our own h1 and the "Download" link; the summary's "# not a heading" stayed text.
    assert names.count("h1") == 1
    assert "ol" not in names
    # Scripts: only the chart specs, each of which is valid JSON with the labels as data.
    scripts = [a for tag, a in parsed.tags if tag == "script"]
    assert scripts and all(a.get("type") == "application/json" for a in scripts)
    assert "</script><script>alert(2)" not in page
    specs = re.findall(r'<script type="application/json" id="[^"]+">(.*)</script>', page)
    labels = {row["name"] for row in json.loads(specs[0])["datasets"]["rows"]}
    assert labels == {HOSTILE, MARKDOWN_TRAP}
    visible = html.unescape("".join(parsed.text))
    assert f"{HOSTILE} {MARKDOWN_TRAP}" in visible  # the title and the update, literally
    assert "{{ 7*7 }}" in visible and "49" not in visible
    assert "</script><script>alert(2)</script>" in visible  # the engine cell, as text
    assert "</code></pre><img src=x onerror=alert(3)>" in visible  # the reproduce block


def test_hostile_title_in_index_is_text(tmp_path: Path, cache_dir: Path) -> None:
    reports = tmp_path / "reports"
    write_record(reports, hostile_data())
    docs = tmp_path / "docs"
    build_site(reports, docs, cache_dir=cache_dir)
    parsed = render((docs / "index.md").read_text(encoding="utf-8"))
    links = [a["href"] for tag, a in parsed.tags if tag == "a" and a.get("href")]
    assert "reports/hostile-labels.md" in links
    assert "b" not in links
    assert "img" not in [tag for tag, _ in parsed.tags]
    assert f"{HOSTILE} {MARKDOWN_TRAP}" in html.unescape("".join(parsed.text))


RLO, PDF, FSI, PDI, LRI = "\u202e", "\u202c", "\u2068", "\u2069", "\u2066"


@pytest.mark.parametrize(
    ("raw", "isolated"),
    [
        ("plain text", "plain text"),
        (f"evil{RLO}gpj.exe", f"{FSI}evil{RLO}gpj.exe{PDI}"),
        (f"{RLO}closed{PDF}", f"{FSI}{RLO}closed{PDF}{PDI}"),
        # A stray PDI would close our isolate early and let the override leak: dropped.
        (f"x{PDI}{RLO}y", f"{FSI}x{RLO}y{PDI}"),
        # An isolate opened inside is closed with ours.
        (f"{LRI}a", f"{FSI}{LRI}a{PDI}{PDI}"),
    ],
)
def test_directional_controls_are_isolated(raw: str, isolated: str) -> None:
    assert bidi_isolated(raw) == isolated


def test_an_unclosed_override_in_one_field_cannot_reach_the_next() -> None:
    cell = str(md_text(f"label{RLO}"))
    assert cell.startswith(FSI) and cell.endswith(PDI)
    assert cell.count(PDI) == 1


def test_each_value_of_a_composed_cell_is_isolated_on_its_own() -> None:
    """A cell made of several record values (engine and version, provider and instance,
    the refused-power reasons) isolates each value: an override in the first cannot
    reverse the next within the cell."""
    from tests.runs_factory import make_run, tuned_run
    from tokenwatt.analysis.report.summarise import summarise
    from tokenwatt.records import RunInput
    from tokenwatt.site.format.windows import _refused

    run = make_run()
    run.environment.engine_version = f"0.31.0{RLO}"
    inputs = [
        RunInput(f"runs/{r.label}.json", f"{i}" * 64, r) for i, r in enumerate([run, tuned_run()])
    ]
    report = summarise(inputs, title="x")
    engine = report.configs[0].engine
    assert engine.endswith(f"{FSI}0.31.0{RLO}{PDI} · KV BF16"), engine
    repeat = (
        report.configs[0].repeats_detail[0].model_copy(update={"power_refused": [f"a{RLO}", "b"]})
    )
    cell = str(_refused(repeat))
    assert cell.endswith(f"{FSI}a{RLO}{PDI}; b"), cell


def test_chart_data_isolates_every_string_value() -> None:
    text = str(json_for_script({"rows": [{"name": f"lbl{RLO}", "n": 1}], "k": "plain"}))
    data = json.loads(text)
    assert data["rows"][0]["name"] == f"{FSI}lbl{RLO}{PDI}"
    assert data["k"] == "plain" and data["rows"][0]["n"] == 1


def test_a_code_block_writes_control_characters_out() -> None:
    """The reproduce block's copy button copies its text as it is: an escape sequence or a
    right-to-left override must be visible text there, never the character itself."""
    block = str(code_block(f"tokenwatt collect --label a\x1b[2Jb --note x{RLO}y\rz", "sh"))
    assert "\x1b" not in block and RLO not in block and "\r" not in block
    assert "a\\x1b[2Jb" in block and "x\\u202ey\\x0dz" in block

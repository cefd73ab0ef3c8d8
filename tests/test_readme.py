"""The README keeps what a README is for, in at most 8 KB: what the tool answers, a quick
start of exactly two commands, one path from a GPU box to a lab note, and links to the guide
(whose pages, and every command the README shows, tests/test_docs.py checks)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
GUIDE = REPO / "site_templates" / "guide"


def test_the_readme_is_at_most_8_kb() -> None:
    assert len(README.read_bytes()) <= 8192


def test_quick_start_is_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    assert all(len(b.strip().splitlines()) == 1 for b in blocks)
    assert blocks[0].strip() == "pip install -e . && tokenwatt build && mkdocs build --strict"
    assert blocks[1].strip() == "pip install -e '.[test]' && python -m pytest"


def test_one_path_from_a_gpu_box_to_a_lab_note() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## From a GPU box to a lab note", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    steps = [line.split()[1] for line in block.splitlines() if line.startswith("tokenwatt ")]
    assert steps == ["collect", "collect", "report", "build"]


def _relative_links(text: str) -> list[str]:
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    return [link for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]


def test_the_readme_links_every_guide_page_and_its_links_resolve() -> None:
    links = _relative_links(README.read_text(encoding="utf-8"))
    for link in links:
        target = REPO / unquote(link.split("#", 1)[0])
        assert target.exists(), link
    linked = {(REPO / link.split("#", 1)[0]).resolve() for link in links}
    missing = [p.name for p in sorted(GUIDE.glob("*.md")) if p.resolve() not in linked]
    assert not missing, f"the README does not link these guide pages: {missing}"


def test_the_anchors_the_readme_links_exist() -> None:
    """A link to a guide page's section names a heading of that page (its MkDocs id)."""
    for link in _relative_links(README.read_text(encoding="utf-8")):
        if "#" not in link:
            continue
        path, anchor = link.split("#", 1)
        headings = re.findall(r"^#+ (.+)$", (REPO / path).read_text(encoding="utf-8"), re.M)
        ids = {re.sub(r"[^\w\s-]", "", h).strip().lower().replace(" ", "-") for h in headings}
        assert anchor in ids, link

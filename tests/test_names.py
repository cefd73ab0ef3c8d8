"""Names that say one thing: no two public names in ``tokenwatt`` that differ only by
spelling (``summarise``/``summarize``), and no public class or type alias defined under the
same name in two modules (two ``Phase``s, two ``Sender``s mean two things)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tokenwatt"


def _public_definitions() -> dict[str, set[str]]:
    """Every public top-level function, class and capitalised alias: name → modules."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names: list[str] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name) and t.id[:1].isupper()]
                names = [n for n in names if not n.isupper()]  # constants may repeat a unit
            found.update({n: found[n] | {module} for n in names if not n.startswith("_")})
    return found


def spelling_key(name: str) -> str:
    """A name with British/American spellings made one (-ise/-ize, -yse/-yze)."""
    return re.sub(r"i[sz]e|y[sz]e", lambda m: m.group(0)[0] + "se", name)


def test_spelling_key_joins_the_two_spellings_only() -> None:
    assert spelling_key("summarize_window") == spelling_key("summarise_window")
    assert spelling_key("analyze") == spelling_key("analyse")
    assert spelling_key("Capacity") != spelling_key("capacity")  # a class and its function
    assert spelling_key("summarise_window") != spelling_key("summarise_power_window")


def test_no_two_public_names_differ_only_by_spelling() -> None:
    by_key: dict[str, set[str]] = defaultdict(set)
    for name in _public_definitions():
        by_key[spelling_key(name)].add(name)
    clashes = sorted(sorted(names) for names in by_key.values() if len(names) > 1)
    assert clashes == []


def test_no_public_class_or_alias_is_defined_in_two_modules() -> None:
    defs = _public_definitions()
    types = {n: sorted(m) for n, m in defs.items() if n[:1].isupper() and len(m) > 1}
    assert types == {}

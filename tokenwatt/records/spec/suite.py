"""Accuracy suite files: the record format that ``collect`` writes and reads and ``sim`` answers.

A suite file is JSON Lines, one item per line::

    {"id": "gsm8k-test-0042", "question": "...", "prompt": "...", "gold": "18"}

``prompt`` is the full prompt sent to the engine; ``gold`` the gold number as plain text
(``-?digits[.digits]``: no commas, exponents, ``NaN`` or ``Infinity``). Ids are unique.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenwatt.errors import InputError, Problem
from tokenwatt.text import control_characters, has_lone_surrogate

GOLD = re.compile(r"^-?\d+(?:\.\d+)?$")
"""A gold answer: a plain decimal number (GSM8K's ``#### N`` with commas removed)."""

NOT_A_ROW = "not a row: nested too deeply, or a number of thousands of digits"
"""The problem text for a line that :func:`json.loads` refuses by recursion or size."""

MAX_PROBLEMS = 20
"""At most this many problems are reported for one file (the rest are dropped)."""


@dataclass(frozen=True)
class SuiteItem:
    """One suite item: id, the bare question, the full prompt and the gold number (text)."""

    id: str
    question: str
    prompt: str
    gold: str


def json_object_lines(path: Path, text: str, problems: list[Problem]) -> Iterator[tuple[str, Any]]:
    """``("line N", object)`` for each non-blank line of ``text`` that is a JSON object.

    A line that is not JSON, too deeply nested, or not an object is skipped and its
    problem appended to ``problems`` (named by ``path`` and ``line N``); the caller raises.
    """
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            row: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(str(path), where, f"not JSON: {exc.msg}"))
            continue
        except (RecursionError, ValueError):
            problems.append(Problem(str(path), where, NOT_A_ROW))
            continue
        if not isinstance(row, dict):
            problems.append(Problem(str(path), where, "expected a JSON object"))
            continue
        yield where, row


def load_suite(path: Path) -> list[SuiteItem]:
    """Read a suite file (the format above), checking every line.

    Raises:
        InputError: unreadable file, bad or too deeply nested JSON, a missing or empty
            field, text with a lone surrogate, a gold answer that is not a plain finite
            number (``NaN``, ``Infinity`` refused), a duplicate id, or no items — each
            named by file and ``line N.field``.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([Problem(str(path), "", f"cannot read suite: {exc}")]) from exc
    items: list[SuiteItem] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    for where, row in json_object_lines(path, text, problems):
        unreadable = [k for k, v in row.items() if isinstance(v, str) and has_lone_surrogate(v)]
        for key in unreadable:  # JSON's "\ud800": half a UTF-16 pair, not text
            shown = json.dumps(key, ensure_ascii=True)[1:-1]
            found = control_characters(row[key])
            message = f"holds a lone surrogate ({found}), not text"
            problems.append(Problem(str(path), f"{where}.{shown}", message))
        bad = [k for k in ("id", "question", "prompt", "gold") if not isinstance(row.get(k), str)]
        bad += [k for k in ("id", "prompt", "gold") if k not in bad and not row[k].strip()]
        for key in bad:
            problems.append(Problem(str(path), f"{where}.{key}", "missing, empty or not a string"))
        if bad or unreadable:
            continue
        if not GOLD.match(row["gold"]):
            problems.append(Problem(str(path), f"{where}.gold", f"not a number: {row['gold']!r}"))
            continue
        if row["id"] in seen:
            problems.append(Problem(str(path), f"{where}.id", f"duplicate id {row['id']!r}"))
            continue
        seen.add(row["id"])
        items.append(SuiteItem(row["id"], row["question"], row["prompt"], row["gold"]))
    if problems:
        raise InputError(problems[:MAX_PROBLEMS])
    if not items:
        raise InputError([Problem(str(path), "", "the suite holds no items")])
    return items


def suite_bytes(items: list[SuiteItem]) -> bytes:
    """The suite file's exact bytes: one compact JSON object per line, UTF-8, LF endings."""
    lines = [
        json.dumps(
            {"id": it.id, "question": it.question, "prompt": it.prompt, "gold": it.gold},
            ensure_ascii=False,
        )
        for it in items
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")

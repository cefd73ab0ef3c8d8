"""Answers to an accuracy suite, right with a set probability (the simulated engine's mode).

The suite file is JSON Lines, one item per line: ``{"id", "question", "prompt", "gold"}``
with ``gold`` a number as text. Whether an item is answered right is decided by a hash of
(simulator seed, request seed, item id), so the same seeds give the same answers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from tokenwatt.errors import InputError, Problem


@dataclass(frozen=True)
class SuiteItem:
    """One suite item: id, question, full prompt, and the gold number (as text)."""

    id: str
    question: str
    prompt: str
    gold: str


def load_suite(path: Path) -> list[SuiteItem]:
    """Read a JSON Lines suite.

    Raises:
        InputError: unreadable file, a line that is not a JSON object with the four string
            fields, or a gold answer that is not a number (naming the file and line).
    """
    file = str(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([Problem(file, "", f"cannot read the suite: {exc}")]) from exc
    items: list[SuiteItem] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError([Problem(file, where, f"not valid JSON: {exc.msg}")]) from exc
        except (RecursionError, ValueError) as exc:
            raise InputError(
                [Problem(file, where, "not valid JSON: nested too deeply, or a huge number")]
            ) from exc
        if not isinstance(data, dict):
            raise InputError([Problem(file, where, "each line must be a JSON object")])
        for key in ("id", "question", "prompt", "gold"):
            if not isinstance(data.get(key), str):
                raise InputError([Problem(file, f"{where}.{key}", "must be a string")])
        try:
            finite = Decimal(data["gold"].replace(",", "")).is_finite()
        except InvalidOperation as exc:
            raise InputError(
                [Problem(file, f"{where}.gold", f"not a number: {data['gold']!r}")]
            ) from exc
        if not finite:  # Decimal reads "NaN" and "Infinity"; no answer can equal them
            raise InputError(
                [Problem(file, f"{where}.gold", f"not a finite number: {data['gold']!r}")]
            )
        items.append(SuiteItem(data["id"], data["question"], data["prompt"], data["gold"]))
    return items


class SuiteAnswers:
    """Looks prompts up in a suite and answers them right with probability ``p``."""

    def __init__(self, items: list[SuiteItem], p: float, seed: int) -> None:
        if not 0.0 <= p <= 1.0:
            raise InputError(f"--accuracy-p must be between 0 and 1, got {p}")
        self.items = items
        self.p = p
        self.seed = seed
        self._by_prompt = {item.prompt: item for item in items}

    def find(self, prompt: str) -> SuiteItem | None:
        """The item a prompt asks about: exact prompt, else the question asked last in it.

        Few-shot prompts quote other questions before the one asked, so among the items
        whose question occurs in the prompt, the one occurring latest wins.
        """
        item = self._by_prompt.get(prompt)
        if item is not None:
            return item
        best: tuple[int, SuiteItem] | None = None
        for candidate in self.items:
            pos = prompt.rfind(candidate.question) if candidate.question else -1
            if pos >= 0 and (best is None or pos > best[0]):
                best = (pos, candidate)
        return best[1] if best else None

    def is_right(self, item: SuiteItem, request_seed: int | None) -> bool:
        """Deterministic coin with P(right) = p, from (sim seed, request seed, item id)."""
        key = f"{self.seed}:{request_seed}:{item.id}".encode()
        u = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
        return u < self.p

    def answer(self, prompt: str, request_seed: int | None) -> str | None:
        """The completion text for a suite prompt, or None when the prompt is not in it."""
        item = self.find(prompt)
        if item is None:
            return None
        gold = Decimal(item.gold.replace(",", ""))
        number = gold if self.is_right(item, request_seed) else gold + 7
        text = format(number.normalize(), "f") if number == number.to_integral() else str(number)
        return f" Let me work it out step by step. The answer is {text}.\n#### {text}"

"""Answers to an accuracy suite, right with a set probability (the simulated engine's mode).

The suite file is the record format of :mod:`tokenwatt.records.spec.suite` (JSON Lines, one
``{"id", "question", "prompt", "gold"}`` item per line, ``gold`` a plain finite number as
text, ids unique); :func:`load_suite` is that module's reader, so ``collect`` and the
simulator accept exactly the same files. Whether an item is answered right is decided by
a hash of (simulator seed, request seed, item id), so the same seeds give the same answers.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal

from tokenwatt.errors import InputError
from tokenwatt.records import SuiteItem as SuiteItem
from tokenwatt.records import load_suite as load_suite


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

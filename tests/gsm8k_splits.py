"""GSM8K split paths for the tests: the committed excerpt, or the full shared copy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

EXCERPT = Path(__file__).resolve().parent / "fixtures" / "gsm8k"


@dataclass(frozen=True)
class Gsm8kSplits:
    """A GSM8K test split and train split (JSON Lines, as upstream writes them)."""

    test: Path
    train: Path


EXCERPT_SPLITS = Gsm8kSplits(EXCERPT / "test-first45.jsonl", EXCERPT / "train-first5.jsonl")
"""GSM8K's first 45 test rows and first 5 train rows, verbatim (MIT; see its README)."""

"""The numeric scorer for GSM8K-style completions (pure: text in, number out).

Which number counts as the completion's answer, in order of precedence:

1. the first number after the first ``####`` (the marker GSM8K's own solutions end with);
2. else the number inside the last ``\\boxed{...}`` (LaTeX-trained models);
3. else the first number after the last "the answer is" (any case, "final" allowed);
4. else the last number anywhere in the completion.

Before that, the completion is cut where the model starts a new few-shot example
("Question:" on a new line): engines do not always apply stop sequences, and the invented
next question has numbers of its own. A number is read the way people write it: "$1,234.50"
is 1234.5, "1,000" is 1000, "−3" (Unicode minus) is -3, "3.0" is 3, "18." is 18, "50%" is
50, "18 dollars" is 18, "3/4" is 0.75. It is then compared with the gold number with a
tolerance for float rounding (:data:`ABS_TOL`, :data:`REL_TOL`).

The precedence follows the common GSM8K evaluation practice (the "####" marker from the
dataset's answer format, Cobbe et al. 2021; the "The answer is" form from chain-of-thought
prompting, Wei et al. 2022; last-number fallback as in lm-evaluation-harness's flexible
extract).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

Rule = Literal["####", "boxed", "the answer is", "last number", "none"]

ABS_TOL = 1e-6
"""Absolute tolerance when comparing an answer with the gold number (same unit as both)."""
REL_TOL = 1e-9
"""Relative tolerance: float rounding only, so 1,000,000 and 1,000,001 stay different."""

# A new few-shot example begins: the model kept going past its answer.
_NEXT_QUESTION = re.compile(r"\n[ \t]*(?:Question|Q)\s*:")
_HASHES = re.compile(r"####")
_BOXED = re.compile(r"\\boxed\s*\{")
_THE_ANSWER_IS = re.compile(r"the\s+(?:final\s+)?answer\s+is", re.IGNORECASE)

# A sign counts only when attached to the digits and where it cannot be a subtraction: not
# right after a word character or a closing bracket ("10-3" and "10 - 3" are 10 and 3;
# "= -3" and "−3" are negative three).
_NUMBER = re.compile(
    r"""
    (?:(?<![\w)\]}])(?P<sign>[-−–]))?
    (?:\$\s?)?
    (?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)?
    (?P<frac>\.\d+)?
    (?:\s?/\s?(?P<den>\d+)\b(?![.,]\d))?
    """,
    re.VERBOSE,
)
_FRAC_LATEX = re.compile(r"\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}")


@dataclass(frozen=True)
class ParsedNumber:
    """A number found in text: its value, the text it came from, and where it ends."""

    value: float
    text: str
    end: int


@dataclass(frozen=True)
class ScoredAnswer:
    """The scorer's reading of one completion.

    Attributes:
        answer: the number as found in the completion (e.g. ``"$1,234.50"``), or None.
        value: its numeric value (e.g. ``1234.5``), or None when no number was found.
        rule: which rule picked it (``####``, ``boxed``, ``the answer is``, ``last number``)
            or ``none``.
        correct: whether ``value`` equals the gold number within the tolerance.
    """

    answer: str | None
    value: float | None
    rule: Rule
    correct: bool


def _numbers(text: str) -> list[ParsedNumber]:
    """Every number in ``text``, in order (LaTeX ``\\frac{a}{b}`` read as a / b)."""
    text = _FRAC_LATEX.sub(lambda m: f"{m.group(1)}/{m.group(2)}", text)
    found: list[ParsedNumber] = []
    for m in _NUMBER.finditer(text):
        whole, frac = m.group("int"), m.group("frac")
        if whole is None and frac is None:
            continue
        value = float((whole or "0").replace(",", "") + (frac or ""))
        den = m.group("den")
        if den is not None and int(den) != 0 and frac is None:
            value /= int(den)
        elif den is not None:
            # "1.5/2" or "x/0": not a fraction we trust; read the numerator alone.
            pass
        if m.group("sign"):
            value = -value
        found.append(ParsedNumber(value, m.group(0).strip(), m.end()))
    return found


def parse_number(text: str) -> float | None:
    """The value of the first number in ``text`` (see the module docstring), or None.

    Used for gold answers too: GSM8K golds are plain integers ("18", "-3", "1234").
    """
    nums = _numbers(text)
    return nums[0].value if nums else None


def cut_continuation(completion: str) -> str:
    """The completion up to the point where it starts a new "Question:" (if it does)."""
    m = _NEXT_QUESTION.search(completion)
    return completion[: m.start()] if m else completion


def _boxed_content(text: str) -> str | None:
    """The content of the last ``\\boxed{...}``, braces balanced, or None."""
    starts = list(_BOXED.finditer(text))
    if not starts:
        return None
    pos = starts[-1].end()
    depth = 1
    for i in range(pos, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[pos:i]
    return text[pos:]


def extract_answer(completion: str) -> tuple[ParsedNumber | None, Rule]:
    """The completion's final number and the rule that picked it (module docstring).

    A rule whose marker is present but has no number after it falls through to the next.
    """
    text = cut_continuation(completion)
    hashes = _HASHES.search(text)
    if hashes:
        nums = _numbers(text[hashes.end() :])
        if nums:
            return nums[0], "####"
    boxed = _boxed_content(text)
    if boxed is not None:
        nums = _numbers(boxed)
        if nums:
            return nums[0], "boxed"
    markers = list(_THE_ANSWER_IS.finditer(text))
    if markers:
        nums = _numbers(text[markers[-1].end() :])
        if nums:
            return nums[0], "the answer is"
    nums = _numbers(text)
    if nums:
        return nums[-1], "last number"
    return None, "none"


def numbers_equal(value: float, gold: float) -> bool:
    """Whether two numbers are equal up to float rounding (:data:`ABS_TOL`, :data:`REL_TOL`)."""
    return math.isclose(value, gold, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def score_completion(completion: str, gold: str) -> ScoredAnswer:
    """Score one completion against the gold answer (a number as text, e.g. ``"18"``).

    Raises:
        ValueError: the gold answer holds no number.
    """
    gold_value = parse_number(gold)
    if gold_value is None:
        raise ValueError(f"gold answer {gold!r} holds no number")
    found, rule = extract_answer(completion)
    if found is None:
        return ScoredAnswer(None, None, "none", False)
    return ScoredAnswer(found.text, found.value, rule, numbers_equal(found.value, gold_value))

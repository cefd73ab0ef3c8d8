"""The numeric scorer on completions shaped like real GSM8K 5-shot output."""

from __future__ import annotations

import pytest

from tokenwatt.analysis.accuracy.scoring import (
    cut_continuation,
    extract_answer,
    numbers_equal,
    parse_number,
    score_completion,
)

# (completion, gold, expected value read, expected rule, expected correct)
CASES: list[tuple[str, str, float | None, str, bool]] = [
    # 1-10: the plain "#### N" form the exemplars teach.
    (
        " Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day.\n#### 18",
        "18",
        18,
        "####",
        True,
    ),
    (
        " It takes 2/2=1 bolt of white fiber\nSo the total is 2+1=3 bolts\n#### 3",
        "3",
        3,
        "####",
        True,
    ),
    (" 80000 + 50000 = 130000\n#### 70000", "70000", 70000, "####", True),
    (" He sprints 3*3=9 times\nSo he runs 9*60=540 meters\n#### 540", "540", 540, "####", True),
    (" #### 1,234", "1234", 1234, "####", True),
    (" The total is $1,234.50.\n#### $1,234.50", "1234.5", 1234.5, "####", True),
    (" 5 - 8 = −3\n#### −3", "-3", -3, "####", True),
    (" The temperature dropped to -12 degrees.\n#### -12", "-12", -12, "####", True),
    (" 6 / 2 = 3.0\n#### 3.0", "3", 3, "####", True),
    (" So she has 18 left.\n#### 18.", "18", 18, "####", True),
    # 11-16: numbers after the answer must not win.
    (" 4 * 5 = 20\n#### 20\nThat is 20 cookies for 4 friends, 5 each.", "20", 20, "####", True),
    (" #### 42 (she read 12 + 30 pages over 2 days)", "42", 42, "####", True),
    (
        " #### 7\n\nQuestion: A farmer has 12 cows and buys 30 more. How many?\nAnswer: 42",
        "7",
        7,
        "####",
        True,
    ),
    (
        " Tim bikes 400/25=16 hours\n#### 16\n\nQuestion: Mary has 5 apples.\nAnswer: #### 5",
        "16",
        16,
        "####",
        True,
    ),
    # A continuation with no "####" in the real answer: the invented question's numbers go.
    (
        " The answer is 25.\n\nQuestion: Sam has 3 dogs and 4 cats. How many pets?\nAnswer: 7",
        "25",
        25,
        "the answer is",
        True,
    ),
    (" 12 + 13 = 25\nQuestion: Tom had 40 marbles", "25", 25, "last number", True),
    # 17-24: "The answer is" when there is no "####".
    (" Natalia sold 48 + 24 = 72 clips. The answer is 72.", "72", 72, "the answer is", True),
    (" She earned 0.2 x 50 = 10 dollars. The answer is $10.", "10", 10, "the answer is", True),
    (" So the answer is 5 driveways.", "5", 5, "the answer is", True),
    (
        " The final answer is 1,080 beetles, since 90 * 12 = 1080.",
        "1080",
        1080,
        "the answer is",
        True,
    ),
    (" the answer is: 624 pages a year", "624", 624, "the answer is", True),
    (
        " At first I thought the answer is 30, but 60 - 25 = 35, so the answer is 35.",
        "35",
        35,
        "the answer is",
        True,
    ),
    (" The answer is −4 degrees.", "-4", -4, "the answer is", True),
    (" The answer is 50%.", "50", 50, "the answer is", True),
    # 25-31: LaTeX.
    (" 12 + 9 = 21, so George paid $\\boxed{21}$.", "21", 21, "boxed", True),
    (" Therefore the answer is \\boxed{1,000} dollars.", "1000", 1000, "boxed", True),
    (" The share is \\boxed{\\frac{3}{4}} of the cake.", "0.75", 0.75, "boxed", True),
    (" First \\boxed{5}? No: 5 + 3 = 8, so \\boxed{8}.", "8", 8, "boxed", True),
    (" \\boxed{-6}", "-6", -6, "boxed", True),
    (" #### \\boxed{18}", "18", 18, "####", True),
    (" The result is \\(\\frac{1}{2}\\) of 10 which is 5", "5", 5, "last number", True),
    # 32-40: the last number as a fallback, with units and formats.
    (" So he needs 18 / 6 = 3 packs", "3", 3, "last number", True),
    (" Total distance: 5 km", "5", 5, "last number", True),
    (" She pays 18 dollars", "18", 18, "last number", True),
    (
        " Each part is $2500/5 = $500, so Mike has $1000 - $200 = $800.",
        "800",
        800,
        "last number",
        True,
    ),
    (" It costs $3.50 per pound, so 2 pounds cost $7.00", "7", 7, "last number", True),
    (" The price went up by 25%", "25", 25, "last number", True),
    (" 3/4 of the class", "0.75", 0.75, "last number", True),
    (" He owes 1,000,000 dollars", "1000000", 1_000_000, "last number", True),
    (" The change in height is −2.5 m", "-2.5", -2.5, "last number", True),
    # 41-50: wrong answers and no answers.
    (" 16 - 3 - 4 = 9\nShe makes 9 * 3 = $27\n#### 27", "18", 27, "####", False),
    (" #### 1,235", "1234", 1235, "####", False),
    (" #### 17.5", "18", 17.5, "####", False),
    (" #### 3", "-3", 3, "####", False),
    (" He owes 1,000,001 dollars", "1000000", 1_000_001, "last number", False),
    (" I am not sure how to solve this problem.", "18", None, "none", False),
    ("", "18", None, "none", False),
    (" ####", "18", None, "none", False),
    (" #### eighteen", "18", None, "none", False),
    # "10-3" is a subtraction, not negative three; the last number is 3, not the gold 7.
    (" She has 10-3", "7", 3, "last number", False),
]


@pytest.mark.parametrize(("completion", "gold", "value", "rule", "correct"), CASES)
def test_scorer_reads_the_final_number(
    completion: str, gold: str, value: float | None, rule: str, correct: bool
) -> None:
    scored = score_completion(completion, gold)
    assert scored.rule == rule
    assert scored.value == (None if value is None else pytest.approx(value))
    assert scored.correct is correct


def test_there_are_at_least_forty_cases() -> None:
    assert len(CASES) >= 40


def test_a_marker_without_a_number_falls_through_to_the_next_rule() -> None:
    found, rule = extract_answer(" The answer is 18 dollars.\n#### eighteen")
    assert found is not None and found.value == 18
    assert rule == "the answer is"


def test_first_hash_marker_wins_over_a_later_one() -> None:
    found, rule = extract_answer(" #### 18\n#### 20")
    assert rule == "####"
    assert found is not None and found.value == 18


def test_continuation_is_cut_at_a_new_question_line() -> None:
    text = " 2 + 2 = 4\n#### 4\n\nQuestion: Ann has 9 pens.\nAnswer: 9"
    assert cut_continuation(text) == " 2 + 2 = 4\n#### 4\n"
    assert cut_continuation(" no question here 5") == " no question here 5"


def test_the_answer_text_is_kept_as_written() -> None:
    scored = score_completion(" #### $1,234.50", "1234.5")
    assert scored.answer == "$1,234.50"
    assert scored.value == 1234.5


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("$1,234.50", 1234.5),
        ("1,000", 1000),
        ("−3", -3),
        ("–3", -3),
        ("3.0", 3),
        ("18.", 18),
        ("50%", 50),
        ("-$3", -3),
        ("$-3", -3),
        (".5", 0.5),
        ("12,3456", 12),  # not a thousands group: 12 then 3456
        ("no number", None),
    ],
)
def test_parse_number_normalises_the_common_forms(text: str, value: float | None) -> None:
    assert parse_number(text) == value


def test_comparison_tolerates_float_rounding_only() -> None:
    assert numbers_equal(0.1 + 0.2, 0.3)
    assert numbers_equal(18.0000000001, 18)
    assert not numbers_equal(18.01, 18)
    assert not numbers_equal(1_000_001, 1_000_000)


def test_a_gold_without_a_number_is_an_error() -> None:
    with pytest.raises(ValueError, match="holds no number"):
        score_completion(" #### 5", "n/a")

"""Bad-input messages are chosen by pydantic's error type code and filled from its context."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import pytest
from pydantic import BaseModel, ConfigDict, Field

from tokenwatt.errors import RecordError
from tokenwatt.records.load import validate


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")

    started: dt.datetime | None = None
    day: dt.date | None = None
    gpus: Annotated[list[int], Field(max_length=2)] = []
    name: Annotated[str, Field(min_length=1, max_length=3)] = "a"
    share: Annotated[float, Field(multiple_of=0.5)] = 1.0
    step: Annotated[float, Field(gt=0.0, le=1e12)] = 1.0


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"gpus": [1, 2, 3]}, "gpus", "must have at most 2 items, not 3"),
        ({"name": ""}, "name", 'must have at least 1 character, got ""'),
        ({"name": "abcd"}, "name", 'must have at most 3 characters, got "abcd"'),
        ({"share": 0.7}, "share", "must be a multiple of 0.5, got 0.7"),
        ({"step": 0}, "step", "must be greater than 0, got 0"),
        (
            {"step": 2e12},
            "step",
            "must be less than or equal to 1000000000000, got 2000000000000.0",
        ),
        (
            {"day": "2026-02-30"},
            "day",
            'must be a date as YYYY-MM-DD, got "2026-02-30" (day value is outside expected range)',
        ),
        (
            {"started": 5},
            "started",
            "must be a date and time as YYYY-MM-DDTHH:MM:SSZ, got 5",
        ),
    ],
)
def test_message_by_error_type(data: dict[str, object], field: str, message: str) -> None:
    with pytest.raises(RecordError) as info:
        validate(_Model, data, "x.json")
    assert [(p.field, p.message) for p in info.value.problems] == [(field, message)]


def test_a_bad_date_names_the_value_and_the_parser_reason() -> None:
    """The reason in brackets is the date parser's (pydantic's ``ctx``), so only its
    presence is asserted: its words may change with pydantic."""
    with pytest.raises(RecordError) as info:
        validate(_Model, {"day": "2026-02-30"}, "x.json")
    (problem,) = info.value.problems
    assert problem.field == "day"
    assert problem.message.startswith('must be a date as YYYY-MM-DD, got "2026-02-30" (')
    assert problem.message.endswith(")")

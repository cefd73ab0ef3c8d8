"""Shared pydantic base and helpers for every record model."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from tokenwatt.redact import remove_secrets_json
from tokenwatt.text import UNPRINTABLE_IN_NAME

MAX_TEXT_CHARS = 4000
"""Longest text any record field may hold unless the field says otherwise (characters).

Record text is rendered into pages inline, and Python-Markdown's time grows faster than
linearly with the number of character references in one paragraph (100,000 escaped ``&``
took 18 s, 20,000 about 4 s, 4,000 under 0.2 s on a 2-core machine): a bound keeps every
page's build time linear in the number of fields."""


class StrictModel(BaseModel):
    """Base of every record: unknown fields are errors, NaN and infinity are rejected, and
    no text is longer than :data:`MAX_TEXT_CHARS` unless its field allows more."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        frozen=False,
        str_max_length=MAX_TEXT_CHARS,
        # A field's docstring (the string literal under it) is its schema description.
        use_attribute_docstrings=True,
    )


MAX_QUANTITY = 1e12
"""Largest value any numeric record field may hold. No physical quantity a record keeps
comes near it (a year at a million tokens/s is 3e13 tokens, but no window is a year; a
megawatt is 1e6 W; a day is 8.64e7 ms), while keeping every product and ratio the analysis
forms finite: 1e12 × 1e12 / 1e-9 is still far below a float's 1.8e308."""

MIN_POSITIVE = 1e-9
"""Smallest value a strictly positive record field may hold: a nanosecond, a nano-request
per second. Smaller positive numbers (down to 5e-324) are no measurement, and dividing by
one overflows."""

BoundedFloat = Annotated[float, Field(ge=-MAX_QUANTITY, le=MAX_QUANTITY)]
NonNegFloat = Annotated[float, Field(ge=0, le=MAX_QUANTITY)]


def _not_vanishing(value: float) -> float:
    if value < MIN_POSITIVE:
        raise ValueError(
            f"must be at least {MIN_POSITIVE:g}, got {value!r} (a smaller positive number is "
            "no measurement, and dividing by it overflows)"
        )
    return value


PosFloat = Annotated[float, Field(gt=0, le=MAX_QUANTITY), AfterValidator(_not_vanishing)]


def _zero_or_not_vanishing(value: float) -> float:
    return value if value == 0 else _not_vanishing(value)


NonNegMeasure = Annotated[
    float, Field(ge=0, le=MAX_QUANTITY), AfterValidator(_zero_or_not_vanishing)
]
"""A quantity that is 0 or at least :data:`MIN_POSITIVE` (a goodput): a vanishing positive
value would be divided by (a goodput change, cards needed) and overflow."""
NonNegInt = Annotated[int, Field(ge=0, le=int(MAX_QUANTITY))]
PosInt = Annotated[int, Field(ge=1, le=int(MAX_QUANTITY))]
Percent = Annotated[float, Field(ge=0, le=100)]
NonEmptyStr = Annotated[str, Field(min_length=1)]

ArrivalProcess = Literal["conditioned", "poisson"]
"""How a window's arrival times are drawn: ``conditioned`` — exactly round(rate × window)
arrivals in the window, a Poisson process conditioned on that count; ``poisson`` — the
unconditioned Poisson process, whose count in the window is itself random
(:mod:`tokenwatt.collect.load.arrivals`)."""

LoadProfile = Literal["poisson", "constant", "concurrency"]
"""How a window offers its load: ``poisson`` — open loop, Poisson arrivals at a set rate
(drawn as :data:`ArrivalProcess` says); ``constant`` — open loop, one arrival every 1/rate s;
``concurrency`` — closed loop, a fixed number of clients each sending its next request when
its previous one ends (the rate is measured, not set; :mod:`tokenwatt.collect.load.closedloop`)."""

# C0 and C1 controls, DEL, line separators, Unicode's directional formatting characters
# (UAX #9) and lone surrogates: one set for every name (tokenwatt.text).
_UNPRINTABLE = UNPRINTABLE_IN_NAME


def _printable(value: str) -> str:
    bad = _UNPRINTABLE.search(value)
    if bad:
        raise ValueError(
            f"must be plain printable text: it holds the control character "
            f"U+{ord(bad.group()):04X} at position {bad.start() + 1} (it could rewrite a "
            "terminal, break a line of a file or reorder a page)"
        )
    return value


PrintableText = Annotated[str, AfterValidator(_printable)]
"""One line of text shown in terminals and pages, possibly empty: as :data:`PlainName`
without the length bound."""
PlainName = Annotated[str, Field(min_length=1), AfterValidator(_printable)]
"""A name shown in terminals and pages (labels, keys, titles): no control or directional
formatting characters, which could move a terminal's cursor or reverse a page's text."""


MAX_LABEL_CHARS = 120
"""Longest configuration label: what a report record's ``label`` accepts."""


def _file_name(value: str) -> str:
    if "/" in value or "\\" in value:
        raise ValueError("must be a plain file name (it names RUNS_DIR/LABEL.json): no '/' or '\\'")
    if value.startswith(".") or value != value.strip():
        raise ValueError(
            "must be a plain file name (it names RUNS_DIR/LABEL.json): no leading '.', "
            "no leading or trailing spaces"
        )
    return value


FileLabel = Annotated[
    str,
    Field(min_length=1, max_length=MAX_LABEL_CHARS),
    AfterValidator(_printable),
    AfterValidator(_file_name),
]
"""A label that also names files (``RUNS_DIR/LABEL.json``, ``LABEL.engine.log``): plain
printable text (:data:`PlainName`), at most :data:`MAX_LABEL_CHARS` characters, no path
separator, no leading dot (``..``, hidden files), so it cannot leave the folder it is
written in."""


class FieldValueError(ValueError):
    """A validator's error about one field below the model being validated.

    Raised from ``model_validator``s so that the loader can name the exact field path
    (``configs[1].key``) rather than the model that holds it. ``field`` is relative to that
    model; empty means the model itself.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def clip_text(value: Any, limit: int = MAX_TEXT_CHARS) -> Any:
    """``value`` (JSON-like: dicts, lists, scalars) with every string longer than ``limit``
    cut to it, ending in a note of how much was cut; mapping keys are left as they are.

    Text a run collects from outside (a version string, an error message, a log line) can be
    any length; cut at the write, a record never holds what the loader would refuse.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        note = f"… (cut from {len(value):,} characters)"
        return value[: limit - len(note)] + note
    if isinstance(value, dict):
        return {k: clip_text(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [clip_text(v, limit) for v in value]
    return value


_M = TypeVar("_M", bound=BaseModel)


def swept_of_secrets(model_type: type[_M], data: dict[str, Any], secrets: Sequence[str]) -> _M:
    """``data`` validated as ``model_type`` after every form of each of ``secrets`` was
    removed from its string values (:func:`tokenwatt.redact.remove_secrets_json`).

    A key that is also one of the record's own words (``measured``, ``token``) would make a
    swept value invalid (a status, a kind); such a value is the schema's, not a leak, so
    it is put back as it was and the rest stays swept.

    Raises:
        pydantic.ValidationError: ``data`` is invalid even with those values put back.
    """
    swept = remove_secrets_json(data, secrets)
    for _ in range(8):
        try:
            return model_type.model_validate(swept)
        except ValidationError as exc:
            for error in exc.errors():
                _put_back(swept, data, error["loc"])
    return model_type.model_validate(swept)


def _put_back(swept: Any, original: Any, loc: tuple[int | str, ...]) -> None:
    """Set the deepest value along ``loc`` that both hold back to ``original``'s."""
    parent, key = None, None
    for part in loc:
        if isinstance(swept, dict | list) and _has(swept, part) and _has(original, part):
            parent, key = swept, part
            swept, original = swept[part], original[part]  # type: ignore[index]
        else:
            break
    if parent is not None:
        parent[key] = copy.deepcopy(original)  # type: ignore[index]


def _has(container: Any, part: int | str) -> bool:
    if isinstance(container, dict):
        return part in container
    return isinstance(container, list) and isinstance(part, int) and 0 <= part < len(container)


GOODPUT_TOLERANCE_TOK_S = 0.05
"""The least goodput a measured result can have (tok/s): half the 0.1 tok/s the report
rounds goodput to, below which it would be reported as 0."""
GOODPUT_AGREEMENT = 0.01
"""How far (relative) a measured result's goodput may be from the mean of the passing
repeats it stands on. The collector writes that mean exactly; records rebuilt from a
published report (the seed's) carry the report's figure, 0.14% from its repeats' mean."""


def goodput_mismatch(goodput_tok_s: float, passing: Sequence[float]) -> str | None:
    """Why a measured result's goodput (tok/s) cannot be reported, None when it can: it is
    not the mean of the goodputs (tok/s) of the ``passing`` repeats at the found load, as
    the collector computes it, within :data:`GOODPUT_AGREEMENT`, or it rounds to 0 tok/s
    (a measured result met the SLO with goodput)."""
    if not passing:
        return None  # the SLO-missed exclusion reports it
    expected = sum(passing) / len(passing)
    if abs(goodput_tok_s - expected) > GOODPUT_AGREEMENT * expected + GOODPUT_TOLERANCE_TOK_S:
        return (
            f"{goodput_tok_s} tok/s is not what the record's repeats measured: the "
            f"mean goodput of the {len(passing)} passing repeat(s) at the found load is "
            f"{expected:.6g} tok/s, more than {GOODPUT_AGREEMENT:.0%} away (the record was "
            "edited or is damaged)"
        )
    if goodput_tok_s < GOODPUT_TOLERANCE_TOK_S:
        return (
            f"{goodput_tok_s} tok/s rounds to 0 tok/s, yet the result is measured: a "
            "measured result met the SLO with goodput"
        )
    return None


ENERGY_AGREEMENT = 0.05
"""How far a window's energy (J) may lie from its mean power × its length: the collector
writes one from the other (a counter's span that starts at the baseline reading, a few
milliseconds before the window, is the only gap), so 5% is far beyond what it leaves and
far below an edit that would change tokens per joule."""


def energy_mismatch(energy_j: float, mean_power_w: float, duration_s: float) -> str | None:
    """Why a window's ``energy_j`` (J) cannot be used, None when it can: it is not its
    ``mean_power_w`` (W) × ``duration_s`` (s) within :data:`ENERGY_AGREEMENT` (+1 J)."""
    expected = mean_power_w * duration_s
    if abs(energy_j - expected) <= ENERGY_AGREEMENT * expected + 1.0:
        return None
    return (
        f"{energy_j:.6g} J is not the window's mean power × its length ({mean_power_w:.6g} W "
        f"× {duration_s:.6g} s = {expected:.6g} J), more than {ENERGY_AGREEMENT:.0%} away "
        "(the record was edited or is damaged): tokens per joule would divide by a figure "
        "nothing measured"
    )

"""One exception hierarchy for the whole package.

The library never prints or exits; the CLI (``cli/exits.py``) maps these classes to exit codes
in one place: input problems (:class:`InputError` and its subclasses) exit with status 2.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file.

    Attributes:
        file: the file's path as the user gave it (or ``"<input>"``).
        field: the field path inside the file, e.g. ``configs[1].accuracy.score``; empty for
            problems with the whole file (not JSON, unreadable).
        message: what is wrong and, where useful, what to do.
    """

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.message}"


class TokenwattError(Exception):
    """Base class of every error the package raises on purpose."""

    exit_code = 1


class InputError(TokenwattError):
    """Bad input from the user: a file, a flag, a value. Exit status 2.

    Carries one :class:`Problem` per thing wrong, so the CLI can print them all at once.
    """

    exit_code = 2

    def __init__(self, problems: list[Problem] | str) -> None:
        if isinstance(problems, str):
            problems = [Problem("<input>", "", problems)]
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def _inner(p: Problem, spec_file: str) -> str:
    where = p.file if p.file not in (spec_file, "<input>") else ""
    place = ", ".join(x for x in (where, p.field) if x)
    return f"{place}: {p.message}" if place else p.message


def named_by(spec_file: str, field: str, exc: InputError) -> InputError:
    """``exc``'s problems with a file a spec names (a trace, an accuracy suite), each
    reported under the spec file and its ``field`` first, then the named file's own place:
    ``s.yaml: accuracy.suite: suites/x.jsonl, line 3.prompt: missing`` — the reader starts
    from the file they gave the command. An error of the same class is returned."""
    problems = [Problem(spec_file, field, _inner(p, spec_file)) for p in exc.problems]
    return type(exc)(problems)


class RecordError(InputError):
    """A run or report record that is not valid JSON or does not fit its schema."""


class SpecError(InputError):
    """A benchmark spec (``specs/*.spec.yaml``) that cannot be used."""


class EngineError(TokenwattError):
    """The inference engine under test cannot be reached or answered nonsense."""


class TelemetryError(TokenwattError):
    """A power or clock source failed in a way that stops the measurement (e.g. a MIG slice)."""


class StaleSiteError(TokenwattError):
    """``tokenwatt build --check`` found generated pages that differ from the records."""

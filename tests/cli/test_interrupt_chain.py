"""A Ctrl-C that Python wrapped in another exception still ends as an interrupt (status 130,
one line): the CLI looks for it along the exception's causes and contexts."""

from __future__ import annotations

from tokenwatt.cli.group import caused_by_interrupt


def _raised(make: object) -> BaseException:
    try:
        make()  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("nothing was raised")


def _set_name_cut_short() -> None:
    # What an import cut short inside a class's making raises: Python's own wrapping.
    class Interrupts:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    type("Made", (), {"attr": Interrupts()})


def _plain_error() -> None:
    raise RuntimeError("a bug, not a Ctrl-C")


def _raised_while_handling() -> None:
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise ValueError("while stopping") from None


def test_a_ctrl_c_wrapped_by_set_name_counts_as_an_interrupt() -> None:
    # Python 3.11 wraps it in a RuntimeError (3.12 lets it through with a note): either way.
    exc = _raised(_set_name_cut_short)
    assert caused_by_interrupt(exc)
    wrapped = RuntimeError("Error calling __set_name__")
    wrapped.__cause__ = KeyboardInterrupt()
    assert caused_by_interrupt(wrapped)


def test_an_error_without_a_ctrl_c_behind_it_is_not_one() -> None:
    assert not caused_by_interrupt(_raised(_plain_error))


def test_a_ctrl_c_in_the_context_counts_even_when_the_cause_is_suppressed() -> None:
    exc = _raised(_raised_while_handling)
    assert exc.__cause__ is None and isinstance(exc.__context__, KeyboardInterrupt)
    assert caused_by_interrupt(exc)

"""Library errors to exit statuses, in one place for every command module.

An :class:`~tokenwatt.errors.InputError` prints one ``error: file: field: message`` line per
problem and exits 2; any other :class:`~tokenwatt.errors.TokenwattError` prints
``error: message`` and exits with its ``exit_code``. Messages carry what engines and servers
said (log tails, error bodies), so they are printed through
:func:`tokenwatt.text.terminal_safe`: no escape sequence reaches the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

import click

from tokenwatt.errors import InputError, TokenwattError
from tokenwatt.text import terminal_safe

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def exit_on_errors() -> Iterator[None]:
    """Turn a library error raised inside the block into its message and exit status.

    Raises:
        SystemExit: with the error's ``exit_code`` (2 for bad input).
    """
    try:
        yield
    except InputError as exc:
        for problem in exc.problems:
            click.echo(f"error: {terminal_safe(str(problem))}", err=True)
        sys.exit(exc.exit_code)
    except TokenwattError as exc:
        click.echo(f"error: {terminal_safe(str(exc))}", err=True)
        sys.exit(exc.exit_code)


def errors_to_exit(func: F) -> F:
    """Decorate a click command so its library errors become messages and exit statuses
    (:func:`exit_on_errors`)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with exit_on_errors():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


__all__ = ["errors_to_exit", "exit_on_errors"]

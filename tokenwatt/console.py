"""The ``tokenwatt`` console script's entry point, kept to the standard library until the
command line is loaded: a Ctrl-C while Python loads it (tens of milliseconds) ends with one
line and status 130, as one in any later moment does (:func:`tokenwatt.cli.group.main`)."""

from __future__ import annotations

import sys


def main() -> None:
    """Load the command line and run it; a Ctrl-C meanwhile exits 130 with one line."""
    try:
        from tokenwatt.cli.group import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (Ctrl-C); nothing more was done\n")
        raise SystemExit(130) from None
    run()

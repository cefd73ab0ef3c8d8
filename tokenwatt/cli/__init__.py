"""The command line's face: the ``click`` group (``cli``) and the console script's ``main``.

The group, with ``collect`` and ``run``, is in :mod:`tokenwatt.cli.group`; the other commands
in the modules beside it, registered on the group there; the tables on the terminal in
:mod:`tokenwatt.cli.terminal`; library errors to exit statuses in :mod:`tokenwatt.cli.exits`.
Nothing here or in the group imports a stage at the top, so that ``tokenwatt --help`` loads
none of them (ARCHITECTURE.md, "Package faces").
"""

from tokenwatt.cli.group import cli, main

__all__ = ["cli", "main"]

"""Allow ``python -m tokenwatt``."""

from tokenwatt.cli import main

main()

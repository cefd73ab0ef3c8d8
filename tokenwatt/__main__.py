"""Allow ``python -m tokenwatt``."""

from tokenwatt.console import main

main()

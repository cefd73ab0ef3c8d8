"""Room of collect: what a run is asked to do, before the first request: the command's options
(``options``), the spec from flags (``point``) or a server (``init_spec``), the modes' presets
(``modes``), the run's files (``runfile``) and the checks before the first window
(``preflight``).

A room has no face: its modules import each other's modules directly
(ARCHITECTURE.md, "Where a new module goes").
"""

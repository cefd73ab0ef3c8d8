"""Room of collect: the accuracy suites: their building (``suites``) and the runner that scores an
engine on one (``runner``).

A room has no face: its modules import each other's modules directly
(ARCHITECTURE.md, "Where a new module goes").
"""

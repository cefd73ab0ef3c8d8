"""Room of collect: measuring: one window (``window``, with the instruments thread in
``instruments`` and its verdict in ``verdict``), the SLO search over rate or clients
(``search``, ``load_search``), fixed loads (``fixed_loads``), the search and repeats window by
window (``measurement``), stop signals (``stopping``), what a run reports (``progress``: the
reporter protocol), MBU (``mbu_step``) and the per-request file (``request_log``).

A room has no face: its modules import each other's modules directly
(ARCHITECTURE.md, "Where a new module goes").
"""

"""Room of collect: the load generator in one process: arrival schedules (``arrivals``), the open
loop (``loadgen``) and the closed loop (``closedloop``), their settings (``loadconfig``) and
the HTTP streaming client (``http``, ``stream``, ``sse``).

A room has no face: its modules import each other's modules directly
(ARCHITECTURE.md, "Where a new module goes").
"""

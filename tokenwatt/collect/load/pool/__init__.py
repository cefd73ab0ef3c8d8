"""Room of collect: the load generator across processes and hosts: worker processes sharing one
schedule (``workers``, ``pool_window``, ``worker_proc``, ``choice``), the same workers as Ray
actors (``ray_pool``, ``ray_actor``) and each host's clock offset (``clock_sync``).

A room has no face: its modules import each other's modules directly
(ARCHITECTURE.md, "Where a new module goes").
"""

"""Room of collect: the engine measured: what it says about itself (``probes``, each read bounded
by ``bounded_get``), its ``/metrics`` (``engine_metrics``), its URLs (``endpoints``) and an
engine ``collect`` starts and stops itself (``engine_proc``).

A room has no face: its modules import each other's modules directly
(ARCHITECTURE.md, "Where a new module goes").
"""

"""Room of collect: what is sent: the workload's requests (``workload``), prompts, traces and
datasets (``prompts``, ``trace``, ``dataset``) and token counting (``tokens``).

A room has no face: its modules import each other's modules directly
(ARCHITECTURE.md, "Where a new module goes").
"""

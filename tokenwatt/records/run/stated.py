"""Which spec values nobody stated: the spec model's defaults, not the user's choice.

``model.weight_dtype`` and ``model.kv_dtype`` have defaults (``bf16``) so that a spec
validates without them, but a default is not a fact about the served model: a run whose
spec was built from ``collect`` flags (no ``--spec``) names neither, and a llama.cpp GGUF
model may well be F32 with an F16 KV cache. Pages say "not stated" for such a value and
note what was computed from it (MBU's bytes per weight and per KV element).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenwatt.records.run.run import RunRecord
    from tokenwatt.records.spec.spec import Spec

STATED_FIELDS: tuple[str, ...] = ("model.weight_dtype", "model.kv_dtype")
"""The defaulted spec fields whose provenance is kept (dotted paths)."""
NOT_STATED = "not stated"
"""What a page says for a value nobody stated."""


def unstated_fields(spec: Spec) -> list[str]:
    """The fields of :data:`STATED_FIELDS` the spec as read did not set (pydantic's
    ``model_fields_set``, so call it on the spec as validated from the file or the flags,
    before an option such as ``--kv-dtype`` rebuilds a section); in that order."""
    out = []
    for path in STATED_FIELDS:
        section, name = path.split(".")
        if name not in getattr(spec, section).model_fields_set:
            out.append(path)
    return out


def _flags_built(words: list[str]) -> bool:
    """Whether a ``tokenwatt collect``/``run`` command line built its spec from flags."""
    if words[:1] != ["tokenwatt"] or words[1:2] not in (["collect"], ["run"]):
        return False
    return not any(w == "--spec" or w.startswith("--spec=") for w in words)


def run_unstated(run: RunRecord) -> frozenset[str]:
    """The spec fields of :data:`STATED_FIELDS` nobody stated for ``run``.

    The record's own ``spec_unstated`` when it has one. A record made before it was kept
    says it through its command line: a spec built from flags (a ``collect`` line without
    ``--spec``) states no weight dtype, and no KV-cache dtype unless ``--kv-dtype`` was
    given. Any other older record is taken as stating both (it cannot be told)."""
    if run.spec_unstated is not None:
        return frozenset(run.spec_unstated)
    try:
        words = shlex.split(run.command)
    except ValueError:
        return frozenset()
    if not _flags_built(words):
        return frozenset()
    kv_given = any(w == "--kv-dtype" or w.startswith("--kv-dtype=") for w in words)
    return frozenset(f for f in STATED_FIELDS if not (kv_given and f == "model.kv_dtype"))

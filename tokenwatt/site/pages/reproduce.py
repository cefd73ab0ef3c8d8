"""The Reproduce section of a report page: the commands as they should be run, and notes.

The commands come from the record (``reproduce``: each run's own command line, then the
``tokenwatt report`` line). Two things a reader needs are added here, never to the record:

* a ``--kv-dtype`` on a configuration's ``collect``/``run`` line when its KV-cache dtype
  differs from the shared spec's and the line lacks one (records made before the option
  existed measured the dtype but ran without it), said in a note;
* a ``--spec NAME`` naming a file of the repository's ``specs/`` folder by its bare name
  is written ``specs/NAME``, the path that works from the repository's root;
* which run files the commands name (``--out``, and the report line's arguments) are not
  in the repository's ``runs/`` folder, so a reader does not look for them.
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass

from tokenwatt.records import NOT_STATED, ReportV3

_KV_WORDS = re.compile(r"·\s*KV\s+([A-Za-z0-9_]+)\s*$")
"""The KV-cache dtype at the end of a configuration's engine text ("vLLM 0.31.0 · KV FP8")."""
_RUN_FILE = re.compile(r"^runs/[A-Za-z0-9._/-]+\.json$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Reproduce:
    """The Reproduce section's content.

    Attributes:
        text: the commands (the record's, with the ``--kv-dtype`` options added).
        kv_added: ``(label, dtype)`` of each configuration whose line got ``--kv-dtype``.
        missing_runs: run files (``runs/...json``) the commands name that the repository
            does not hold, in first-mention order.
    """

    text: str
    kv_added: list[tuple[str, str]]
    missing_runs: list[str]


def _kv_dtype(report: ReportV3, label: str) -> str | None:
    """A configuration's KV-cache dtype: its settings' ``kv_dtype``, else the one its
    engine text ends with (lower case); None when the record does not say or says it was
    not stated."""
    for cfg in report.configs:
        if cfg.label != label:
            continue
        kv = cfg.settings.get("kv_dtype")
        if kv == NOT_STATED:
            return None  # nobody stated it: no --kv-dtype to add
        if kv:
            return kv.lower()
        match = _KV_WORDS.search(cfg.engine)
        return match.group(1).lower() if match else None
    return None


def _words(line: str) -> list[str] | None:
    try:
        return shlex.split(line)
    except ValueError:
        return None


def _with_kv(line: str, report: ReportV3) -> tuple[str, tuple[str, str] | None]:
    """``line`` with ``--kv-dtype`` added when it measures a configuration whose dtype
    differs from the spec's and names none (see the module docstring)."""
    words = _words(line)
    spec_kv = report.spec.model.kv_dtype if report.spec is not None else None
    if not words or words[:1] != ["tokenwatt"] or words[1:2] not in (["run"], ["collect"]):
        return line, None
    if "--kv-dtype" in words or any(w.startswith("--kv-dtype=") for w in words):
        return line, None
    label = next((b for a, b in itertools.pairwise(words) if a == "--label"), None)
    kv = _kv_dtype(report, label) if label is not None else None
    if kv is None or spec_kv is None or kv == spec_kv.lower():
        return line, None
    before, sep, after = line.partition(" --out ")
    added = (
        f"{before} --kv-dtype {shlex.quote(kv)}{sep}{after}" if sep else f"{line} --kv-dtype {kv}"
    )
    return added, (label or "", kv)


def _run_files(text: str) -> list[str]:
    """Run files (``runs/...json``) named in the commands, in first-mention order."""
    out: list[str] = []
    for line in text.splitlines():
        for word in _words(line) or []:
            if _RUN_FILE.match(word) and word not in out:
                out.append(word)
    return out


def _spec_path(line: str, spec_names: frozenset[str]) -> str:
    """``line`` with a ``--spec NAME`` that is a bare file name of the repository's
    ``specs/`` folder written as ``specs/NAME``: the path that works from the repository's
    root (the record keeps the line as typed, in whatever folder ``collect`` ran)."""
    words = _words(line)
    if not words or words[:1] != ["tokenwatt"]:
        return line
    for a, b in itertools.pairwise(words):
        if a == "--spec" and "/" not in b and b in spec_names and _SAFE_NAME.match(b):
            return line.replace(f"--spec {b}", f"--spec specs/{b}", 1)
    return line


def reproduce_section(
    report: ReportV3, run_files: frozenset[str], spec_names: frozenset[str] = frozenset()
) -> Reproduce:
    """The Reproduce section of ``report``'s page; ``run_files`` are the repository's run
    files as ``runs/...`` paths (what the build found beside ``reports/``), ``spec_names``
    the file names in its ``specs/`` folder (a bare ``--spec NAME`` of one becomes
    ``specs/NAME``)."""
    lines, added = [], []
    for line in report.reproduce.splitlines():
        new, kv = _with_kv(_spec_path(line, spec_names), report)
        lines.append(new)
        if kv is not None:
            added.append(kv)
    text = "\n".join(lines)
    missing = [p for p in _run_files(text) if p not in run_files]
    return Reproduce(text=text, kv_added=added, missing_runs=missing)


__all__ = ["Reproduce", "reproduce_section"]

"""The local ledger of launched instances: one JSON object per line, appended and synced
before anything else happens, so that a crash of this process cannot lose track of an
instance it launched. ``tokenwatt cloud instances`` reads it beside the provider's list.

Lines: ``{"event": "launched", "id", "provider", "type", "region", "name", "at"}`` and
``{"event": "terminated", "id", "at"}`` (``at``: ISO 8601, UTC). Nothing secret is written.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_LEDGER = Path("~/.tokenwatt/cloud-instances.jsonl")
"""Where the ledger is kept unless ``--ledger`` says otherwise (``~`` expanded)."""


@dataclass(frozen=True)
class LedgerEntry:
    """A launched instance the ledger knows, with whether its termination was confirmed."""

    id: str
    provider: str
    type_name: str
    region: str
    name: str
    launched_at: str
    terminated_at: str | None


def _append(path: Path, entry: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(entry, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def record_launch(
    path: Path, *, instance_id: str, provider: str, type_name: str, region: str, name: str
) -> None:
    """Append a ``launched`` line (synced to disk)."""
    _append(
        path,
        {
            "event": "launched",
            "id": instance_id,
            "provider": provider,
            "type": type_name,
            "region": region,
            "name": name,
            "at": _now(),
        },
    )


def record_terminated(path: Path, instance_id: str) -> None:
    """Append a ``terminated`` line: the provider confirmed the instance is gone."""
    _append(path, {"event": "terminated", "id": instance_id, "at": _now()})


def read_ledger(path: Path) -> list[LedgerEntry]:
    """Every launched instance in the ledger, in launch order (an unreadable line is
    skipped: the ledger is a safety net, never a reason to refuse)."""
    if not path.is_file():
        return []
    launched: dict[str, dict[str, str]] = {}
    ended: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or "id" not in entry:
            continue
        if entry.get("event") == "launched":
            launched[str(entry["id"])] = {k: str(v) for k, v in entry.items()}
        elif entry.get("event") == "terminated":
            ended[str(entry["id"])] = str(entry.get("at", ""))
    return [
        LedgerEntry(
            id=i,
            provider=e.get("provider", "?"),
            type_name=e.get("type", "?"),
            region=e.get("region", "?"),
            name=e.get("name", "?"),
            launched_at=e.get("at", "?"),
            terminated_at=ended.get(i),
        )
        for i, e in launched.items()
    ]

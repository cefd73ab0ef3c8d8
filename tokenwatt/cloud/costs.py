"""The session's real cost, written into each run record it brought back.

Once the instance is confirmed terminated (or could not be), the session's length is
known: launch request to confirmation. It is billed by the minute
(:func:`~tokenwatt.cloud.estimate.billed_seconds`), and each run record gets its share in
proportion to its own length (:class:`~tokenwatt.records.CloudCost`), so that the shares
add up to the bill. The records are rewritten atomically, before ``tokenwatt report`` hashes
them.
"""

from __future__ import annotations

from pathlib import Path

from tokenwatt.cloud.estimate import billed_seconds, cost_usd
from tokenwatt.files import atomic_write_text
from tokenwatt.records import CloudCost, RunRecord, read_json, validate


def record_stamps(runs_dir: Path) -> dict[Path, int]:
    """The run records (``*.json``) directly in ``runs_dir``, with their modification
    times (ns); empty when the folder does not exist."""
    if not runs_dir.is_dir():
        return {}
    return {p: p.stat().st_mtime_ns for p in sorted(runs_dir.glob("*.json")) if p.is_file()}


def records_since(runs_dir: Path, before: dict[Path, int]) -> list[Path]:
    """The run records in ``runs_dir`` that are new or changed since ``before`` (a
    :func:`record_stamps` taken earlier): those a session brought back, even one that
    was interrupted before its runner could say which."""
    return [p for p, ns in record_stamps(runs_dir).items() if before.get(p) != ns]


def shares(durations: list[float]) -> list[float]:
    """Each duration's share of their sum (equal shares when they add up to zero)."""
    total = sum(durations)
    if total <= 0:
        return [1.0 / len(durations)] * len(durations) if durations else []
    return [d / total for d in durations]


def run_seconds(record: RunRecord) -> float:
    """A run's own length (s): finished − started (0 when it has no finish time)."""
    if record.finished is None:
        return 0.0
    return max(0.0, (record.finished - record.started).total_seconds())


def apply_costs(
    paths: list[Path],
    *,
    provider: str,
    instance_type: str,
    region: str | None,
    instance_id: str,
    session_id: str,
    price_usd_per_hour: float,
    session_s: float,
    terminate_confirmed: bool,
) -> list[CloudCost]:
    """Write each run record's :class:`CloudCost` into it; the costs, in ``paths``' order.

    Raises:
        RecordError: a record that does not validate.
        WriteError: a record that cannot be rewritten.
    """
    records = [validate(RunRecord, read_json(p), str(p)) for p in paths]
    part = shares([run_seconds(r) for r in records])
    billed = billed_seconds(session_s)
    total = cost_usd(price_usd_per_hour, session_s)
    costs = []
    for path, record, share in zip(paths, records, part, strict=True):
        cost = CloudCost(
            provider=provider,
            instance_type=instance_type,
            region=region,
            instance_id=instance_id,
            session_id=session_id,
            price_usd_per_hour=price_usd_per_hour,
            session_s=round(session_s, 3),
            billed_s=billed,
            session_cost_usd=round(total, 6),
            run_s=round(run_seconds(record), 3),
            share=share,
            cost_usd=round(share * total, 6),
            terminate_confirmed=terminate_confirmed,
        )
        updated = record.model_copy(update={"cost": cost})
        atomic_write_text(path.resolve(), updated.model_dump_json(indent=2) + "\n")
        costs.append(cost)
    return costs

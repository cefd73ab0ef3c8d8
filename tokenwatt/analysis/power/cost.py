"""What serving costs, in money and in energy, per million tokens; a cloud session's total.

Pure. ``goodput_tok_s`` is output tokens per second of the requests that met the SLO at the
found rate (methods/goodput.md), so the figures are the cost of serving at that rate:

* dollars per million output tokens = ``price_usd_per_hour / (goodput_tok_s × 3600) × 10⁶``
  (the instance's hourly price over the tokens it serves in an hour);
* kilowatt-hours per million tokens = ``10⁶ / tokens_per_joule / 3.6·10⁶`` (1 kWh = 3.6 MJ).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tokenwatt.records import CloudCost

JOULES_PER_KWH = 3.6e6


def usd_per_million_tokens(price_usd_per_hour: float, goodput_tok_s: float) -> float | None:
    """Dollars per million output tokens at ``goodput_tok_s``; None without goodput."""
    if goodput_tok_s <= 0:
        return None
    return price_usd_per_hour / (goodput_tok_s * 3600.0) * 1e6


def kwh_per_million_tokens(tokens_per_joule: float | None) -> float | None:
    """Kilowatt-hours per million tokens; None without a positive tokens-per-joule."""
    if tokens_per_joule is None or tokens_per_joule <= 0:
        return None
    return 1e6 / tokens_per_joule / JOULES_PER_KWH


@dataclass(frozen=True)
class SessionTotal:
    """One cloud session's bill, as its runs' cost records state it.

    Attributes:
        session_id: the session.
        instance_type: the type it rented.
        cost_usd: the whole session's cost (its runs agree on it).
        confirmed: False when any run says the termination was not confirmed.
    """

    session_id: str
    instance_type: str
    cost_usd: float
    confirmed: bool


def session_totals(costs: Iterable[CloudCost | None]) -> list[SessionTotal]:
    """The distinct sessions among ``costs``, in order of first appearance."""
    seen: dict[str, SessionTotal] = {}
    for c in costs:
        if c is None:
            continue
        before = seen.get(c.session_id)
        confirmed = c.terminate_confirmed and (before is None or before.confirmed)
        seen[c.session_id] = SessionTotal(
            c.session_id, c.instance_type, c.session_cost_usd, confirmed
        )
    return list(seen.values())

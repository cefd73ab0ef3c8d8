"""The session's plan before anything is launched: the session id, the SSH key the
instance is launched with, the watchdog's deadline and the lines shown to the operator."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from pathlib import Path

from tokenwatt.cloud.estimate import Estimate, cost_usd
from tokenwatt.cloud.provider import InstanceType, Provider
from tokenwatt.errors import InputError, Problem
from tokenwatt.files import check_regular_file

DEADLINE_FACTOR = 1.5
DEADLINE_MARGIN_S = 1800.0
"""The watchdog's default deadline: 1.5 × the estimate + 30 min, so that a session longer
than estimated is not cut short and a crash leaks at most that long."""


def new_session_id(now: dt.datetime) -> str:
    """``YYYYMMDD-HHMMSS-xxxx`` (UTC, four random hex digits)."""
    return f"{now.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def default_deadline_s(estimate: Estimate) -> float:
    """See :data:`DEADLINE_FACTOR`."""
    return DEADLINE_FACTOR * estimate.total_s + DEADLINE_MARGIN_S


def public_key(key_file: Path) -> str:
    """The public key beside the private key ``key_file`` (``KEY.pub``): type and base64.

    Raises:
        InputError: no readable ``KEY.pub`` (the provider needs the public half).
    """
    pub = key_file.with_name(key_file.name + ".pub")
    check_regular_file(key_file, what="SSH private key", max_bytes=64 * 1024)
    check_regular_file(pub, what="SSH public key (--ssh-key's .pub)", max_bytes=64 * 1024)
    words = pub.read_text(encoding="utf-8", errors="replace").split()
    if len(words) < 2 or not words[0].startswith(("ssh-", "ecdsa-")):
        raise InputError([Problem(str(pub), "", "not an OpenSSH public key")])
    return f"{words[0]} {words[1]}"


def ensure_ssh_key(provider: Provider, public: str) -> str:
    """The name of the account's key whose type and base64 match ``public``; registered as
    ``tokenwatt-<12 hex of its SHA-256>`` when the account does not have it yet."""
    for key in provider.ssh_keys():
        if key.public_key.split()[:2] == public.split()[:2]:
            return key.name
    name = "tokenwatt-" + hashlib.sha256(public.encode()).hexdigest()[:12]
    return provider.add_ssh_key(name, public).name


def plan_lines(
    t: InstanceType,
    region: str | None,
    session_id: str,
    estimate: Estimate,
    deadline_s: float,
) -> list[str]:
    """What the operator is shown before confirming."""
    where = region or (", ".join(t.regions) or "none")
    lines = [
        f"instance: {t.name} ({t.gpus} × {t.gpu_description}) at ${t.price_usd_per_hour:.2f}/h, "
        f"region {'' if region else 'first with capacity of '}{where}",
        f"session id: {session_id} (instance name tokenwatt-{session_id})",
    ]
    for label, smoke, seconds in estimate.runs_s:
        kind = "smoke run" if smoke else "run"
        lines.append(f"  {label}: {kind}, about {seconds / 60:.0f} min")
    lines.append(
        f"ESTIMATE (not a quote): about {estimate.total_s / 60:.0f} min including boot and "
        f"install, about ${estimate.cost_usd:.2f}"
    )
    lines.append(
        f"watchdog: the instance powers itself off after {deadline_s / 60:.0f} min; at most "
        f"${cost_usd(t.price_usd_per_hour, deadline_s):.2f} if this process dies"
    )
    return lines

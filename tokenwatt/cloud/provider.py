"""The small interface a GPU cloud provider implements for ``tokenwatt cloud``.

What a benchmark session needs from a provider and nothing more: the instance types with
their hourly price and the regions that have capacity now, launching one instance with a
name and an SSH key, reading its status, terminating it, listing the account's instances,
and the SSH keys the account knows. :mod:`tokenwatt.cloud.lambda_api` implements it for
Lambda Cloud; another provider is one more module with a class of the same shape.

Every error a provider raises on purpose is a :class:`CloudError`; the subclasses name the
cases an operator acts on differently (no capacity, quota, bad key, rate limit). Their
text never holds the API key: the providers scrub it (:func:`tokenwatt.redact.scrub`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from tokenwatt.errors import TokenwattError

Status = Literal["booting", "active", "unhealthy", "terminating", "terminated", "unknown"]
"""An instance's state as the session reads it (Lambda's names; others map onto them)."""

NAME_PREFIX = "tokenwatt-"
"""Every instance ``tokenwatt cloud session`` launches is named ``tokenwatt-<session id>``,
so ``tokenwatt cloud instances`` finds them even without the local ledger."""


class CloudError(TokenwattError):
    """A provider refused or failed a request (exit status 1)."""


class NoCapacityError(CloudError):
    """No region has capacity for the instance type asked for (now)."""


class QuotaError(CloudError):
    """The account may not launch more instances (the provider's quota)."""


class AuthError(CloudError):
    """The API key was refused (invalid, expired, deleted, or the account is inactive)."""


class RateLimitError(CloudError):
    """Still rate-limited after the bounded retries."""


class NotFoundError(CloudError):
    """The object (an instance) does not exist (any more)."""


@dataclass(frozen=True)
class InstanceType:
    """An instance type on offer.

    Attributes:
        name: the provider's name (``gpu_1x_h100_sxm5``).
        description: its long name.
        gpus: GPUs per instance.
        gpu_description: what the GPUs are (``H100 (80 GB SXM5)``).
        price_usd_per_hour: on-demand price, US dollars per hour.
        regions: names of the regions with capacity now (empty: none).
    """

    name: str
    description: str
    gpus: int
    gpu_description: str
    price_usd_per_hour: float
    regions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Instance:
    """One instance of the account, as the provider reports it.

    Attributes:
        id: the provider's instance id.
        name: the name given at launch (None: none).
        status: see :data:`Status`.
        ip: public IPv4 address once known.
        region: region name.
        type_name: instance type name.
    """

    id: str
    name: str | None
    status: Status
    ip: str | None = None
    region: str | None = None
    type_name: str | None = None


@dataclass(frozen=True)
class SshKey:
    """An SSH public key registered with the account (what a launch names)."""

    name: str
    public_key: str
    id: str | None = None


@dataclass(frozen=True)
class LaunchRequest:
    """What to launch: one instance of ``type_name`` in ``region`` named ``name``,
    reachable with the registered key ``ssh_key_name``."""

    type_name: str
    region: str
    ssh_key_name: str
    name: str


class Provider(Protocol):
    """A GPU cloud as ``tokenwatt cloud`` uses it. Every call has a deadline; errors are
    :class:`CloudError` subclasses whose text holds no credential."""

    name: str

    def instance_types(self) -> list[InstanceType]:
        """The types on offer, with prices and the regions with capacity now."""
        ...

    def launch(self, request: LaunchRequest) -> str:
        """Launch one instance; return its id. Raises NoCapacityError, QuotaError, ..."""
        ...

    def instance(self, instance_id: str) -> Instance:
        """One instance's state. Raises NotFoundError when the provider no longer knows it."""
        ...

    def instances(self) -> list[Instance]:
        """Every instance of the account the provider lists (running or starting)."""
        ...

    def terminate(self, instance_id: str) -> None:
        """Ask for the instance to be terminated (confirm with :meth:`instance`)."""
        ...

    def ssh_keys(self) -> list[SshKey]:
        """The SSH keys registered with the account."""
        ...

    def add_ssh_key(self, name: str, public_key: str) -> SshKey:
        """Register a public key under ``name``."""
        ...

    def close(self) -> None:
        """Release the connection pool."""
        ...

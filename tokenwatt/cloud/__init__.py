"""Stage package: cloud, a benchmark session on a rented GPU instance (``tokenwatt cloud``).

The provider interface (:mod:`~tokenwatt.cloud.provider`) and Lambda Cloud's client
(:mod:`~tokenwatt.cloud.lambda_api`); the session's plan and cost estimate, the
orchestration that launches, runs and always terminates, and the local ledger of launched
instances. Beside ``collect`` in the layers: it uses records, analysis, errors, files and
redact; nothing below imports it, and only the CLI does.
"""

from tokenwatt.cloud.lambda_api import LAMBDA_API_URL, USER_AGENT, LambdaCloud, read_api_key
from tokenwatt.cloud.provider import (
    NAME_PREFIX,
    AuthError,
    CloudError,
    Instance,
    InstanceType,
    LaunchRequest,
    NoCapacityError,
    NotFoundError,
    Provider,
    QuotaError,
    RateLimitError,
    SshKey,
)

__all__ = [
    "LAMBDA_API_URL",
    "NAME_PREFIX",
    "USER_AGENT",
    "AuthError",
    "CloudError",
    "Instance",
    "InstanceType",
    "LambdaCloud",
    "LaunchRequest",
    "NoCapacityError",
    "NotFoundError",
    "Provider",
    "QuotaError",
    "RateLimitError",
    "SshKey",
    "read_api_key",
]

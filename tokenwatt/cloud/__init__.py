"""Stage package: cloud, a benchmark session on a rented GPU instance (``tokenwatt cloud``).

The provider interface (:mod:`~tokenwatt.cloud.provider`) and Lambda Cloud's client
(:mod:`~tokenwatt.cloud.lambda_api`); the session's plan and cost estimate, the
orchestration that launches, runs and always terminates, and the local ledger of launched
instances. Beside ``collect`` in the layers: it uses records, analysis, errors, files and
redact; nothing below imports it, and only the CLI does. On the box
(:mod:`~tokenwatt.cloud.remote`): everything that happens over SSH once it accepts connections.
"""

from tokenwatt.cloud.costs import apply_costs, record_stamps, records_since
from tokenwatt.cloud.estimate import Estimate, RunPlan, cost_usd, estimate
from tokenwatt.cloud.lambda_api import LAMBDA_API_URL, USER_AGENT, LambdaCloud, read_api_key
from tokenwatt.cloud.ledger import DEFAULT_LEDGER, read_ledger, record_terminated
from tokenwatt.cloud.orchestrate import (
    CloudOutcome,
    CloudPlan,
    SessionStopped,
    TerminateUnconfirmedError,
    Timing,
    now_utc,
    run_cloud_session,
    terminate_and_confirm,
)
from tokenwatt.cloud.plan import (
    default_deadline_s,
    ensure_ssh_key,
    new_session_id,
    plan_lines,
    public_key,
)
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
from tokenwatt.cloud.remote import (
    RemoteError,
    RemoteResult,
    RemoteTarget,
    arm_watchdog,
    run_remote_session,
)
from tokenwatt.cloud.remote_files import plan_upload
from tokenwatt.cloud.runner import Host, Runner, RunnerResult, SshRunner, load_runner

__all__ = [
    "DEFAULT_LEDGER",
    "LAMBDA_API_URL",
    "NAME_PREFIX",
    "USER_AGENT",
    "AuthError",
    "CloudError",
    "CloudOutcome",
    "CloudPlan",
    "Estimate",
    "Host",
    "Instance",
    "InstanceType",
    "LambdaCloud",
    "LaunchRequest",
    "NoCapacityError",
    "NotFoundError",
    "Provider",
    "QuotaError",
    "RateLimitError",
    "RemoteError",
    "RemoteResult",
    "RemoteTarget",
    "RunPlan",
    "Runner",
    "RunnerResult",
    "SessionStopped",
    "SshKey",
    "SshRunner",
    "TerminateUnconfirmedError",
    "Timing",
    "apply_costs",
    "arm_watchdog",
    "cost_usd",
    "default_deadline_s",
    "ensure_ssh_key",
    "estimate",
    "load_runner",
    "new_session_id",
    "now_utc",
    "plan_lines",
    "plan_upload",
    "public_key",
    "read_api_key",
    "read_ledger",
    "record_stamps",
    "record_terminated",
    "records_since",
    "run_cloud_session",
    "run_remote_session",
    "terminate_and_confirm",
]

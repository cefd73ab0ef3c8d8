"""Rented GPU boxes: a whole benchmark session on a cloud instance (``tokenwatt cloud``).

``remote``: everything that happens on the box over SSH once it accepts connections.
"""

from tokenwatt.cloud.remote import (
    RemoteError,
    RemoteResult,
    RemoteTarget,
    arm_watchdog,
    run_remote_session,
)

__all__ = ["RemoteError", "RemoteResult", "RemoteTarget", "arm_watchdog", "run_remote_session"]

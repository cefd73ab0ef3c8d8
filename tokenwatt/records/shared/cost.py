"""What a run cost on a rented instance (``tokenwatt cloud session``): kept in the run
record and carried per configuration into the report record."""

from __future__ import annotations

from pydantic import Field

from tokenwatt.records.shared.base import NonEmptyStr, NonNegFloat, PosFloat, StrictModel


class CloudCost(StrictModel):
    """A run's share of the bill of the cloud session it was measured in.

    The session is billed as one instance from launch to confirmed termination, rounded up
    to the provider's billing increment; each run of the session gets a share in
    proportion to its own length (``finished - started``), so that boot, install and smoke
    runs are spread over the measured runs and the shares add up to the session's cost.
    """

    provider: NonEmptyStr = Field(description="The cloud provider ('lambda').")
    instance_type: NonEmptyStr = Field(description="The provider's instance type name.")
    region: NonEmptyStr | None = Field(default=None, description="The region it ran in.")
    instance_id: NonEmptyStr = Field(description="The provider's id of the instance.")
    session_id: NonEmptyStr = Field(
        description="The cloud session's id (the instance's name is tokenwatt-<session id>); "
        "runs with the same id shared one instance and one bill."
    )
    price_usd_per_hour: PosFloat = Field(
        description="The instance type's on-demand price at launch (USD per hour)."
    )
    session_s: NonNegFloat = Field(
        description="The session's length (s): launch request to confirmed termination (or "
        "to the last check when it could not be confirmed)."
    )
    billed_s: NonNegFloat = Field(
        description="session_s rounded up to the billing increment (Lambda: one minute)."
    )
    session_cost_usd: NonNegFloat = Field(
        description="The whole session's cost (USD): price_usd_per_hour × billed_s / 3600."
    )
    run_s: NonNegFloat = Field(description="This run's own length (s), finished − started.")
    share: float = Field(
        ge=0, le=1, description="This run's share of the session's bill: run_s ÷ Σ run_s."
    )
    cost_usd: NonNegFloat = Field(
        description="This run's share of the bill (USD): share × session_cost_usd."
    )
    terminate_confirmed: bool = Field(
        description="Whether the provider confirmed the instance terminated; false: the bill "
        "may still be running and session_s is a lower bound."
    )

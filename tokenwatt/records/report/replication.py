"""The replication record: a published configuration measured again.

``tokenwatt replicate`` writes one to ``replications/`` beside ``reports/``. It keeps the
new measurement summarised the way a report keeps a configuration (``measured``, a
:class:`~tokenwatt.records.report.report_v3.ConfigV3`) and, for a reader, each headline figure old
and new with the verdict. The build recomputes the verdicts from the report and
``measured``; the stored ones are what the command printed. The original report is never
changed.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field

from tokenwatt.records.report.report_v3 import ConfigV3
from tokenwatt.records.shared.base import BoundedFloat, NonEmptyStr, StrictModel

Figure = Literal["goodput_tok_s", "ttft_p99_ms", "tpot_p99_ms", "tokens_per_joule", "accuracy"]
FigureVerdict = Literal["agree", "disagree", "unknown"]
ReplicationVerdict = Literal["agrees", "disagrees", "inconclusive"]


class FigureCheck(StrictModel):
    """One headline figure, as published and as measured again, and whether they agree:
    their intervals overlap (agree), do not (disagree), or one side has no interval or no
    value (unknown)."""

    figure: Figure = Field(
        description="goodput_tok_s (tok/s), ttft_p99_ms and tpot_p99_ms (ms, at the "
        "operating point), tokens_per_joule (tok/J), accuracy (score, %)."
    )
    old: BoundedFloat | None = Field(description="The published value; null when not given.")
    old_low: BoundedFloat | None = Field(description="Lower end of its interval.")
    old_high: BoundedFloat | None = Field(
        description="Upper end of its interval; null when unbounded or not known."
    )
    new: BoundedFloat | None = Field(description="The value measured again.")
    new_low: BoundedFloat | None = Field(description="Lower end of its interval.")
    new_high: BoundedFloat | None = Field(
        description="Upper end of its interval; null when unbounded or not known."
    )
    verdict: FigureVerdict = Field(
        description="agree: the 95% intervals overlap; disagree: they do not; unknown: a "
        "value or an interval is missing, so the figure cannot be judged."
    )
    reason: str | None = Field(default=None, description="Why, in words, when not agree.")


class ReplicationV1(StrictModel):
    """A published configuration measured again from what its records hold."""

    kind: Literal["replication"] = Field(
        default="replication", description="Which record this is (always 'replication')."
    )
    schema_version: Literal[1] = Field(default=1, description="Version of this format (1).")
    report_id: NonEmptyStr = Field(description="The report whose configuration was replicated.")
    report_sha256: NonEmptyStr = Field(
        description="SHA-256 of the report file when it was replicated."
    )
    config: NonEmptyStr = Field(description="The configuration's label in the report.")
    measured_at: dt.datetime = Field(description="When the replication's run finished.")
    run_file: NonEmptyStr = Field(
        description="The replication's run record, relative to the archive (runs/...)."
    )
    run_sha256: NonEmptyStr = Field(description="SHA-256 of that run record.")
    command: str = Field(description="The tokenwatt replicate command line (no secrets).")
    fingerprint: NonEmptyStr = Field(
        description="Spec fingerprint of the replication's run (the report's, when both "
        "measured the same thing)."
    )
    changed_settings: list[str] = Field(
        default_factory=list,
        description="Settings whose value differs between the published configuration and "
        "the replication (engine version, flags, KV dtype, ...), by name.",
    )
    measured: ConfigV3 = Field(
        description="The new measurement, summarised as a report keeps a configuration."
    )
    figures: list[FigureCheck] = Field(
        default_factory=list, description="Each headline figure old and new, as printed."
    )
    verdict: ReplicationVerdict = Field(
        description="agrees: goodput agrees and no figure disagrees; disagrees: a figure "
        "disagrees; inconclusive: goodput cannot be judged (a result not measured, no "
        "interval) and nothing disagrees."
    )

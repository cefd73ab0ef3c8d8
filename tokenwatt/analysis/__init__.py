"""Pure analysis functions: no I/O, numbers in and numbers out.

Imports nothing from the other stages but :mod:`tokenwatt.records`.
"""

from tokenwatt.analysis.capacity import Capacity, NoCredit, capacity, cards_needed
from tokenwatt.analysis.efficiency import delta_pct, tokens_per_joule, tokens_per_joule_from_energy
from tokenwatt.analysis.gate import GateVerdict, accuracy_delta_pts, gate_verdict, spread_pts
from tokenwatt.analysis.geometry import (
    ModelGeometry,
    ParameterCounts,
    active_parameters_per_token,
    geometry_from_config,
    parameter_counts,
)
from tokenwatt.analysis.mbu import (
    StepBytes,
    bytes_per_decode_step,
    expected_distinct_experts,
    kv_bytes_per_token,
    kv_capacity_tokens,
    mbu_breakdown,
    mbu_from_measurements,
    mbu_pct,
    mbu_result,
    weight_bytes,
)
from tokenwatt.analysis.paired import (
    AccuracySummary,
    PairedVerdict,
    accuracy_summary,
    bootstrap_delta_ci_pts,
    mcnemar_exact_p,
    paired_verdict,
)
from tokenwatt.analysis.power import (
    PowerSample,
    not_covered_text,
    sum_throttle_counts,
    summarize_window,
    throttle_share_pct,
    trapezoid_energy_j,
    window_tokens_per_joule,
)
from tokenwatt.analysis.report import (
    ConfigAnalysis,
    Disagreement,
    ReportAnalysis,
    analyse_report,
    conclusion,
)
from tokenwatt.analysis.scoring import ScoredAnswer, extract_answer, score_completion
from tokenwatt.analysis.summarise import report_command, slug, summarise
from tokenwatt.analysis.variance import variance_band_pct

__all__ = [
    "AccuracySummary",
    "Capacity",
    "ConfigAnalysis",
    "Disagreement",
    "GateVerdict",
    "ModelGeometry",
    "NoCredit",
    "PairedVerdict",
    "ParameterCounts",
    "PowerSample",
    "ReportAnalysis",
    "ScoredAnswer",
    "StepBytes",
    "accuracy_delta_pts",
    "accuracy_summary",
    "active_parameters_per_token",
    "analyse_report",
    "bootstrap_delta_ci_pts",
    "bytes_per_decode_step",
    "capacity",
    "cards_needed",
    "conclusion",
    "delta_pct",
    "expected_distinct_experts",
    "extract_answer",
    "gate_verdict",
    "geometry_from_config",
    "kv_bytes_per_token",
    "kv_capacity_tokens",
    "mbu_breakdown",
    "mbu_from_measurements",
    "mbu_pct",
    "mbu_result",
    "mcnemar_exact_p",
    "not_covered_text",
    "paired_verdict",
    "parameter_counts",
    "report_command",
    "score_completion",
    "slug",
    "spread_pts",
    "sum_throttle_counts",
    "summarise",
    "summarize_window",
    "throttle_share_pct",
    "tokens_per_joule",
    "tokens_per_joule_from_energy",
    "trapezoid_energy_j",
    "variance_band_pct",
    "weight_bytes",
    "window_tokens_per_joule",
]

"""Pure analysis functions: no I/O, numbers in and numbers out.

Imports nothing from the other stages but :mod:`tokenwatt.records` (``lint-imports``
checks it). The other stages and the CLI import analysis from here, not from its modules.
"""

from tokenwatt.analysis.arrival_fit import KS_ALPHA, bunched_sends_warning, send_gaps_ks_p
from tokenwatt.analysis.capacity import Capacity, NoCredit, capacity, cards_needed
from tokenwatt.analysis.config_settings import SETTING_LABELS, differing_settings
from tokenwatt.analysis.cost import (
    SessionTotal,
    kwh_per_million_tokens,
    session_totals,
    usd_per_million_tokens,
)
from tokenwatt.analysis.doubt import ci_side, ci_text, doubt_sentence, run_doubt, verdict_words
from tokenwatt.analysis.efficiency import delta_pct, tokens_per_joule, tokens_per_joule_from_energy
from tokenwatt.analysis.failure import classify_failure
from tokenwatt.analysis.gate import (
    GateVerdict,
    accuracy_delta_pts,
    gate_comparison,
    gate_delta_text,
    gate_drop_text,
    gate_verdict,
    spread_pts,
)
from tokenwatt.analysis.geometry import (
    ModelGeometry,
    ParameterCounts,
    active_parameters_per_token,
    geometry_from_config,
    parameter_counts,
)
from tokenwatt.analysis.intervals import Interval
from tokenwatt.analysis.latency import (
    missed_beyond_doubt,
    misses_allowed,
    percentile,
    send_lag_ms,
    summarise_window,
    tpot_ms,
    ttft_ms,
    worker_lags,
)
from tokenwatt.analysis.latency_cdf import (
    operating_point_distribution,
    operating_point_rows,
    row_tpot_ms,
    row_ttft_ms,
)
from tokenwatt.analysis.mbu import (
    StepBytes,
    bytes_per_decode_step,
    decode_steps_per_s,
    expected_distinct_experts,
    kv_bytes_per_token,
    kv_capacity_tokens,
    mbu_breakdown,
    mbu_from_measurements,
    mbu_pct,
    mbu_result,
    mean_decode_context_tokens,
    weight_bytes,
)
from tokenwatt.analysis.model_info import info_rows, model_info
from tokenwatt.analysis.number_text import MINUS, comparison, signed, trimmed, value_text
from tokenwatt.analysis.paired import (
    AccuracySummary,
    PairedVerdict,
    accuracy_summary,
    bootstrap_delta_ci_pts,
    mcnemar_exact_p,
    paired_verdict,
    straddles_threshold,
)
from tokenwatt.analysis.power import (
    not_covered_text,
    sum_throttle_counts,
    summarize_window,
    throttle_share_pct,
    trapezoid_energy_j,
    window_tokens_per_joule,
)
from tokenwatt.analysis.repeat_stats import config_tokens_per_joule, repeat_tokens_per_joule
from tokenwatt.analysis.report import (
    ConfigAnalysis,
    Disagreement,
    ReportAnalysis,
    analyse_report,
    band_warning,
    conclusion,
)
from tokenwatt.analysis.report_table import goodput_cell, no_interval_reason, report_summary
from tokenwatt.analysis.run_table import (
    LATENCIES,
    errors_cell,
    labelled_request_windows,
    ms_cell,
    request_percentiles,
    run_json,
    run_rows,
    triple_cell,
    workload_text,
)
from tokenwatt.analysis.scoring import ScoredAnswer, extract_answer, score_completion
from tokenwatt.analysis.search_story import (
    explain_config,
    explain_run,
    gpu_minutes,
    rate_text,
)
from tokenwatt.analysis.summarise import report_command, slug, summarise
from tokenwatt.analysis.variance import variance_band_pct
from tokenwatt.analysis.window_checks import sustained_note
from tokenwatt.analysis.window_labels import (
    LabelPlan,
    WindowLabel,
    config_labels,
    request_label,
    run_labels,
    window_labels,
)

__all__ = [
    "KS_ALPHA",
    "LATENCIES",
    "MINUS",
    "SETTING_LABELS",
    "AccuracySummary",
    "Capacity",
    "ConfigAnalysis",
    "Disagreement",
    "GateVerdict",
    "Interval",
    "LabelPlan",
    "ModelGeometry",
    "NoCredit",
    "PairedVerdict",
    "ParameterCounts",
    "ReportAnalysis",
    "ScoredAnswer",
    "SessionTotal",
    "StepBytes",
    "WindowLabel",
    "accuracy_delta_pts",
    "accuracy_summary",
    "active_parameters_per_token",
    "analyse_report",
    "band_warning",
    "bootstrap_delta_ci_pts",
    "bunched_sends_warning",
    "bytes_per_decode_step",
    "capacity",
    "cards_needed",
    "ci_side",
    "ci_text",
    "classify_failure",
    "comparison",
    "conclusion",
    "config_labels",
    "config_tokens_per_joule",
    "decode_steps_per_s",
    "delta_pct",
    "differing_settings",
    "doubt_sentence",
    "errors_cell",
    "expected_distinct_experts",
    "explain_config",
    "explain_run",
    "extract_answer",
    "gate_comparison",
    "gate_delta_text",
    "gate_drop_text",
    "gate_verdict",
    "geometry_from_config",
    "goodput_cell",
    "gpu_minutes",
    "info_rows",
    "kv_bytes_per_token",
    "kv_capacity_tokens",
    "kwh_per_million_tokens",
    "labelled_request_windows",
    "mbu_breakdown",
    "mbu_from_measurements",
    "mbu_pct",
    "mbu_result",
    "mcnemar_exact_p",
    "mean_decode_context_tokens",
    "missed_beyond_doubt",
    "misses_allowed",
    "model_info",
    "ms_cell",
    "no_interval_reason",
    "not_covered_text",
    "operating_point_distribution",
    "operating_point_rows",
    "paired_verdict",
    "parameter_counts",
    "percentile",
    "rate_text",
    "repeat_tokens_per_joule",
    "report_command",
    "report_summary",
    "request_label",
    "request_percentiles",
    "row_tpot_ms",
    "row_ttft_ms",
    "run_doubt",
    "run_json",
    "run_labels",
    "run_rows",
    "score_completion",
    "send_gaps_ks_p",
    "send_lag_ms",
    "session_totals",
    "signed",
    "slug",
    "spread_pts",
    "straddles_threshold",
    "sum_throttle_counts",
    "summarise",
    "summarise_window",
    "summarize_window",
    "sustained_note",
    "throttle_share_pct",
    "tokens_per_joule",
    "tokens_per_joule_from_energy",
    "tpot_ms",
    "trapezoid_energy_j",
    "trimmed",
    "triple_cell",
    "ttft_ms",
    "usd_per_million_tokens",
    "value_text",
    "variance_band_pct",
    "verdict_words",
    "weight_bytes",
    "window_labels",
    "window_tokens_per_joule",
    "worker_lags",
    "workload_text",
]

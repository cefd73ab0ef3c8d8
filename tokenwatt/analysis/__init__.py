"""Pure analysis functions: no I/O, numbers in and numbers out.

Imports nothing from the other stages but :mod:`tokenwatt.records`.
"""

from tokenwatt.analysis.capacity import Capacity, NoCredit, capacity, cards_needed
from tokenwatt.analysis.efficiency import delta_pct, tokens_per_joule, tokens_per_joule_from_energy
from tokenwatt.analysis.gate import GateVerdict, accuracy_delta_pts, gate_verdict, spread_pts
from tokenwatt.analysis.report import (
    ConfigAnalysis,
    Disagreement,
    ReportAnalysis,
    analyse_report,
    conclusion,
)
from tokenwatt.analysis.summarise import report_command, slug, summarise
from tokenwatt.analysis.variance import variance_band_pct

__all__ = [
    "Capacity",
    "ConfigAnalysis",
    "Disagreement",
    "GateVerdict",
    "NoCredit",
    "ReportAnalysis",
    "accuracy_delta_pts",
    "analyse_report",
    "capacity",
    "cards_needed",
    "conclusion",
    "delta_pct",
    "gate_verdict",
    "report_command",
    "slug",
    "spread_pts",
    "summarise",
    "tokens_per_joule",
    "tokens_per_joule_from_energy",
    "variance_band_pct",
]

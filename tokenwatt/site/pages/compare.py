"""What differs between the configurations of a report, and which sections were measured.

The comparison table lists every serving setting the report keeps per configuration
(``configs[].settings``, from the run records: engine version and flags, KV-cache and
weight dtypes, parallelism, capacities, accelerator ...), one column per configuration,
and marks the settings whose values differ. A record made before settings were kept
compares the one description it has (``configs[].engine``). Values are record text,
escaped by :func:`~tokenwatt.site.format.escape.md_text`.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from tokenwatt.analysis import SETTING_LABELS, differing_settings
from tokenwatt.records import HardwareV1, ReportV3
from tokenwatt.site.format.escape import md_text, trusted
from tokenwatt.site.format.fmt import DASH

NO_NAME = frozenset({"", "none", "unknown"})


def _settings(report: ReportV3) -> list[dict[str, str]]:
    if any(cfg.settings for cfg in report.configs):
        return [dict(cfg.settings) for cfg in report.configs]
    return [{"engine": cfg.engine} for cfg in report.configs]


def _cell(value: str | None, differs: bool) -> Markup:
    if value is None:
        return DASH
    text = md_text(value)
    return trusted("**") + text + trusted("**") if differs else text


def compare_rows(report: ReportV3) -> list[dict[str, Any]]:
    """One row per setting: ``label``, ``differs`` (≠ marker or empty) and one ``cells``
    entry per configuration (differing values in bold; a dash where a record lacks it).
    Empty for a report of one configuration."""
    if len(report.configs) < 2:
        return []
    settings = _settings(report)
    rows = []
    for name, differs in differing_settings(settings):
        rows.append(
            {
                "label": SETTING_LABELS.get(name, name),
                "differs": trusted("≠") if differs else trusted(""),
                "cells": [_cell(s.get(name), differs) for s in settings],
            }
        )
    # What differs first, each group in display order.
    return sorted(rows, key=lambda r: not r["differs"])


def has_power(report: ReportV3) -> bool:
    """Whether any configuration has a power figure (mean power, a repeat's energy or a
    power timeline) or a power reading that was refused (``power_refused``: the page shows
    why); without either the page shows no power table, column or section."""
    return any(
        cfg.node_power_kw is not None
        or cfg.power_timeline
        or any(
            r.mean_power_w is not None or r.energy_j is not None or r.power_refused
            for r in cfg.repeats_detail
        )
        for cfg in report.configs
    )


def has_accuracy(report: ReportV3) -> bool:
    """Whether any configuration has an accuracy result (else no accuracy column, gate
    sentence or suite table)."""
    return any(cfg.accuracy is not None for cfg in report.configs)


def hardware_text(hw: HardwareV1) -> str:
    """``"1× NVIDIA H100 80GB HBM3"``, or ``"hardware not recorded"`` when the record names
    no accelerator (a run with ``hardware.adapter: none``)."""
    if hw.accelerator.strip().casefold() in NO_NAME:
        return "hardware not recorded"
    return f"{hw.count}× {hw.accelerator}"

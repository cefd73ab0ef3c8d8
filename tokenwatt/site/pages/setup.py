"""The setup tables of a report page: hardware, software, model, workload, SLO, power, suite."""

from __future__ import annotations

from typing import Any

from tokenwatt.analysis import ReportAnalysis
from tokenwatt.records import ReportV3, Spec, field_used, overrides_text, unused_fields
from tokenwatt.site.format.escape import md_text, trusted
from tokenwatt.site.format.fmt import DASH, num, seconds
from tokenwatt.site.format.intervals import band_rows

Row = tuple[str, Any]


def _text(value: str | None) -> Any:
    return DASH if value is None or value == "" else value


_READ_ADAPTERS = frozenset({"nvidia", "amd"})
"""Spec adapters that read the accelerators, so a count or name comes from them."""


def _count(report: ReportV3) -> Any:
    """The accelerator count, and where it came from when the spec did not state it."""
    count = num(report.hardware.count, 0)
    hw_spec = report.spec.hardware if report.spec is not None else None
    if hw_spec is not None and hw_spec.adapter == "none" and hw_spec.gpus is None:
        return DASH  # nobody stated a count and no adapter read one: not a count of 1
    if hw_spec is None or hw_spec.gpus is not None or hw_spec.adapter not in _READ_ADAPTERS:
        return count
    return count + trusted(
        f" (every GPU the {hw_spec.adapter} adapter read: the spec's `hardware.gpus` is not set)"
    )


def _rated_bw(report: ReportV3) -> Any:
    """The rated bandwidth per GPU, and where it came from when the spec did not state it:
    the accelerator table (``tokenwatt/telemetry/hardware.yaml``), by the GPU's name."""
    bw = report.hardware.rated_bw_tbs_per_gpu
    if bw is None:
        return DASH
    text = trusted(f"{num(bw, 2)} TB/s")
    hw_spec = report.spec.hardware if report.spec is not None else None
    if hw_spec is None or hw_spec.rated_bw_tbs_per_gpu is not None:
        return text
    return (
        text
        + trusted(" (the accelerator table's figure for ")
        + md_text(report.hardware.accelerator)
        + trusted(": the spec's `hardware.rated_bw_tbs_per_gpu` is not set)")
    )


def setup_sections(
    report: ReportV3,
    analysis: ReportAnalysis | None = None,
    *,
    power: bool = True,
    accuracy: bool = True,
) -> list[dict[str, Any]]:
    """Sections of (field, value) rows; values are record text (escaped later) or Markup.

    With ``analysis``, the SLO section shows the measured variance band beside the stated
    one (:func:`tokenwatt.site.format.intervals.band_rows`). ``power`` / ``accuracy`` false: the
    record measured none, and its Power / Accuracy suite section is left out rather than
    filled with "none"."""
    one_repeat = all(c.repeats <= 1 for c in report.configs)
    hw, sw, model, wl = report.hardware, report.software, report.model, report.workload
    sections: list[dict[str, Any]] = [
        {
            "title": "Hardware",
            "rows": [
                ("Vendor", hw.vendor),
                ("Accelerator", DASH if hw.accelerator.strip() == "none" else hw.accelerator),
                ("Count", _count(report)),
                ("Rated memory bandwidth per GPU", _rated_bw(report)),
                ("Driver", _text(hw.driver)),
                ("Host", _text(hw.host)),
            ],
        },
        {
            "title": "Software",
            "rows": [
                ("Engine", sw.engine),
                ("Engine version", _text(sw.engine_version)),
                ("Kernels / image", _text(sw.kernels)),
            ],
        },
        {
            "title": "Model",
            "rows": [
                ("Name", model.name),
                ("Shape", _text(model.shape)),
                ("Quantization", _text(model.quantization)),
                ("Parallelism", _text(model.parallelism)),
            ],
        },
        {
            "title": "Workload",
            "rows": [
                ("Trace", wl.trace),
                ("Input tokens", _text(wl.input_tokens)),
                ("Output tokens", _text(wl.output_tokens)),
                ("Arrival", _text(wl.arrival)),
            ],
        },
        {
            "title": "SLO",
            "rows": [
                ("p99 TTFT limit", trusted(f"{num(report.slo.ttft_p99_ms, 0)} ms")),
                ("p99 TPOT limit", trusted(f"{num(report.slo.tpot_p99_ms, 1)} ms")),
                *_repeats_row(report),
                *(
                    band_rows(analysis, one_repeat=one_repeat)
                    if analysis is not None
                    else [("Variance band", trusted(f"±{num(report.variance_band_pct)}%"))]
                ),
            ],
        },
    ]
    if power:
        sections.append(
            {
                "title": "Power",
                "rows": [
                    ("Source", _text(report.power.source)),
                    ("Scope", report.power.kind),
                    ("Sampling", trusted(f"{num(report.power.sampling_hz, 1)} Hz")),
                    ("Window", _text(report.power.window)),
                ],
            }
        )
    if accuracy:
        sections.append(
            {
                "title": "Accuracy suite",
                "rows": [
                    ("Suite", report.accuracy.suite),
                    ("Gate threshold", trusted(f"{num(report.accuracy.threshold_pts)} points")),
                    *_suite_detail(report),
                ],
            }
        )
    if report.spec is not None:
        sections.append(_measurement_section(report, report.spec))
    return sections


def _unused(report: ReportV3) -> set[str]:
    """The spec fields the report's runs did not use (:func:`tokenwatt.records.unused_fields`:
    the search's and the repeats' in a fixed-load run, the accuracy section when no
    configuration has an accuracy result), as ``collect`` left them out of its print-out."""
    if report.spec is None:
        return set()
    ran_accuracy = any(c.accuracy is not None for c in report.configs)
    return unused_fields(report.spec, accuracy=ran_accuracy)


def _repeats_row(report: ReportV3) -> list[Row]:
    """Repeats per configuration; none for a fixed-load run (one window at each load)."""
    if report.spec is not None and report.spec.sweep.fixed:
        return []
    return [("Repeats per configuration", num(report.runs, 0))]


def _measurement_section(report: ReportV3, spec: Spec) -> dict[str, Any]:
    """The windows and the search, only the settings the runs used (a fixed-load run has
    no search window, repeats, start rate, growth or bisection)."""
    m, s = spec.measurement, spec.sweep
    unused = _unused(report)
    rows: list[tuple[str, str, Any]] = [
        ("measurement.warmup_s", "Warm-up", seconds(m.warmup_s)),
        ("measurement.window_s", "Measurement window", seconds(m.window_s)),
        ("measurement.search_window_s", "Search window", seconds(m.search_window_s)),
        ("measurement.repeats", "Repeats", num(m.repeats, 0)),
        ("measurement.request_timeout_s", "Request timeout", seconds(m.request_timeout_s)),
        (
            "sweep.growth",
            "Start rate / growth",
            trusted(f"{num(s.start_rps, 2)} req/s × {num(s.growth, 2)}"),
        ),
        ("sweep.bisect_steps", "Bisection steps", num(s.bisect_steps, 0)),
    ]
    used: list[Row] = [(label, value) for f, label, value in rows if field_used(f, unused)]
    title = "Measurement" if s.fixed else "Measurement and SLO search"
    return {"title": title, "rows": [*used, *mode_rows(report)]}


def _suite_detail(report: ReportV3) -> list[Row]:
    if report.spec is None:
        return []
    acc = report.spec.accuracy
    rows: list[Row] = [("Scorer", acc.scorer), ("Seeds", num(acc.seeds, 0))]
    if acc.limit is not None:
        rows.append(("Items", num(acc.limit, 0)))
    return rows


def throttle_rows(report: ReportV3, names: list[str]) -> list[dict[str, Any]]:
    """Throttle-reason sample counts per configuration, as a share of samples when known.

    Samples are the repeats' own counts (``repeats_detail[].power_samples``) when the record
    has them, else repeats × window (s) × sampling rate (Hz) from the record's spec
    (seed: 2 × 120 s × 1 Hz = 240; 199 of 240 ≈ 83%).
    """
    samples = None
    if report.spec is not None:
        m = report.spec.measurement
        samples = round(m.window_s * report.power.sampling_hz)
    rows = []
    for name, cfg in zip(names, report.configs, strict=True):
        total = None if samples is None else samples * cfg.repeats
        counted = [r.power_samples for r in cfg.repeats_detail]
        if counted and all(n is not None for n in counted):
            total = sum(n or 0 for n in counted)  # the windows' own sample counts
        for reason, count in sorted(cfg.throttle_counts.items()):
            share = (
                DASH
                if not total
                else trusted(f"{count:,} of {total:,} samples ({100 * count / total:.0f}%)")
            )
            rows.append({"name": name, "reason": reason, "count": num(count, 0), "share": share})
    return rows


def _per_config(report: ReportV3, texts: list[str]) -> str:
    """One text when every configuration has it, else ``label: text`` for each."""
    if len(set(texts)) == 1:
        return texts[0]
    return "; ".join(f"{c.label}: {t}" for c, t in zip(report.configs, texts, strict=True))


def mode_rows(report: ReportV3) -> list[Row]:
    """The mode preset of the runs and the spec values it replaced (spec → measured with),
    per configuration where they differ; none for reports made before they were kept.
    Values the runs did not use are left out, as ``collect`` left them out of its print-out.

    The values are record text (escaped by the page)."""
    rows: list[Row] = []
    if any(c.mode is not None for c in report.configs):
        rows.append(
            ("Mode", _per_config(report, [c.mode or "not recorded" for c in report.configs]))
        )
    if any(c.mode_overrides is not None for c in report.configs):
        unused = _unused(report)
        texts = [
            "not recorded"
            if c.mode_overrides is None
            else (
                overrides_text([o for o in c.mode_overrides if field_used(o.field, unused)])
                or "none"
            )
            for c in report.configs
        ]
        rows.append(("Spec values the mode replaced", _per_config(report, texts)))
    return rows

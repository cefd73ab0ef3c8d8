"""``--mode smoke|quick|full``: presets of windows, repeats and accuracy sample size.

A spec describes the full measurement. ``quick`` and ``smoke`` cap its values (never
lengthen them), so a spec written with short windows for a test stays short in every mode:

=========  ========  ========  ==============  =======  ==============  ==============
mode       warm-up   window    search window   repeats  accuracy items  accuracy seeds
=========  ========  ========  ==============  =======  ==============  ==============
full       spec      spec      spec            spec     spec            spec
quick      ≤ 45 s    ≤ 120 s   ≤ 60 s          ≤ 2      ≤ 50            1
smoke      ≤ 5 s     ≤ 20 s    ≤ 10 s          1        ≤ 5             1
=========  ========  ========  ==============  =======  ==============  ==============

``quick`` is the schedule of the seed lab note's first run (45 s warm-ups, 60 s probes,
two 120 s repeats, 50 GSM8K items). ``smoke`` checks the pipeline only: its records carry
``mode: "smoke"`` and their numbers are never reported as measurements (seed lab note,
change 3: short windows gave a misleading MBU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tokenwatt.records import (
    ModeOverride,
    Spec,
    field_used,
    overrides_text,
    unused_fields,
    value_text,
)

Mode = Literal["smoke", "quick", "full"]
MODES: tuple[Mode, ...] = ("smoke", "quick", "full")


@dataclass(frozen=True)
class ModePreset:
    """Upper bounds a mode puts on a spec's values; None leaves the spec's value.

    Attributes:
        warmup_s, window_s, search_window_s: seconds.
        repeats: measurement windows at the found rate.
        accuracy_limit: accuracy items per seed.
        accuracy_seeds: accuracy passes (seeds).
        reportable: False when the mode's numbers must never be reported as measurements.
    """

    warmup_s: float | None
    window_s: float | None
    search_window_s: float | None
    repeats: int | None
    accuracy_limit: int | None
    accuracy_seeds: int | None
    reportable: bool = True


PRESETS: dict[Mode, ModePreset] = {
    "full": ModePreset(None, None, None, None, None, None),
    "quick": ModePreset(45.0, 120.0, 60.0, 2, 50, 1),
    "smoke": ModePreset(5.0, 20.0, 10.0, 1, 5, 1, reportable=False),
}


IDLE_POWER_FULL_S = 30.0
"""Idle power measured before the first window in full mode (s): thirty 1 Hz samples of a
board that settles to idle within seconds (off by default in quick and smoke modes)."""


def _cap(value: float, bound: float | None) -> float:
    return value if bound is None else min(value, bound)


def apply_mode(spec: Spec, mode: Mode) -> Spec:
    """The spec with ``mode``'s caps applied (a new object; ``spec`` is not changed).

    The result is what a run actually measures and is what its record stores, so two runs
    compare (same fingerprint) only when their effective windows match.

    Raises:
        KeyError: ``mode`` is not one of :data:`MODES` (the CLI's choice list prevents it).
    """
    preset = PRESETS[mode]
    m = spec.measurement
    measurement = m.model_copy(
        update={
            "warmup_s": _cap(m.warmup_s, preset.warmup_s),
            "window_s": _cap(m.window_s, preset.window_s),
            "search_window_s": _cap(m.search_window_s, preset.search_window_s),
            "repeats": int(_cap(m.repeats, preset.repeats)),
        }
    )
    a = spec.accuracy
    limit = a.limit
    if preset.accuracy_limit is not None:
        limit = preset.accuracy_limit if limit is None else min(limit, preset.accuracy_limit)
    accuracy = a.model_copy(
        update={"limit": limit, "seeds": int(_cap(a.seeds, preset.accuracy_seeds))}
    )
    power = spec.power
    if power.idle_s is None:  # the mode's default, written into the effective spec
        idle = IDLE_POWER_FULL_S if mode == "full" and power.source != "none" else 0.0
        power = power.model_copy(update={"idle_s": idle})
    return spec.model_copy(
        update={"measurement": measurement, "accuracy": accuracy, "power": power}
    )


MODE_FIELDS: tuple[tuple[str, str], ...] = (
    ("measurement", "warmup_s"),
    ("measurement", "window_s"),
    ("measurement", "search_window_s"),
    ("measurement", "repeats"),
    ("accuracy", "limit"),
    ("accuracy", "seeds"),
    ("power", "idle_s"),
)
"""The spec fields :func:`apply_mode` may change, as (section, field)."""


def mode_overrides(raw: Spec, effective: Spec) -> list[ModeOverride]:
    """The fields of :data:`MODE_FIELDS` whose value differs between the spec as read
    (``raw``) and the spec the run measures with (``effective``, from :func:`apply_mode`),
    in that order."""
    out: list[ModeOverride] = []
    for section, name in MODE_FIELDS:
        before = getattr(getattr(raw, section), name)
        after = getattr(getattr(effective, section), name)
        if before != after:
            out.append(
                ModeOverride(field=f"{section}.{name}", spec_value=before, effective_value=after)
            )
    return out


def not_applying(spec: Spec, *, accuracy: bool) -> set[str]:
    """Dotted spec fields (``section.field``; ``accuracy`` for the whole section) that this
    run does not use (:func:`tokenwatt.records.unused_fields`, the same list the report
    page uses). They stay in the record's spec (and its fingerprint); they are only left out
    of what is printed."""
    return unused_fields(spec, accuracy=accuracy)


def mode_lines(
    spec: Spec, mode: Mode, overrides: list[ModeOverride], *, accuracy: bool = True
) -> list[str]:
    """What ``collect`` prints at the start: the effective windows (s), search bounds,
    repeats and accuracy sample after ``mode``'s preset (``spec`` is the effective spec),
    then which spec values the mode replaced (old → new) or that it replaced none. Values
    the run does not use (:func:`not_applying`: accuracy not run, repeats and search
    windows of a fixed-load run) are not printed."""
    unused = not_applying(spec, accuracy=accuracy)
    overrides = [o for o in overrides if field_used(o.field, unused)]
    m, s, a = spec.measurement, spec.sweep, spec.accuracy
    closed = m.profile == "concurrency"
    if s.fixed:
        loads = s.concurrencies if closed else s.rates
        unit = "clients" if closed else "req/s"
        search = (
            "none: one window at each of " + ", ".join(f"{x:g}" for x in loads or []) + f" {unit}"
        )
    elif closed:
        listed = s.concurrencies
        search = (
            "clients " + ", ".join(str(c) for c in listed)
            if listed
            else f"from {s.start_concurrency} clients ×{s.growth:g} up to "
            f"{m.max_concurrency} clients, {s.bisect_steps} bisection steps"
        )
    elif s.rates:
        search = "rates " + ", ".join(f"{r:g}" for r in s.rates) + " req/s"
    else:
        search = (
            f"from {s.start_rps:g} req/s ×{s.growth:g} up to {s.max_rps:g} req/s, "
            f"{s.bisect_steps} bisection steps"
        )
    if not accuracy or not a.suite:
        acc = "accuracy not run" + (" (--no-accuracy)" if a.suite else " (no suite)")
    else:
        items = "every item" if a.limit is None else f"{a.limit} items"
        acc = f"accuracy {items} × {a.seeds} seed{'s' if a.seeds != 1 else ''}"
    searched = "" if s.fixed else f"search window {m.search_window_s:g} s, "
    lines = [
        f"{mode} mode: warm-up {m.warmup_s:g} s, {searched}measurement window {m.window_s:g} s"
        + ("; " if s.fixed else f", {m.repeats} repeat{'s' if m.repeats != 1 else ''}; ")
        + f"search {search}; {acc}; "
        f"idle power {value_text(spec.power.idle_s)} s"
    ]
    if overrides:
        lines.append(f"{mode} mode replaced spec values: {overrides_text(overrides)}")
    else:
        lines.append(f"{mode} mode replaced no spec value")
    return lines

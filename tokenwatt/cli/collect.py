"""The point-and-shoot options of ``tokenwatt collect`` (kept out of :mod:`tokenwatt.cli.group`).

:func:`point_options` adds the flags; :func:`point_inputs` turns them, with ``--spec``,
``--label`` and ``--role``, into what :class:`~tokenwatt.collect.plan.options.CollectOptions`
takes. What each flag sets, the defaults and their sources are in
:mod:`tokenwatt.collect.plan.point`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tokenwatt.errors import InputError, Problem

if TYPE_CHECKING:
    from tokenwatt.collect import PointFlags

F = TypeVar("F", bound=Callable[..., Any])

POINT_KEYS = (
    "model",
    "rate",
    "rates",
    "concurrency",
    "sweep",
    "profile",
    "input_tokens",
    "output_tokens",
    "duration",
    "warmup",
    "ttft_p99_ms",
    "tpot_p99_ms",
    "vocab_size",
    "allow_model_alias",
)


def point_options(func: F) -> F:
    """Add the point-and-shoot options to a click command."""
    pos_int = click.IntRange(min=1)
    pos_float = click.FloatRange(min=0, min_open=True, max=1e12)
    options = [
        click.option("--model", default=None, help="Served model name (needed without --spec)."),
        click.option("--rate", type=pos_float, default=None, help="One fixed window at R req/s."),
        click.option(
            "--rates", default=None, metavar="R1,R2,…", help="A fixed window at each rate."
        ),
        click.option(
            "--concurrency",
            default=None,
            metavar="C[,C…]",
            help="Fixed closed-loop windows: C clients, each sending when its last request ends.",
        ),
        click.option(
            "--sweep",
            is_flag=True,
            help="Run the SLO search (over clients with --profile concurrency).",
        ),
        click.option(
            "--profile",
            type=click.Choice(["poisson", "constant", "concurrency"]),
            default=None,
            help="Load profile (measurement.profile): Poisson or evenly spaced arrivals, "
            "or a closed loop.",
        ),
        click.option(
            "--input-tokens", type=pos_int, default=None, help="Every prompt's length (tokens)."
        ),
        click.option(
            "--output-tokens", type=pos_int, default=None, help="Every output's length (tokens)."
        ),
        click.option("--duration", type=pos_float, default=None, help="Measured window (s)."),
        click.option(
            "--warmup",
            type=click.FloatRange(min=0, max=1e12),
            default=None,
            help="Load before each window, not measured (s; default 10 without --spec).",
        ),
        click.option(
            "--ttft-p99-ms",
            type=pos_float,
            default=None,
            help="SLO: p99 TTFT limit (ms; default 450).",
        ),
        click.option(
            "--tpot-p99-ms",
            type=pos_float,
            default=None,
            help="SLO: p99 TPOT limit (ms; default 40).",
        ),
        click.option(
            "--vocab-size",
            type=click.IntRange(min=11),
            default=None,
            help="Token ids are drawn below it (default without --spec: the vocabulary "
            "the server reports, else 32000).",
        ),
        click.option(
            "--allow-model-alias",
            is_flag=True,
            help="Measure even when /v1/models does not list --model (engine.model_alias_ok): "
            "for a gateway that maps names. Without it collect stops before the first request.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def point_flags(values: dict[str, Any]) -> PointFlags:
    """The :class:`PointFlags` of the options' values (keys :data:`POINT_KEYS`).

    Raises:
        InputError: ``--rate`` with ``--rates``, or a list that is not positive numbers in
            increasing order (named).
    """
    # Imported here: the CLI starts without loading the record models.
    from tokenwatt.collect import PointFlags, parse_list

    rate, rates = values.get("rate"), values.get("rates")
    if rate is not None and rates is not None:
        raise InputError([Problem("--rates", "", "give --rate or --rates, not both")])
    parsed_rates = (rate,) if rate is not None else None
    if rates is not None:
        parsed_rates = parse_list("--rates", rates, float)
    conc = values.get("concurrency")
    return PointFlags(
        model=values.get("model"),
        rates=parsed_rates,
        concurrencies=None if conc is None else parse_list("--concurrency", conc, int),
        sweep=bool(values.get("sweep")),
        profile=values.get("profile"),
        input_tokens=values.get("input_tokens"),
        output_tokens=values.get("output_tokens"),
        duration_s=values.get("duration"),
        warmup_s=values.get("warmup"),
        ttft_p99_ms=values.get("ttft_p99_ms"),
        tpot_p99_ms=values.get("tpot_p99_ms"),
        vocab_size=values.get("vocab_size"),
        allow_model_alias=bool(values.get("allow_model_alias")),
    )


def point_inputs(
    spec_path: Path | None, label: str | None, role: str | None, values: dict[str, Any]
) -> tuple[Path, str, str, PointFlags]:
    """(spec path, label, role, flags) of a collect command line.

    With ``--spec``, ``--label`` and ``--role`` are needed as before. Without it the spec is
    built from the flags (spec path :data:`~tokenwatt.collect.plan.point.FLAGS_SPEC`), the
    label defaults to ``--model`` and the role to ``baseline``.

    Raises:
        InputError: a missing ``--label``/``--role`` with ``--spec``, or bad flags (named).
    """
    from tokenwatt.collect import FLAGS_SPEC

    flags = point_flags(values)
    if spec_path is not None:
        for name, value in (("--label", label), ("--role", role)):
            if value is None:
                raise InputError([Problem(name, "", "is needed with --spec")])
        assert label is not None and role is not None
        return spec_path, label, role, flags
    if flags.model is None:
        raise InputError(
            [Problem("--spec", "", "give --spec, or --endpoint and --model with a load flag")]
        )
    return FLAGS_SPEC, label or flags.model, role or "baseline", flags


__all__ = ["POINT_KEYS", "point_flags", "point_inputs", "point_options"]

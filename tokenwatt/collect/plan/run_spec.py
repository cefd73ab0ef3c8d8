"""The spec a ``tokenwatt collect`` run measures (:func:`run_spec`): the spec file's or the
point-and-shoot flags' (:mod:`~tokenwatt.collect.plan.point`), with the command's overrides
(:func:`~tokenwatt.collect.plan.runfile.adjust_run_spec`) and the mode's preset, and the
refusals that come before the first request.

It sits above :mod:`~tokenwatt.collect.plan.point`, :mod:`~tokenwatt.collect.plan.runfile`
and :mod:`~tokenwatt.collect.plan.options` (which all use ``point``), so that ``point``
imports none of them back.
"""

from __future__ import annotations

from tokenwatt.collect.load.closedloop import closed_loop_workers
from tokenwatt.collect.load.pool.ray_pool import import_ray
from tokenwatt.collect.plan.modes import apply_mode
from tokenwatt.collect.plan.options import CollectOptions
from tokenwatt.collect.plan.point import (
    FLAGS_SPEC,
    RAY_FIELD,
    PointFlags,
    check_endpoint_flag,
    check_flags,
    override_spec,
    point_spec,
)
from tokenwatt.collect.plan.runfile import adjust_run_spec
from tokenwatt.errors import InputError, Problem
from tokenwatt.records import Spec, load_spec


def run_spec(opts: CollectOptions) -> tuple[Spec, Spec]:
    """The spec a collect run measures, before and after the mode: the spec file's (or one
    built from the flags when ``opts.spec_path`` is :data:`FLAGS_SPEC`), with the
    point-and-shoot flags laid over it, then ``--endpoint``, ``--kv-dtype`` and
    ``--workers`` (:func:`tokenwatt.collect.plan.runfile.adjust_run_spec`): that is the first;
    the second has the mode's preset applied (:func:`tokenwatt.collect.plan.modes.apply_mode`).

    Raises:
        SpecError: the spec file cannot be read or is invalid.
        InputError: a bad flag or combination, named.
    """
    flags = opts.point or PointFlags()
    from_flags = opts.spec_path == FLAGS_SPEC
    check_flags(flags, has_spec=not from_flags)
    if from_flags:
        if opts.endpoint is None:
            raise InputError([Problem("--endpoint", "", "is needed without --spec")])
        check_endpoint_flag(opts.endpoint)
        spec = point_spec(flags, opts.endpoint)
    else:
        spec = load_spec(opts.spec_path)
        if flags.any_given:
            spec = override_spec(spec, flags)
    raw = adjust_run_spec(spec, opts.endpoint, opts.kv_dtype, opts.workers, opts.ray_address)
    asked = raw.measurement.workers
    closed_loop_workers(raw, asked if isinstance(asked, int) else 1)  # refused before the probe
    check_ray_options(raw, opts)
    return raw, apply_mode(raw, opts.mode)


def check_ray_options(spec: Spec, opts: CollectOptions) -> None:
    """Refuse Ray options that cannot run, before the first request: a Ray address
    without Ray installed, or with the closed loop (its clients run in this process).

    Raises:
        InputError: named ``--ray-address``, or the spec file's ``measurement.ray_address``.
    """
    if spec.measurement.ray_address is None:
        return
    by_flag = opts.ray_address is not None or opts.spec_path == FLAGS_SPEC
    file, field = ("--ray-address", "") if by_flag else (str(opts.spec_path), RAY_FIELD)
    if spec.measurement.profile == "concurrency":
        message = (
            "Ray workers cannot drive a closed loop yet (measurement.profile: concurrency "
            "runs its clients in this process); leave the Ray address out"
        )
        raise InputError([Problem(file, field, message)])
    import_ray(field or file, file if field else "")


__all__ = ["check_ray_options", "run_spec"]

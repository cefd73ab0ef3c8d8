"""Which workers a run's windows are sent by (:func:`pool_for`): Ray actors, local worker
processes or none.

It sits above both kinds of pool (:mod:`~tokenwatt.collect.load.pool.workers`,
:mod:`~tokenwatt.collect.load.pool.ray_pool`), which share the base
:class:`~tokenwatt.collect.load.pool.workers.WindowPool`, so that neither imports the other's
module back. Ray itself is imported only when a Ray pool starts
(:func:`~tokenwatt.collect.load.pool.ray_pool.import_ray`).
"""

from __future__ import annotations

from tokenwatt.collect.load.pool.ray_pool import RayPool
from tokenwatt.collect.load.pool.workers import WindowPool, WorkerPool
from tokenwatt.records import Spec


def pool_for(spec: Spec, workers: int) -> WindowPool | None:
    """The run's workers: Ray actors when ``measurement.ray_address`` is set (one per node
    for ``measurement.workers`` 1 or ``auto``, else ``workers`` spread,
    :class:`~tokenwatt.collect.load.pool.ray_pool.RayPool`), ``workers`` local processes
    when above 1, else None (this process sends). Not started yet."""
    address = spec.measurement.ray_address
    if address is not None:
        asked = spec.measurement.workers
        return RayPool(address, asked if isinstance(asked, int) and asked > 1 else None)
    return WorkerPool(workers) if workers > 1 else None


__all__ = ["pool_for"]

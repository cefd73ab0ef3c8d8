"""``prometheus`` power: DCGM exporter series read through a Prometheus server's query API.

For deployments past one box: every GPU of every node that the DCGM exporter reports,
summed. Each reading runs two instant queries (``/api/v1/query``):

- ``DCGM_FI_DEV_POWER_USAGE`` (W per GPU) → summed power;
- ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (mJ per GPU since the driver loaded) → one
  energy counter per series, so the window's energy is the counters' difference and a
  counter that goes backwards on any node invalidates it.

``power.field``, when given, is a PromQL label matcher added to both series, e.g.
``{Hostname=~"gpu-node-0[1-4]"}``. The exporter is scraped every 15–30 s in most setups,
so each window edge is uncertain by up to one scrape interval; use windows of several
minutes with this source. After each window the timeline is replaced by
``sum(DCGM_FI_DEV_POWER_USAGE)`` from ``/api/v1/query_range`` over the window (step: the
sampling interval, at least 1 s), which shows the exporter's own points rather than the live
samples' repeats of them.

Partitions: a GPU split into MIG instances appears once per instance, every copy carrying
the whole board's ``DCGM_FI_DEV_POWER_USAGE`` and the parent GPU's ``UUID`` (the instance is
in ``GPU_I_ID``). Summing them would count one 250 W board as 750 W, so series are folded
to one per physical GPU (host and UUID) before summing, and the record notes it.
``hardware.gpus`` selects devices by DCGM's ``gpu`` label (the device index on each node);
a launched engine's GPUs, found by NVML on this host, are selected by the ``UUID`` label. A
selection the series cannot honour is an error (:func:`check_selection`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from tokenwatt.errors import TelemetryError
from tokenwatt.netpath import network_path
from tokenwatt.records import PowerMethod, PowerSample, PowerScope, PowerSpec
from tokenwatt.telemetry.base import HardwareIdentity, ReadError
from tokenwatt.telemetry.gpu_selection import GpuDevice, Selection
from tokenwatt.telemetry.hardware import lookup_accelerator

POWER_SERIES = "DCGM_FI_DEV_POWER_USAGE"
ENERGY_SERIES = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def series_id(labels: Mapping[str, str]) -> str:
    """A GPU's identity across nodes: host (``Hostname``/``instance``) and GPU (UUID/index)."""
    host = labels.get("Hostname") or labels.get("instance") or "?"
    gpu = labels.get("UUID") or labels.get("gpu") or labels.get("device") or "?"
    return f"{host}/{gpu}"


def physical_gpus(
    series: Sequence[tuple[dict[str, str], float]],
) -> tuple[list[tuple[dict[str, str], float]], int]:
    """One series per physical GPU (by :func:`series_id`), first copy kept, and how many
    duplicate copies (MIG instances of an already seen GPU) were folded away."""
    seen: set[str] = set()
    kept: list[tuple[dict[str, str], float]] = []
    for labels, value in series:
        key = series_id(labels)
        if key in seen:
            continue
        seen.add(key)
        kept.append((labels, value))
    return kept, len(series) - len(kept)


def gpu_matcher(
    selector: str, gpus: Sequence[int] | None, uuids: Sequence[str] | None = None
) -> str:
    """``selector`` (a ``{…}`` label matcher or empty) with ``gpu=~"i|j"`` added for the
    selected device indices and ``UUID=~"GPU-a|GPU-b"`` for selected UUIDs; unchanged when
    both are None."""
    clauses = []
    if gpus is not None:
        clauses.append('gpu=~"' + "|".join(str(g) for g in sorted(set(gpus))) + '"')
    if uuids is not None:
        # UUIDs are hex and dashes: nothing in them needs escaping in a regex.
        clauses.append('UUID=~"' + "|".join(sorted(set(uuids))) + '"')
    if not clauses:
        return selector
    clause = ",".join(clauses)
    if not selector:
        return "{" + clause + "}"
    inner = selector[1:-1].strip().rstrip(",")
    return "{" + (inner + "," if inner else "") + clause + "}"


def _results(body: Mapping[str, Any], result_type: str) -> list[Any]:
    """The ``data.result`` list of a Prometheus HTTP API answer of ``result_type``.

    Raises:
        ValueError: an error answer, or another result type.
    """
    if body.get("status") != "success":
        raise ValueError(f"{body.get('errorType', 'error')}: {body.get('error', 'query failed')}")
    data = body.get("data")
    if not isinstance(data, Mapping) or data.get("resultType") != result_type:
        raise ValueError(f"expected a {result_type} result")
    return list(data.get("result", []))


def parse_matrix(body: Mapping[str, Any]) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """``(labels, [(unix time, value), …])`` series of a range-query answer (matrix).

    Raises:
        ValueError: an error answer or an unexpected shape.
    """
    out = []
    for item in _results(body, "matrix"):
        labels = {str(k): str(v) for k, v in item.get("metric", {}).items()}
        out.append((labels, [(float(ts), float(v)) for ts, v in item.get("values", [])]))
    return out


def parse_vector(body: Mapping[str, Any]) -> list[tuple[dict[str, str], float]]:
    """``(labels, value)`` pairs of an instant-query answer (``resultType`` vector).

    Raises:
        ValueError: an error answer or an unexpected shape.
    """
    out: list[tuple[dict[str, str], float]] = []
    for item in _results(body, "vector"):
        labels = {str(k): str(v) for k, v in item.get("metric", {}).items()}
        out.append((labels, float(item["value"][1])))
    return out


def check_selection(
    series: Sequence[tuple[dict[str, str], float]],
    *,
    gpus: Sequence[int] | None,
    uuids: Sequence[str] | None,
) -> None:
    """Refuse a selection the exporter's series cannot honour.

    Raises:
        TelemetryError: naming the source: series without the ``gpu`` label while
            ``hardware.gpus`` selects by index, without ``UUID`` while selecting by UUID, or
            a selected index or UUID with no series.
    """
    for label, wanted in (("gpu", gpus), ("UUID", uuids)):
        if wanted is None:
            continue
        seen = {labels.get(label) for labels, _ in series}
        if None in seen:
            raise TelemetryError(
                f"prometheus cannot apply the GPU selection: {POWER_SERIES} series carry no "
                f"{label!r} label (is this a DCGM exporter?)"
            )
        missing = sorted({str(w) for w in wanted} - {str(s) for s in seen})
        if missing:
            raise TelemetryError(
                f"prometheus has no {POWER_SERIES} series for selected GPU(s) "
                f"{', '.join(missing)} ({label} label)"
            )


class PrometheusSource:
    """Board power of many GPUs on many nodes, from DCGM exporter series in Prometheus.

    Args:
        power: the spec's ``power`` section (``url``; ``field`` as a label matcher).
        gpus: ``hardware.gpus``: device indices (DCGM's ``gpu`` label) to sum; None: all.
        uuids: the GPUs to sum by DCGM's ``UUID`` label (the launched engine's, found by
            NVML on this host); None: no UUID selection.
        timeout_s: HTTP timeout per query (s).

    Raises:
        TelemetryError: the server does not answer, has no power series, or a selection
            the series cannot honour (no ``gpu`` or ``UUID`` label, a selected GPU absent).
    """

    name = "prometheus"
    scope: PowerScope = "board"
    power_method: PowerMethod = "reading"

    def __init__(
        self,
        power: PowerSpec,
        *,
        gpus: Sequence[int] | None = None,
        uuids: Sequence[str] | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        if not power.url:
            raise TelemetryError("power.source 'prometheus' needs power.url")
        self.base = power.url.rstrip("/")
        self.selector = (power.field or "").strip()
        if self.selector and not (self.selector.startswith("{") and self.selector.endswith("}")):
            raise TelemetryError(
                f'power.field for prometheus must be a label matcher like {{Hostname="a"}}, '
                f"got {self.selector!r}"
            )
        base_selector = self.selector
        self.selector = gpu_matcher(self.selector, gpus, uuids)
        self.notes: list[str] = [
            "DCGM exporter series via Prometheus: time resolution is the exporter's scrape interval"
        ]
        options = network_path(self.base).httpx_options(verify=power.verify_tls)
        self._client = httpx.Client(timeout=timeout_s, **options)
        try:
            power_series = self._first_series(base_selector, gpus, uuids)
        except BaseException:
            self._client.close()
            raise
        physical, folded = physical_gpus(power_series)
        if folded:
            self.notes.append(
                f"{len(power_series)} power series are {len(physical)} physical GPUs "
                "(MIG instances report their board's power): each board counted once"
            )
        self._labels = [labels for labels, _ in physical]
        self.devices = len(physical)
        method = "engine processes (by UUID)" if uuids is not None else None
        method = method or ("spec hardware.gpus" if gpus is not None else "all series")
        self.selection = Selection(
            tuple(
                GpuDevice(
                    uuid=labels.get("UUID", series_id(labels)),
                    name=labels.get("modelName", "unknown"),
                    bus_id=labels.get("pci_bus_id", "").lower(),
                )
                for labels in self._labels
            ),
            method,
        )

    def _first_series(
        self, base_selector: str, gpus: Sequence[int] | None, uuids: Sequence[str] | None
    ) -> list[tuple[dict[str, str], float]]:
        """The selected power series, checked against the selection.

        Raises:
            TelemetryError: no answer, no series, or a selection they cannot honour.
        """
        try:
            power_series = self._query(POWER_SERIES)
        except ReadError as exc:
            raise TelemetryError(f"Prometheus at {self.base}: {exc}") from exc
        if not power_series and (gpus is not None or uuids is not None):
            # Nothing matched the selection: say why, from the unselected series.
            selected, self.selector = self.selector, base_selector
            try:
                check_selection(self._query(POWER_SERIES), gpus=gpus, uuids=uuids)
            except ReadError as exc:
                raise TelemetryError(f"Prometheus at {self.base}: {exc}") from exc
            finally:
                self.selector = selected
        if not power_series:
            raise TelemetryError(
                f"Prometheus at {self.base} has no {POWER_SERIES}{self.selector} series; "
                "is the DCGM exporter scraped?"
            )
        check_selection(power_series, gpus=gpus, uuids=uuids)
        return power_series

    def _query(self, series: str) -> list[tuple[dict[str, str], float]]:
        try:
            response = self._client.get(
                f"{self.base}/api/v1/query", params={"query": series + self.selector}
            )
            if response.status_code >= 500 or response.status_code in (401, 403, 404):
                raise ReadError(f"{series}: HTTP {response.status_code}")
            return parse_vector(response.json())
        except httpx.TimeoutException as exc:
            raise ReadError(f"{series}: timed out") from exc
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise ReadError(f"{series}: {type(exc).__name__}: {exc}") from exc

    def read(self) -> PowerSample:
        """Sum power over all series; energy counters per GPU (J).

        Raises:
            ReadError: a query failed or returned no power series.
        """
        power, _ = physical_gpus(self._query(POWER_SERIES))
        if not power:
            raise ReadError(f"no {POWER_SERIES} series")
        energy, _ = physical_gpus(self._query(ENERGY_SERIES))
        counters = {series_id(labels): mj / 1000.0 for labels, mj in energy} or None
        return PowerSample(power_w=sum(v for _, v in power), counters_j=counters)

    def window_series(
        self, start_unix: float, end_unix: float, step_s: float
    ) -> list[tuple[float, float]]:
        """Summed power over a past range, via ``/api/v1/query_range`` (``(unix s, W)``).

        Raises:
            ReadError: the query failed or the answer was not a matrix.
        """
        # max by physical GPU first: MIG instances repeat their board's power.
        query = f"sum(max by (Hostname, instance, UUID, gpu) ({POWER_SERIES}{self.selector}))"
        try:
            response = self._client.get(
                f"{self.base}/api/v1/query_range",
                params={"query": query, "start": start_unix, "end": end_unix, "step": step_s},
            )
            series = parse_matrix(response.json())
        except httpx.TimeoutException as exc:
            raise ReadError(f"{query}: timed out") from exc
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise ReadError(f"{query}: {type(exc).__name__}: {exc}") from exc
        return series[0][1] if series else []

    def identity(self) -> HardwareIdentity:
        """Model name (DCGM's ``modelName`` label), GPU count and driver, where labelled."""
        models = sorted({lab.get("modelName", "") for lab in self._labels} - {""})
        name = " + ".join(models) if models else "unknown (no modelName label)"
        row = lookup_accelerator(models[0]) if len(models) == 1 else None
        drivers = sorted({lab.get("DCGM_FI_DRIVER_VERSION", "") for lab in self._labels} - {""})
        return HardwareIdentity(
            vendor="NVIDIA",
            accelerator=name,
            count=len(self._labels),
            driver=", ".join(drivers) or None,
            rated_bw_tbs_per_gpu=row.rated_bw_tbs if row else None,
            rated_bw_source=row.source if row else None,
            table_key=row.key if row else None,
            device_ids=tuple(series_id(lab) for lab in self._labels),
        )

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

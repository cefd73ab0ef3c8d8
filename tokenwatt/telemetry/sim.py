"""``sim`` power: the simulated engine's modelled power, scraped from its ``/metrics``.

The simulator (``tokenwatt sim``) exports a gauge ``tokenwatt_sim_power_watts`` that follows
its load; when it also exports a counter ``tokenwatt_sim_energy_joules_total`` that counter is
used for the window's energy. Parsed with prometheus-client's text parser. Figures carry the
``sim`` scope and are never published as measurements.
"""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tokenwatt.errors import TelemetryError
from tokenwatt.netpath import network_path
from tokenwatt.records import PowerMethod, PowerSample, PowerScope
from tokenwatt.telemetry.base import HardwareIdentity, ReadError

POWER_METRIC = "tokenwatt_sim_power_watts"
ENERGY_METRIC = "tokenwatt_sim_energy_joules"  # family name; the sample is ..._total


def metrics_url(endpoint: str) -> str:
    """The ``/metrics`` URL of a server given its base or OpenAI ``/v1`` endpoint."""
    base = endpoint.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/metrics"


def parse_sim_metrics(text: str) -> tuple[float | None, float | None]:
    """Power (W, summed over the gauge's series) and energy counter (J) from metrics text.

    Raises:
        ValueError: the text is not Prometheus exposition format.
    """
    power: float | None = None
    energy: list[float] = []
    for family in text_string_to_metric_families(text):
        if family.name == POWER_METRIC:
            power = sum(s.value for s in family.samples)
        elif family.name in (ENERGY_METRIC, ENERGY_METRIC + "_total"):
            energy += [s.value for s in family.samples if s.name == ENERGY_METRIC + "_total"]
    return power, (sum(energy) if energy else None)


class SimSource:
    """Reads the simulated engine's power gauge over HTTP.

    Args:
        endpoint: the simulator's base URL (or its ``/v1`` endpoint).
        timeout_s: HTTP timeout per scrape (s).

    Raises:
        TelemetryError: the simulator does not answer or exports no power gauge.
    """

    name = "sim"
    scope: PowerScope = "sim"
    power_method: PowerMethod = "reading"
    devices = 1

    def __init__(self, endpoint: str, *, timeout_s: float = 2.0) -> None:
        self.url = metrics_url(endpoint)
        self.notes: list[str] = ["simulated power: modelled from the simulator's load"]
        self._client = httpx.Client(timeout=timeout_s, **network_path(self.url).httpx_options())
        try:
            first = self.read()
        except ReadError as exc:
            self._client.close()
            raise TelemetryError(f"simulated engine power at {self.url}: {exc}") from exc
        self._has_energy = first.counters_j is not None

    def read(self) -> PowerSample:
        """Scrape ``/metrics`` once.

        Raises:
            ReadError: HTTP error, timeout, bad text, or no power gauge.
        """
        try:
            response = self._client.get(self.url)
            response.raise_for_status()
            power, energy = parse_sim_metrics(response.text)
        except (httpx.HTTPError, ValueError) as exc:
            raise ReadError(f"{type(exc).__name__}: {exc}") from exc
        if power is None:
            raise ReadError(f"no {POWER_METRIC} gauge in {self.url}")
        return PowerSample(power_w=power, counters_j=None if energy is None else {"sim": energy})

    def identity(self) -> HardwareIdentity:
        """A simulated accelerator; its bandwidth comes from the spec, if at all."""
        return HardwareIdentity(vendor="sim", accelerator="simulated engine", count=1)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

"""``redfish`` power: a BMC's DMTF Redfish service over HTTPS (httpx).

Newer services expose ``Chassis/{id}/EnvironmentMetrics`` with ``PowerWatts.Reading`` (W) and
an energy counter, ``EnergyJoules.Reading`` (J) or ``EnergykWh.Reading`` (kWh); when present
the counter gives the window's energy. Older services have only ``Chassis/{id}/Power`` with
``PowerControl[].PowerConsumedWatts`` (W), integrated over the samples. Figures are ``node``
scope: whatever the chassis meters (usually the node's input power).

Credentials: ``power.username`` from the spec, the password only from the environment
variable that ``power.password_env`` names; it is never logged or written to a record.
``power.verify_tls`` is honoured; ``power.chassis`` picks a chassis by ``Id`` (default: the
first member of ``/redfish/v1/Chassis``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from tokenwatt.errors import TelemetryError
from tokenwatt.netpath import network_path
from tokenwatt.records import PowerMethod, PowerSample, PowerScope, PowerSpec
from tokenwatt.telemetry.base import HardwareIdentity, ReadError

KWH_J = 3.6e6
"""Joules per kilowatt-hour."""


def service_root(url: str) -> str:
    """``https://bmc`` → ``https://bmc/redfish/v1`` (kept when already given)."""
    base = url.rstrip("/")
    return base if base.endswith("/redfish/v1") else base + "/redfish/v1"


def _reading(doc: Mapping[str, Any], key: str) -> float | None:
    value = doc.get(key)
    if isinstance(value, Mapping):
        r = value.get("Reading")
        if isinstance(r, int | float) and not isinstance(r, bool):
            return float(r)
    return None


def parse_environment_metrics(doc: Mapping[str, Any]) -> tuple[float | None, float | None, str]:
    """Power (W), energy counter (J) and the counter's unit from an EnvironmentMetrics body.

    ``EnergyJoules`` is preferred to ``EnergykWh`` (finer resolution); the unit is ``J``,
    ``kWh`` or ``""`` when there is no counter.
    """
    watts = _reading(doc, "PowerWatts")
    joules = _reading(doc, "EnergyJoules")
    if joules is not None:
        return watts, joules, "J"
    kwh = _reading(doc, "EnergykWh")
    if kwh is not None:
        return watts, kwh * KWH_J, "kWh"
    return watts, None, ""


def reading_step(value: float) -> float:
    """The step a reported number resolves: 10^-d for ``d`` decimals in its shortest form
    (``1234.0`` → 1, ``12.25`` → 0.01). A reading ending in a zero digit looks coarser than
    its sensor, so the finest step over a window's readings is the one kept."""
    text = repr(float(value))
    if "e" in text or "E" in text:
        mantissa, _, exp = text.lower().partition("e")
        decimals = len(mantissa.partition(".")[2].rstrip("0")) - int(exp)
        return 10.0 ** (-decimals)
    decimals = len(text.partition(".")[2].rstrip("0"))
    return 10.0 ** (-decimals)


def parse_power_resource(doc: Mapping[str, Any]) -> float | None:
    """``PowerControl[].PowerConsumedWatts`` (W) of the older ``Power`` resource.

    The first entry that has a reading is the chassis total (entries after it, where a
    service lists them, are subsystems and would double-count).
    """
    controls = doc.get("PowerControl")
    if not isinstance(controls, list):
        return None
    for entry in controls:
        if isinstance(entry, Mapping):
            w = entry.get("PowerConsumedWatts")
            if isinstance(w, int | float) and not isinstance(w, bool):
                return float(w)
    return None


def _password(power: PowerSpec, environ: Mapping[str, str]) -> str | None:
    if not power.password_env:
        return None
    if power.password_env not in environ:
        raise TelemetryError(
            f"power.password_env names {power.password_env}, but that environment variable "
            "is not set"
        )
    return environ[power.password_env]


class RedfishSource:
    """Node power from a Redfish chassis.

    Args:
        power: the spec's ``power`` section (url, username, password_env, verify_tls, chassis).
        environ: where the password variable is read.
        timeout_s: HTTP timeout per request (s).

    Raises:
        TelemetryError: unreachable, TLS failure, credentials refused (401/403), no such
            chassis, or a chassis with neither EnvironmentMetrics nor Power.
    """

    name = "redfish"
    scope: PowerScope = "node"
    power_method: PowerMethod = "reading"
    devices = 1

    def __init__(
        self, power: PowerSpec, *, environ: Mapping[str, str], timeout_s: float = 5.0
    ) -> None:
        if not power.url:
            raise TelemetryError("power.source 'redfish' needs power.url")
        self.root = service_root(power.url)
        password = _password(power, environ)
        auth = httpx.BasicAuth(power.username, password or "") if power.username else None
        self.notes: list[str] = []
        self._client = httpx.Client(
            auth=auth,
            timeout=timeout_s,
            **network_path(self.root).httpx_options(verify=power.verify_tls),
            headers={"Accept": "application/json", "OData-Version": "4.0"},
        )
        try:
            self._chassis_id, self._metrics_path, self._generation = self._discover(power.chassis)
            first = self.read()
        except ReadError as exc:
            self.close()
            raise TelemetryError(f"Redfish at {self.root}: {exc}") from exc
        except BaseException:
            self.close()
            raise
        self._has_energy = first.counters_j is not None
        if self._generation == "EnvironmentMetrics" and self._energy_unit == "kWh":
            self.notes.append(
                "energy from EnvironmentMetrics.EnergykWh: its resolution may be coarse "
                "for short windows"
            )
        if self._generation == "Power":
            self.notes.append("older Redfish Power resource: energy integrated from samples")

    _energy_unit = ""
    counter_step_j: float | None = None
    """The energy counter's step (J), the finest seen in its readings (:func:`reading_step`
    of the reported number, in its unit)."""

    def _url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path
        host = self.root[: -len("/redfish/v1")]
        return host + path if path.startswith("/") else f"{self.root}/{path}"

    def _get(self, path: str) -> dict[str, Any]:
        url = self._url(path)
        try:
            response = self._client.get(url)
        except httpx.ConnectError as exc:
            hint = ""
            if "CERTIFICATE" in str(exc).upper() or "SSL" in str(exc).upper():
                hint = (
                    " (TLS verification failed; set power.verify_tls: false for a BMC with a "
                    "self-signed certificate)"
                )
            raise ReadError(f"cannot connect to {url}: {exc}{hint}") from exc
        except httpx.TimeoutException as exc:
            raise ReadError(f"{url} timed out after {self._client.timeout.read} s") from exc
        except httpx.HTTPError as exc:
            raise ReadError(f"{url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code in (401, 403):
            raise TelemetryError(
                f"Redfish at {self.root} refused the credentials (HTTP {response.status_code}): "
                "check power.username and the variable named by power.password_env"
            )
        if response.status_code != 200:
            raise ReadError(f"{url} answered HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError as exc:
            raise ReadError(f"{url} did not return JSON") from exc
        if not isinstance(body, dict):
            raise ReadError(f"{url} did not return a JSON object")
        return body

    def _discover(self, wanted: str | None) -> tuple[str, str, str]:
        collection = self._get(f"{self.root}/Chassis")
        members = [
            m["@odata.id"]
            for m in collection.get("Members", [])
            if isinstance(m, dict) and isinstance(m.get("@odata.id"), str)
        ]
        if not members:
            raise TelemetryError(f"Redfish at {self.root} lists no chassis")
        if wanted is None:
            path = members[0]
        else:
            hits = [m for m in members if m.rstrip("/").rsplit("/", 1)[-1] == wanted]
            if not hits:
                ids = [m.rstrip("/").rsplit("/", 1)[-1] for m in members]
                raise TelemetryError(f"power.chassis {wanted!r} not found; chassis: {ids}")
            path = hits[0]
        chassis = self._get(path)
        chassis_id = str(chassis.get("Id", path.rstrip("/").rsplit("/", 1)[-1]))
        for key in ("EnvironmentMetrics", "Power"):
            link = chassis.get(key)
            if isinstance(link, dict) and isinstance(link.get("@odata.id"), str):
                return chassis_id, link["@odata.id"], key
        raise TelemetryError(
            f"Redfish chassis {chassis_id} has neither EnvironmentMetrics nor Power; "
            "pick another with power.chassis"
        )

    def read(self) -> PowerSample:
        """Read the chassis' power (and energy counter where the service has one).

        Raises:
            ReadError: HTTP error, timeout, or no reading in the body.
            TelemetryError: credentials refused mid-run.
        """
        doc = self._get(self._metrics_path)
        if self._generation == "EnvironmentMetrics":
            watts, joules, unit = parse_environment_metrics(doc)
            self._energy_unit = unit
            if joules is not None:
                shown = joules / KWH_J if unit == "kWh" else joules
                step = reading_step(shown) * (KWH_J if unit == "kWh" else 1.0)
                self.counter_step_j = min(self.counter_step_j or step, step)
        else:
            watts, joules = parse_power_resource(doc), None
        if watts is None and joules is None:
            raise ReadError(f"no power reading in {self._metrics_path}")
        return PowerSample(
            power_w=watts, counters_j=None if joules is None else {self._chassis_id: joules}
        )

    def identity(self) -> HardwareIdentity:
        """The node's accelerators are not visible from the BMC: only the chassis is named."""
        return HardwareIdentity(
            vendor="unknown", accelerator=f"Redfish chassis {self._chassis_id}", count=0
        )

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
